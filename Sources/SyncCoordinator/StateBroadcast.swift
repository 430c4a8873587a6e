import Synchronization
import SyncCore

/// Fans feed states out to any number of watchers.
///
/// A class behind a `Mutex` rather than actor state so a feed can publish synchronously from
/// inside its own actor, and a parent coordinator can share one broadcast among all its feeds.
final class StateBroadcast: Sendable {
    private struct Watchers {
        var next = 0
        var continuations: [Int: AsyncStream<FeedState>.Continuation] = [:]
        var finished = false
    }

    private let watchers = Mutex(Watchers())

    /// A stream that first yields `initial`, then every published state.
    ///
    /// A watcher that falls behind keeps the newest 256 states: a UI needs the latest, and a
    /// stalled watcher must not grow the daemon's memory without bound.
    func subscribe(initial: [FeedState]) -> AsyncStream<FeedState> {
        let (stream, continuation) = AsyncStream.makeStream(of: FeedState.self, bufferingPolicy: .bufferingNewest(256))
        for state in initial { continuation.yield(state) }
        let id: Int? = watchers.withLock { watchers in
            guard !watchers.finished else { return nil }
            let id = watchers.next
            watchers.next += 1
            watchers.continuations[id] = continuation
            return id
        }
        guard let id else {
            continuation.finish()
            return stream
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.watchers.withLock { $0.continuations.removeValue(forKey: id) }
        }
        return stream
    }

    func publish(_ state: FeedState) {
        let targets = watchers.withLock { Array($0.continuations.values) }
        for continuation in targets { continuation.yield(state) }
    }

    /// Ends every stream; later subscribers get a finished stream.
    func finish() {
        let targets = watchers.withLock { watchers in
            watchers.finished = true
            defer { watchers.continuations = [:] }
            return Array(watchers.continuations.values)
        }
        for continuation in targets { continuation.finish() }
    }
}
