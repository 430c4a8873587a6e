import Synchronization

/// Bytes of calls that each user's connections have read but not yet answered, against a bound
/// per user.
///
/// A connection's own bound keeps one connection small; this one keeps a user's connections
/// together small, so a user holding every slot it may hold still cannot make the server
/// buffer more than this.
final class QueueBudget: Sendable {
    /// Queued bytes one user's connections may hold together.
    let bytesPerUser: Int
    private let state = Mutex(State())

    private struct State {
        var queued: [UInt32: Int] = [:]
        /// Connections waiting for their user's bytes to be released, by user.
        var waiting: [UInt32: [ObjectIdentifier: ConnectionLifecycle]] = [:]
    }

    init(bytesPerUser: Int) {
        self.bytesPerUser = bytesPerUser
    }

    /// Takes `bytes` for `uid` when the user stays within the bound. When it does not, nothing
    /// is taken and `waiter` is told (``ConnectionLifecycle/signalRoom()``) at the user's next
    /// release, since only another connection's progress can make room.
    func reserve(_ bytes: Int, for uid: UInt32, waiter: ConnectionLifecycle) -> Bool {
        state.withLock { state in
            let total = state.queued[uid, default: 0] + bytes
            guard total <= bytesPerUser else {
                state.waiting[uid, default: [:]][ObjectIdentifier(waiter)] = waiter
                return false
            }
            state.queued[uid] = total
            return true
        }
    }

    /// Gives back `bytes` that `uid` reserved, and wakes the user's waiting connections.
    /// Called with no connection's lock held: waking takes theirs.
    func release(_ bytes: Int, for uid: UInt32) {
        guard bytes > 0 else { return }
        let waiters = state.withLock { state in
            let remaining = state.queued[uid, default: 0] - bytes
            state.queued[uid] = remaining > 0 ? remaining : nil
            return state.waiting.removeValue(forKey: uid).map { Array($0.values) } ?? []
        }
        for waiter in waiters { waiter.signalRoom() }
    }

    /// Forgets `waiter`, whose connection ended.
    func forget(_ waiter: ConnectionLifecycle, of uid: UInt32) {
        state.withLock { state in
            state.waiting[uid]?[ObjectIdentifier(waiter)] = nil
            if state.waiting[uid]?.isEmpty == true { state.waiting[uid] = nil }
        }
    }

    /// Bytes all users' connections hold now.
    var total: Int {
        state.withLock { $0.queued.values.reduce(0, +) }
    }

    /// Bytes `uid`'s connections hold now.
    func held(by uid: UInt32) -> Int {
        state.withLock { $0.queued[uid, default: 0] }
    }
}
