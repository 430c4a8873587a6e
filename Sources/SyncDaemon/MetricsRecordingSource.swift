import Foundation
import SyncCore
import SyncMetrics

/// A feed source that records each request in the daemon's metrics: its direction, how it
/// ended, how long it took, and whether it repeated a failed one.
struct MetricsRecordingSource: FeedSource {
    let base: any FeedSource
    let feed: String
    let metrics: SyncdMetrics

    func fetchInitial() async throws -> FeedPage { try await recording(.initial) { try await base.fetchInitial() } }
    func fetchOlder(cursor: String) async throws -> FeedPage { try await recording(.older) { try await base.fetchOlder(cursor: cursor) } }
    func fetchNewer(cursor: String) async throws -> FeedPage { try await recording(.newer) { try await base.fetchNewer(cursor: cursor) } }
    func fetchOlder(cursor: String, olderCursorKnown: @escaping @Sendable (String?) -> Void) async throws -> FeedPage {
        try await recording(.older) { try await base.fetchOlder(cursor: cursor, olderCursorKnown: olderCursorKnown) }
    }
    var executor: (any SerialExecutor)? { base.executor }
    var bytesReceived: Int64 { base.bytesReceived }

    private func recording(_ direction: Direction, _ request: () async throws -> FeedPage) async throws -> FeedPage {
        metrics.requestStarted(feed: feed, direction: direction)
        let started = ContinuousClock.now
        do {
            let page = try await request()
            metrics.requestEnded(feed: feed, direction: direction, outcome: .success, duration: .now - started, at: Date())
            return page
        } catch {
            metrics.requestEnded(feed: feed, direction: direction, outcome: RequestOutcome(error), duration: .now - started, at: Date())
            throw error
        }
    }
}
