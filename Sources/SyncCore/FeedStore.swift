import Foundation

/// Newer items not loaded yet of a page-numbered feed: a refresh found more new items than one page
/// (its newest page shared no item with the store), so the pages below it are loaded until one
/// meets a stored item. Stored with the page that opened it, so a restart continues it.
public struct FeedGap: Sendable, Hashable {
    /// The next page to load into the gap.
    public var cursor: String
    /// Pages loaded since the gap opened (the page that opened it counts).
    public var pages: Int
    /// Items those pages added.
    public var items: Int

    /// A gap that continues at `cursor`, after `pages` pages that added `items` items.
    public init(cursor: String, pages: Int, items: Int) {
        self.cursor = cursor
        self.pages = pages
        self.items = items
    }
}

/// What a store knows about a feed: enough to resume without reloading everything.
public struct PersistedFeed: Sendable, Hashable {
    /// Where older pages continue; `nil` at the end of the feed or before the first load.
    public var olderCursor: String?
    /// Where newer pages continue; `nil` when the server never gave one.
    public var newerCursor: String?
    /// The older direction reached the end of the feed.
    public var endReached: Bool
    /// A first page has been committed.
    public var hasLoaded: Bool
    /// Items stored for the feed.
    public var itemCount: Int
    /// When a page was last committed; `nil` before the first.
    public var lastSyncAt: Date?
    /// Commits so far. Outcomes of concurrent commits (older and newer at once) can reach the
    /// coordinator out of order; the higher revision is the newer truth.
    public var revision: Int
    /// Newer items still to load below the newest page; `nil` when none are known to be missing.
    public var gap: FeedGap?

    /// A stored feed; the defaults are ``fresh``.
    public init(
        olderCursor: String? = nil,
        newerCursor: String? = nil,
        endReached: Bool = false,
        hasLoaded: Bool = false,
        itemCount: Int = 0,
        lastSyncAt: Date? = nil,
        revision: Int = 0,
        gap: FeedGap? = nil
    ) {
        self.olderCursor = olderCursor
        self.newerCursor = newerCursor
        self.endReached = endReached
        self.hasLoaded = hasLoaded
        self.itemCount = itemCount
        self.lastSyncAt = lastSyncAt
        self.revision = revision
        self.gap = gap
    }

    /// A feed that was never loaded.
    public static let fresh = PersistedFeed()
}

/// The result of committing one page.
public struct CommitOutcome: Sendable, Hashable {
    /// The feed as stored after the commit.
    public var feed: PersistedFeed
    /// Items in the page.
    public var pageItemCount: Int
    /// Items that were new (the rest were already stored and were skipped).
    public var inserted: Int
    /// Some item of the page was already stored: for a newer page, the refresh has met what the
    /// store holds and need not go on.
    public var overlapped: Bool
    /// Stored items the page brought changed, replaced in place (same position).
    public var updated: Int
    /// Stored items removed because the server no longer has them (a revalidation found them gone).
    public var deleted: Int

    /// The outcome of one commit.
    public init(feed: PersistedFeed, pageItemCount: Int, inserted: Int, overlapped: Bool = false, updated: Int = 0, deleted: Int = 0) {
        self.feed = feed
        self.pageItemCount = pageItemCount
        self.inserted = inserted
        self.overlapped = overlapped
        self.updated = updated
        self.deleted = deleted
    }

    /// Adds the outcome of a later page committed with this one (a revalidation commits its
    /// pages one after another): the counts add up, the feed is the later page's.
    public mutating func add(_ later: CommitOutcome) {
        feed = later.feed
        pageItemCount += later.pageItemCount
        inserted += later.inserted
        updated += later.updated
        deleted += later.deleted
        overlapped = overlapped || later.overlapped
    }
}

/// Durable storage of feeds, as the coordinator needs it.
///
/// The contract every implementation keeps (``FeedLog`` is its reference):
/// - items are keyed by (feed, id); a page's items already stored are never duplicated: one the
///   page brings changed replaces the stored one where it stands (only a newer version, when the
///   feed states versions), an unchanged one is not written;
/// - items keep feed order, newest first: an `initial` page, `older` pages appended below and
///   `newer` pages prepended above; new items of a page that also holds stored items go next to
///   them, in page order (a page shift: an item before a stored one is newer than it, whatever
///   direction brought the page);
/// - a newer page with a ``FeedPage/continuation`` that shares no item with a non-empty store opens
///   a ``FeedGap``; newer pages then load into it, just above the items stored before it opened,
///   until one meets such an item or has no continuation;
/// - a page, its cursors and end flag are committed in one transaction, so a crash leaves either
///   all of it or none of it: resuming from the stored cursors leaves no gap and no duplicate;
/// - a revalidation commits what it read as a newer page would (without opening a gap) and removes
///   the items ``ReconcileRule`` finds gone, in the same transaction.
public protocol FeedStore: Sendable {
    /// The stored state of a feed; ``PersistedFeed/fresh`` for an unknown feed.
    func load(feed: String) async throws -> PersistedFeed
    /// Commits one page and its cursors atomically, as loaded in `direction`.
    func commit(feed: String, direction: Direction, page: FeedPage, at date: Date) async throws -> CommitOutcome
    /// Stored items, newest first.
    func items(feed: String, offset: Int, limit: Int) async throws -> [FeedItem]
    /// Commits what a revalidation read from the feed's head down: its items as a newer page,
    /// and the removal of the stored items ``ReconcileRule/deletions(stored:walk:)`` finds gone,
    /// atomically. The outcome counts them in ``CommitOutcome/deleted``. A feed that is empty or
    /// has a ``FeedGap`` open is left as it is (its outcome reports the feed unchanged).
    func revalidate(feed: String, walk: RevalidationResult, at date: Date) async throws -> CommitOutcome
    /// Commits `pages`, each loaded with the older cursor of the one before it, in order, as
    /// ``commit(feed:direction:page:at:)`` would; returns the outcome of each page committed.
    ///
    /// Backfill uses it for pages that arrived while the one before them was being committed.
    /// A store that can commits them in one transaction (all land or none, the cursors of the
    /// last one with them); the default commits them one by one and stops at the first failure,
    /// returning what it committed (throwing only when the first page fails).
    func commit(feed: String, direction: Direction, pages: [FeedPage], at date: Date) async throws -> [CommitOutcome]
    /// The last ``MeteredUsage`` recorded for `feed`; `nil` when none was.
    func meteredUsage(feed: String) async throws -> MeteredUsage?
    /// Records `usage` as `feed`'s, replacing the one before, so a restart keeps counting the
    /// day's bytes against the feed's budget.
    func recordMeteredUsage(feed: String, _ usage: MeteredUsage) async throws
}

extension FeedStore {
    /// One transaction per page, in order, up to the first that fails.
    public func commit(feed: String, direction: Direction, pages: [FeedPage], at date: Date) async throws -> [CommitOutcome] {
        var outcomes: [CommitOutcome] = []
        for page in pages {
            do {
                outcomes.append(try await commit(feed: feed, direction: direction, page: page, at: date))
            } catch where !outcomes.isEmpty {
                break
            }
        }
        return outcomes
    }
}
