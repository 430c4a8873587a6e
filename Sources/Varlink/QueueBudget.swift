import Synchronization

/// Bytes that each user's connections have read from their sockets and not yet answered (or
/// thrown away), with what the connections themselves cost, against a bound per user.
///
/// A connection's own bound keeps one connection small; this one keeps a user's connections
/// together small, so a user holding every slot it may hold still cannot make the server
/// buffer more than this. Bytes are charged when they are read, part of a message or not:
/// what the decoder holds of an unfinished message counts as much as a queued call.
final class QueueBudget: Sendable {
    /// Bytes one user's connections may hold together.
    let bytesPerUser: Int
    private let state = Mutex(State())

    private struct State {
        /// Bytes read and not yet answered or thrown away, by user.
        var held: [UInt32: Int] = [:]
        /// Room taken for reads under way, by user.
        var reserved: [UInt32: Int] = [:]
        /// What the user's open connections cost before they send anything, by user.
        var charged: [UInt32: Int] = [:]
        /// Connections waiting for their user's bytes to be released, by user.
        var waiting: [UInt32: [ObjectIdentifier: ConnectionLifecycle]] = [:]
    }

    init(bytesPerUser: Int) {
        self.bytesPerUser = bytesPerUser
    }

    /// Takes room for a read of up to `bytes` for `uid` when the user stays within the bound.
    /// When it does not, nothing is taken and `waiter` is told
    /// (``ConnectionLifecycle/signalRoom()``) at the user's next release, since only another
    /// connection's progress can make room.
    func reserve(_ bytes: Int, for uid: UInt32, waiter: ConnectionLifecycle) -> Bool {
        state.withLock { state in
            let taken = state.held[uid, default: 0] + state.reserved[uid, default: 0] + state.charged[uid, default: 0]
            guard taken + bytes <= bytesPerUser else {
                state.waiting[uid, default: [:]][ObjectIdentifier(waiter)] = waiter
                return false
            }
            state.reserved[uid, default: 0] += bytes
            return true
        }
    }

    /// A read for `uid` brought `bytes`, `reservation` of them out of room taken for it (0
    /// when none was left): the bytes are held whatever the total, since they were read.
    func read(_ bytes: Int, against reservation: Int, for uid: UInt32) {
        change(uid) { state in
            state.held[uid, default: 0] += bytes
            state.reserved[uid, default: 0] -= reservation
            return bytes < reservation
        }
    }

    /// Gives back `bytes` that `uid` held and room `reservation` it had taken, and wakes the
    /// user's waiting connections. Called with no connection's lock held: waking takes theirs.
    func release(_ bytes: Int, reservation: Int = 0, for uid: UInt32) {
        guard bytes > 0 || reservation > 0 else { return }
        change(uid) { state in
            state.held[uid, default: 0] -= bytes
            state.reserved[uid, default: 0] -= reservation
            return true
        }
    }

    /// Charges `uid` the cost of a connection that opened: it counts against the bound like
    /// bytes held, until ``discharge(_:for:)`` as the connection ends.
    func charge(_ bytes: Int, for uid: UInt32) {
        guard bytes > 0 else { return }
        state.withLock { $0.charged[uid, default: 0] += bytes }
    }

    /// Takes back a charge of ``charge(_:for:)`` and wakes the user's waiting connections.
    func discharge(_ bytes: Int, for uid: UInt32) {
        guard bytes > 0 else { return }
        change(uid) { state in
            state.charged[uid, default: 0] -= bytes
            return true
        }
    }

    /// Applies `body` to the state; when it says room was made, wakes the user's waiters.
    private func change(_ uid: UInt32, _ body: (inout State) -> Bool) {
        let waiters = state.withLock { state -> [ConnectionLifecycle] in
            let roomMade = body(&state)
            if state.held[uid] ?? 0 <= 0 { state.held[uid] = nil }
            if state.reserved[uid] ?? 0 <= 0 { state.reserved[uid] = nil }
            if state.charged[uid] ?? 0 <= 0 { state.charged[uid] = nil }
            guard roomMade else { return [] }
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

    /// Bytes all users' connections hold now (read, not yet answered or thrown away); the
    /// connections' charges are not bytes read, and not in this.
    var total: Int {
        state.withLock { $0.held.values.reduce(0, +) }
    }

    /// What all users' open connections are charged now (``charge(_:for:)``).
    var charges: Int {
        state.withLock { $0.charged.values.reduce(0, +) }
    }
}
