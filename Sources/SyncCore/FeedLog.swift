import Foundation

/// The feed-store contract as a pure value: the reference that ``InMemoryFeedStore`` uses and
/// that the SQLite store follows (its tests compare the two).
public struct FeedLog: Sendable, Hashable {
    /// Stored items, newest first.
    public private(set) var items: [FeedItem] = []
    /// The feed's cursors and counts, as a store would persist them.
    public private(set) var feed: PersistedFeed = .fresh
    private var ids: Set<ExactID> = []
    /// The newest item stored when the open gap opened: gap pages go just above it.
    private var gapFloor: ExactID?

    /// An empty log: nothing stored, the feed fresh.
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

    /// The gap after committing a page, shared by every store.
    ///
    /// - Parameters:
    ///   - overlapped: the page held an item already stored.
    ///   - reachedFloor: (gap pages only) the page held an item stored before the gap opened.
    /// - Returns: the gap, and whether this page opened it.
    public static func gap(
        after page: FeedPage,
        direction: Direction,
        current: PersistedFeed,
        feedWasEmpty: Bool,
        overlapped: Bool,
        reachedFloor: Bool,
        inserted: Int
    ) -> (gap: FeedGap?, opened: Bool) {
        guard direction == .newer else { return (direction == .initial ? nil : current.gap, false) }
        if let gap = current.gap {
            // A gap page: the gap closes where it meets the older items, or at the feed's end.
            guard !reachedFloor, let next = page.continuation else { return (nil, false) }
            return (FeedGap(cursor: next, pages: gap.pages + 1, items: gap.items + inserted), false)
        }
        guard !feedWasEmpty, !overlapped, !page.items.isEmpty, let next = page.continuation else { return (nil, false) }
        return (FeedGap(cursor: next, pages: 1, items: inserted), true)
    }

    /// Commits one page: skips items already stored, places the rest in page order next to the
    /// stored items the page holds, or, when it holds none, where `direction` puts them.
    @discardableResult
    public mutating func commit(_ page: FeedPage, direction: Direction, at date: Date) -> CommitOutcome {
        let wasEmpty = items.isEmpty
        let gapPage = direction == .newer && feed.gap != nil
        var overlapped = false
        var reachedFloor = false
        var inserted = 0
        var updated = 0
        // Runs of new items, each between the stored items around it in the page.
        var upper: ExactID?
        var run: [FeedItem] = []
        var inPage: Set<ExactID> = []
        func flush(lower: ExactID?) {
            defer { run = [] }
            guard !run.isEmpty else { return }
            let index: Int
            if let upper, let at = position(of: upper) {
                index = at + 1
            } else if let lower, let at = position(of: lower) {
                index = at
            } else if direction == .older {
                index = items.count
            } else if gapPage, let floor = gapFloor, let at = position(of: floor) {
                index = at
            } else {
                index = 0
            }
            items.insert(contentsOf: run, at: index)
            for item in run { ids.insert(ExactID(item.id)) }
            inserted += run.count
        }
        for item in page.items {
            let key = ExactID(item.id)
            guard inPage.insert(key).inserted else { continue }
            if ids.contains(key) {
                overlapped = true
                if let at = position(of: key), Self.replaces(item, stored: items[at]) {
                    items[at] = item
                    updated += 1
                }
                if gapPage, let floor = gapFloor, let bottom = position(of: floor), let at = position(of: key), at >= bottom {
                    reachedFloor = true
                }
                flush(lower: key)
                upper = key
            } else {
                run.append(item)
            }
        }
        flush(lower: nil)
        // Tombstones in the page: those stored go now.
        let tombstones = Set(page.deletedIDs.map(ExactID.init)).intersection(ids)
        if !tombstones.isEmpty {
            items.removeAll { tombstones.contains(ExactID($0.id)) }
            ids.subtract(tombstones)
        }

        let cursors = Self.cursors(after: page, direction: direction, current: feed, feedWasEmpty: wasEmpty)
        let gap = Self.gap(
            after: page, direction: direction, current: feed, feedWasEmpty: wasEmpty,
            overlapped: overlapped, reachedFloor: reachedFloor, inserted: inserted)
        if gap.opened {
            gapFloor = items.count > inserted ? ExactID(items[inserted].id) : nil
        } else if gap.gap == nil {
            gapFloor = nil
        }
        feed = PersistedFeed(
            olderCursor: cursors.older,
            newerCursor: cursors.newer,
            endReached: cursors.endReached,
            hasLoaded: true,
            itemCount: items.count,
            lastSyncAt: date,
            revision: feed.revision + 1,
            gap: gap.gap
        )
        return CommitOutcome(
            feed: feed, pageItemCount: page.items.count, inserted: inserted, overlapped: overlapped, updated: updated, deleted: tombstones.count)
    }

