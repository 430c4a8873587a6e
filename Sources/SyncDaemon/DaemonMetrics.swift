import EventLoopClock
import Foundation
import HTTPFeedSource
import SyncControl
import SyncCoordinator
import SyncMetrics
import Synchronization
import Varlink

/// The daemon's exposition: reads the figures other parts keep (the feeds' states, their
/// sources' byte counts, the store's files, the control server's connections, the process)
/// into ``SyncdMetrics``, then emits every metric.
///
/// Reading happens only when someone asks (a scrape, a textfile write, `GetMetrics`), so metrics
/// nobody reads cost an idle daemon nothing.
struct DaemonMetrics: Sendable {
    let metrics: SyncdMetrics
    let coordinator: SyncCoordinator<EventLoopClock>
    /// Each feed's HTTP source, by feed name: they count the bytes received.
    let sources: [String: HTTPFeedSource]
    let storePath: String
    /// The control server, once made: it is made after the handler that answers `GetMetrics`
    /// with this exposition.
    let server: Late<SyncControlServer>

    /// Every metric, now, in `format`.
    func exposition(_ format: ExpositionFormat) async -> [UInt8] {
        metrics.update(await coordinator.states())
        for (feed, source) in sources {
            metrics.receivedBytes(feed: feed, total: source.receivedBodyBytes)
        }
        metrics.store(databaseBytes: Self.size(of: storePath), logBytes: Self.size(of: storePath + "-wal"))
        if let control = server.value?.statistics {
            metrics.control(
                open: control.open, accepted: control.accepted,
                refused: Dictionary(uniqueKeysWithValues: VarlinkServer.Refusal.allCases.map { ($0.rawValue, control.refused[$0] ?? 0) }))
        }
        if let sample = ProcessSample.current() { metrics.process(sample) }
        return metrics.exposition(format)
    }

    /// The size of the file at `path`, 0 when there is none.
    private static func size(of path: String) -> Int {
        var info = stat()
        return stat(path, &info) == 0 ? Int(info.st_size) : 0
    }
}

/// A value set once, after those who read it were made.
final class Late<Value: Sendable>: Sendable {
    private let stored = Mutex<Value?>(nil)

    /// The value; `nil` until set.
    var value: Value? { stored.withLock { $0 } }

    /// Sets the value.
    func set(_ value: Value) { stored.withLock { $0 = value } }
}
