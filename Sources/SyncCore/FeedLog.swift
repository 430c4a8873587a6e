import Foundation

/// The feed-store contract as a pure value: the reference that ``InMemoryFeedStore`` uses and
/// that the SQLite store follows (its tests compare the two).
public struct FeedLog: Sendable, Hashable {
    /// Stored items, newest first.
    public private(set) var items: [FeedItem] = []
    public private(set) var feed: PersistedFeed = .fresh
    private var ids: Set<String> = []

    public init() {}

    /// The cursors and end flag after committing `page` in `direction`.
    ///
    /// Shared by every store so they agree: older pages move only the older cursor (its absence is
    /// the end of the feed; their own newer link points inside the stored items and is ignored);
    /// first and newer pages move the newer cursor when the server gave one; a page that lands in
    /// an empty feed also sets the older cursor, because it is the feed's first content (a refresh
    /// of a feed that was empty when first loaded).
    public static func cursors(
        after page: FeedPage,
        direction: Direction,
        current: PersistedFeed,
        feedWasEmpty: Bool
    ) -> (older: String?, newer: String?, endReached: Bool) {
        let newer = page.newerCursor ?? current.newerCursor
        switch direction {
        case .older:
            return (page.olderCursor, current.newerCursor, page.olderCursor == nil)
        case .initial:
            return (page.olderCursor, newer, page.olderCursor == nil)
        case .newer:
            if feedWasEmpty { return (page.olderCursor, newer, page.olderCursor == nil) }
            return (current.olderCursor, newer, current.endReached)
        }
    }

    /// Commits one page: skips items already stored, prepends or appends the rest in page order.
    @discardableResult
    public mutating func commit(_ page: FeedPage, direction: Direction, at date: Date) -> CommitOutcome {
        let wasEmpty = items.isEmpty
        var fresh: [FeedItem] = []
        for item in page.items where !ids.contains(item.id) {
            ids.insert(item.id)
            fresh.append(item)
        }
        switch direction {
        case .older: items.append(contentsOf: fresh)
        case .initial, .newer: items.insert(contentsOf: fresh, at: 0)
        }
        let cursors = Self.cursors(after: page, direction: direction, current: feed, feedWasEmpty: wasEmpty)
        feed = PersistedFeed(
            olderCursor: cursors.older,
            newerCursor: cursors.newer,
            endReached: cursors.endReached,
            hasLoaded: true,
            itemCount: items.count,
            lastSyncAt: date,
            revision: feed.revision + 1
        )
        return CommitOutcome(feed: feed, pageItemCount: page.items.count, inserted: fresh.count)
    }
}

/// A ``FeedStore`` in memory, for unit tests and clients that need no persistence.
public actor InMemoryFeedStore: FeedStore {
    private var logs: [String: FeedLog] = [:]

    public init() {}

    public func load(feed: String) -> PersistedFeed {
        logs[feed]?.feed ?? .fresh
    }

    public func commit(feed: String, direction: Direction, page: FeedPage, at date: Date) -> CommitOutcome {
        logs[feed, default: FeedLog()].commit(page, direction: direction, at: date)
    }

    public func items(feed: String, offset: Int, limit: Int) -> [FeedItem] {
        let all = logs[feed]?.items ?? []
        guard offset < all.count, limit > 0 else { return [] }
        return Array(all[offset..<min(all.count, offset + limit)])
    }
}