    /// Commits a revalidation's reading: its items as a newer page, then removes the stored items
    /// ``ReconcileRule`` finds gone. Leaves an empty feed, or one with a gap open, as it is.
    @discardableResult
    public mutating func revalidate(_ walk: RevalidationResult, at date: Date) -> CommitOutcome {
        guard !items.isEmpty, feed.gap == nil else {
            return CommitOutcome(feed: feed, pageItemCount: 0, inserted: 0)
        }
        let gone = Set(ReconcileRule.deletions(stored: items.map(\.id), walk: walk).map(ExactID.init))
        var outcome = CommitOutcome(feed: feed, pageItemCount: 0, inserted: 0)
        for page in walk.pages { outcome.add(commit(page, direction: .newer, at: date)) }
        // The walk read down through the window: the refresh need not go on.
        outcome.overlapped = true
        if !gone.isEmpty {
            let before = items.count
            items.removeAll { gone.contains(ExactID($0.id)) }
            ids.subtract(gone)
            feed.itemCount = items.count
            outcome.deleted += before - items.count
        }
        outcome.feed = feed
        return outcome
    }

    /// Whether a fetched item replaces the stored one: when either states a version, only a newer
    /// version does; else any change of the payload's bytes does.
    public static func replaces(_ fetched: FeedItem, stored: FeedItem) -> Bool {
        if fetched.version != nil || stored.version != nil { return FeedItem.isNewer(fetched.version, than: stored.version) }
        return fetched.payload != stored.payload
    }

    private func position(of id: ExactID) -> Int? {
        items.firstIndex { ExactID($0.id) == id }
    }
}

/// A ``FeedStore`` in memory, for unit tests and clients that need no persistence.
public actor InMemoryFeedStore: FeedStore {
    private var logs: [String: FeedLog] = [:]
    private var usage: [String: MeteredUsage] = [:]

    /// An empty store.
    public init() {}

    /// The feed as stored; ``PersistedFeed/fresh`` for a feed never committed.
    public func load(feed: String) -> PersistedFeed {
        logs[feed]?.feed ?? .fresh
    }

    /// Stores one page and its cursors together, as the SQLite store does in one transaction.
    public func commit(feed: String, direction: Direction, page: FeedPage, at date: Date) -> CommitOutcome {
        logs[feed, default: FeedLog()].commit(page, direction: direction, at: date)
    }

    /// Commits a revalidation as ``FeedLog/revalidate(_:at:)`` does.
    public func revalidate(feed: String, walk: RevalidationResult, at date: Date) -> CommitOutcome {
        logs[feed, default: FeedLog()].revalidate(walk, at: date)
    }

    /// Stored items, newest first.
    public func items(feed: String, offset: Int, limit: Int) -> [FeedItem] {
        let all = logs[feed]?.items ?? []
        guard offset < all.count, limit > 0 else { return [] }
        return Array(all[offset..<min(all.count, offset + limit)])
    }

    /// The usage last recorded for `feed`.
    public func meteredUsage(feed: String) -> MeteredUsage? {
        usage[feed]
    }

    /// Keeps `usage` for `feed` (for this store's lifetime).
    public func recordMeteredUsage(feed: String, _ usage: MeteredUsage) {
        self.usage[feed] = usage
    }
}
