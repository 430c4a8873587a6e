import Synchronization

/// Fans values out to any number of `AsyncStream`s: the one broadcaster of the package (network
/// snapshots, feed states, control status).
///
/// Ordering: values are yielded under the broadcaster's lock, so every subscriber sees them in
/// publication order, even when several threads publish. A new subscriber first gets the latest
/// value (or the values it asks to be replayed), then every later one, with nothing lost or
/// repeated in between.
///
/// Memory: each subscriber buffers at most `bufferingNewest` undelivered values and drops the
/// oldest beyond that, so a stalled consumer costs a bounded amount and sees the newest state.
package final class Broadcast<Element: Sendable>: Sendable {
    private struct State {
        var latest: Element?
        var subscribers: [UInt64: AsyncStream<Element>.Continuation] = [:]
        var nextID: UInt64 = 0
        var finished = false
    }

    private let state: Mutex<State>
    private let bufferingNewest: Int

    /// - Parameters:
    ///   - bufferingNewest: undelivered values kept per subscriber (at least 1).
    ///   - latest: the value new subscribers get first until something is published.
    package init(bufferingNewest: Int, latest: Element? = nil) {
        self.bufferingNewest = max(1, bufferingNewest)
        self.state = Mutex(State(latest: latest))
    }

    /// The last published value.
    package var latest: Element? { state.withLock { $0.latest } }

    /// Subscribers whose streams are still open.
    package var subscriberCount: Int { state.withLock { $0.subscribers.count } }

    /// Records `value` as the latest and yields it to every subscriber.
    package func publish(_ value: Element) {
        state.withLock { state in
            guard !state.finished else { return }
            state.latest = value
            for continuation in state.subscribers.values { continuation.yield(value) }
        }
    }

    /// A stream of the latest value (when there is one), then every published value. Finished at
    /// once when the broadcaster is.
    package func subscribe() -> AsyncStream<Element> {
        subscribe(replay: nil)
    }

    /// A stream of `initial` (instead of the latest value), then every published value.
    package func subscribe(replaying initial: [Element]) -> AsyncStream<Element> {
        subscribe(replay: initial)
    }

    /// Ends every stream; later subscribers get a finished stream, later values are dropped.
    package func finish() {
        let subscribers = state.withLock { state -> [AsyncStream<Element>.Continuation] in
            guard !state.finished else { return [] }
            state.finished = true
            defer { state.subscribers = [:] }
            return Array(state.subscribers.values)
        }
        for continuation in subscribers { continuation.finish() }
    }

    private func subscribe(replay: [Element]?) -> AsyncStream<Element> {
        let (stream, continuation) = AsyncStream.makeStream(of: Element.self, bufferingPolicy: .bufferingNewest(bufferingNewest))
        let id = state.withLock { state -> UInt64? in
            guard !state.finished else { return nil }
            // Replayed under the lock: no value published meanwhile can overtake the replay.
            if let replay {
                for value in replay { continuation.yield(value) }
            } else if let latest = state.latest {
                continuation.yield(latest)
            }
            let id = state.nextID
            state.nextID += 1
            state.subscribers[id] = continuation
            return id
        }
        guard let id else {
            continuation.finish()
            return stream
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.state.withLock { $0.subscribers.removeValue(forKey: id) }
        }
        return stream
    }
}

extension Broadcast where Element: Equatable {
    /// Publishes `value` unless it equals the latest; returns whether it was published.
    @discardableResult
    package func publishIfChanged(_ value: Element) -> Bool {
        state.withLock { state in
            guard !state.finished, state.latest != value else { return false }
            state.latest = value
            for continuation in state.subscribers.values { continuation.yield(value) }
            return true
        }
    }
}
