import AsyncBroadcast
import EventLoopClock
import Foundation
import SyncControl
import SyncCoordinator
import SyncMetrics
import SyncCore
import SyncStore

/// Answers `io.syncd` calls from the coordinator and the store.
struct DaemonControlHandler: SyncControlHandler {
    let coordinator: SyncCoordinator<EventLoopClock>
    let store: SQLiteFeedStore
    let broadcaster: Broadcast<ControlStatus>
    let feedNames: [String]
    /// The metrics, made on request.
    let metrics: DaemonMetrics

    func status() async throws -> ControlStatus {
        guard let current = broadcaster.latest else {
            throw SyncControlError.notReady(feed: "*", reason: "syncd is starting")
        }
        return current
    }

    func statusUpdates() async -> AsyncStream<ControlStatus> {
        broadcaster.subscribe()
    }

    func refresh(feed: String?) async throws -> [String] {
        let targets = try resolve(feed)
        await coordinator.refresh(feed: feed)
        return targets
    }

    func markSeen(feed: String?) async throws -> [String] {
        let targets = try resolve(feed)
        await coordinator.markSeen(feed: feed)
        return targets
    }

    func loadOlder(feed: String?) async throws -> [String] {
        let targets = try resolve(feed)
        if let feed, let state = await coordinator.feed(feed)?.state, !state.hasLoaded {
            throw SyncControlError.notReady(feed: feed, reason: "the first load has not succeeded yet")
        }
        await coordinator.loadOlder(feed: feed)
        // Answer with the feeds that are loading older items now, not the ones asked about: a
        // feed at its end, offline or not loaded yet starts nothing, and saying otherwise
        // would promise a page that never comes.
        var loading: [String] = []
        var reason = "there is nothing older to load"
        for name in targets {
            guard let state = await coordinator.feed(name)?.state else { continue }
            if state.older.load.isLoading {
                loading.append(name)
            } else {
                reason = Self.whyNoOlderLoad(state)
            }
        }
        if let feed, loading.isEmpty {
            throw SyncControlError.notReady(feed: feed, reason: reason)
        }
        return loading
    }

    /// Why a load-older request started nothing for this feed.
    static func whyNoOlderLoad(_ state: FeedState) -> String {
        if !state.hasLoaded { return "the first load has not succeeded yet" }
        if state.endReached { return "the end of the feed is reached" }
        if state.older.paused { return "offline; older items load when the connection returns" }
        return "there is nothing older to load"
    }

    func retry(feed: String?) async throws -> [String] {
        let targets = try resolve(feed)
        await coordinator.retry(feed: feed)
        return targets
    }

    func items(feed: String, limit: Int, after: String?) async throws -> StoredItemPage {
        guard feedNames.contains(feed) else { throw SyncControlError.feedNotFound(feed) }
        // One extra item tells whether a next page exists without a count query.
        guard let items = try await store.items(feed: feed, after: after, limit: limit + 1) else {
            throw SyncControlError.invalidCursor(after ?? "")
        }
        let page = items.prefix(limit)
        return StoredItemPage(items: Array(page), next: items.count > limit ? page.last?.id : nil)
    }

    func itemChanges(feed: String, since: ChangePoint?) async throws -> AsyncThrowingStream<ItemChange, any Error> {
        guard feedNames.contains(feed) else { throw SyncControlError.feedNotFound(feed) }
        return store.changes(feed: feed, since: since)
    }

    func metrics() async throws -> String {
        String(decoding: await metrics.exposition(.prometheusText), as: UTF8.self)
    }

    private func resolve(_ feed: String?) throws -> [String] {
        guard let feed else { return feedNames }
        guard feedNames.contains(feed) else { throw SyncControlError.feedNotFound(feed) }
        return [feed]
    }
}
