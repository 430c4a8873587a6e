import Synchronization

/// Fans status snapshots out to every watcher.
///
/// The daemon calls ``publish(_:)`` whenever its state changes and returns ``updates()`` from
/// ``SyncControlHandler/statusUpdates()``. Each subscriber gets the current status first and
/// then only the newest undelivered one, so a stalled client costs one snapshot of memory.
public final class StatusBroadcaster: Sendable {
    private struct State {
        var current: ControlStatus?
        var subscribers: [UInt64: AsyncStream<ControlStatus>.Continuation] = [:]
        var nextID: UInt64 = 0
        var finished = false
    }

    private let state: Mutex<State>

    public init(initial: ControlStatus? = nil) {
        state = Mutex(State(current: initial))
    }

    /// The last published status.
    public var current: ControlStatus? { state.withLock { $0.current } }

    /// The number of live subscribers.
    public var subscriberCount: Int { state.withLock { $0.subscribers.count } }

    /// Sends `status` to every subscriber, unless it equals the last one.
    public func publish(_ status: ControlStatus) {
        // Yielding under the lock keeps every subscriber's order equal to publication order.
        state.withLock { state in
            guard state.current != status else { return }
            state.current = status
            for continuation in state.subscribers.values { continuation.yield(status) }
        }
    }

    /// A stream of the current status and every later change.
    public func updates() -> AsyncStream<ControlStatus> {
        let (stream, continuation) = AsyncStream.makeStream(of: ControlStatus.self, bufferingPolicy: .bufferingNewest(1))
        let id = state.withLock { state -> UInt64? in
            guard !state.finished else { return nil }
            let id = state.nextID
            state.nextID += 1
            state.subscribers[id] = continuation
            if let current = state.current { continuation.yield(current) }
            return id
        }
        guard let id else {
            continuation.finish()
            return stream
        }
        continuation.onTermination = { [weak self] _ in
            self?.state.withLock { _ = $0.subscribers.removeValue(forKey: id) }
        }
        return stream
    }

    /// Ends every stream, e.g. at shutdown.
    public func finish() {
        let targets = state.withLock { state in
            state.finished = true
            defer { state.subscribers = [:] }
            return Array(state.subscribers.values)
        }
        for continuation in targets { continuation.finish() }
    }
}
