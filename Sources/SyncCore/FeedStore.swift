import Foundation

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
    public var itemCount: Int
    public var lastSyncAt: Date?
    /// Commits so far. Outcomes of concurrent commits (older and newer at once) can reach the
    /// coordinator out of order; the higher revision is the newer truth.
    public var revision: Int

    public init(
        olderCursor: String? = nil,
        newerCursor: String? = nil,
        endReached: Bool = false,
        hasLoaded: Bool = false,
        itemCount: Int = 0,
        lastSyncAt: Date? = nil,
        revision: Int = 0
    ) {
        self.olderCursor = olderCursor
        self.newerCursor = newerCursor
        self.endReached = endReached
        self.hasLoaded = hasLoaded
        self.itemCount = itemCount
        self.lastSyncAt = lastSyncAt
        self.revision = revision
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

    public init(feed: PersistedFeed, pageItemCount: Int, inserted: Int) {
        self.feed = feed
        self.pageItemCount = pageItemCount
        self.inserted = inserted
    }
}

/// Durable storage of feeds, as the coordinator needs it.
///
/// The contract every implementation keeps (``FeedLog`` is its reference):
/// - items are keyed by (feed, id); a page's items already stored are skipped, never duplicated;
/// - items keep feed order, newest first: an `initial` page, `older` pages appended below and
///   `newer` pages prepended above;
/// - a page, its cursors and end flag are committed in one transaction, so a crash leaves either
///   all of it or none of it: resuming from the stored cursors leaves no gap and no duplicate.
public protocol FeedStore: Sendable {
    /// The stored state of a feed; ``PersistedFeed/fresh`` for an unknown feed.
    func load(feed: String) async throws -> PersistedFeed
    /// Commits one page and its cursors atomically, as loaded in `direction`.
    func commit(feed: String, direction: Direction, page: FeedPage, at date: Date) async throws -> CommitOutcome
    /// Stored items, newest first.
    func items(feed: String, offset: Int, limit: Int) async throws -> [FeedItem]
}
