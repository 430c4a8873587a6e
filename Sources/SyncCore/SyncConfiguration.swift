/// How a feed is kept in sync. syncd maps its TOML onto this; in-process clients build it directly.
public struct SyncConfiguration: Sendable, Hashable {
    /// Automatic retries of failed loads.
    public var retry: RetryPolicy
    /// On reconnect, held-back loads start after a random delay in `0...reconnectSpread`, so a
    /// fleet that regains the network together does not hit the server in the same instant.
    /// One second spreads a fleet over a window that users do not notice; zero starts at once.
    public var reconnectSpread: Duration
    /// Newer items are fetched this often while online; `nil` for no periodic refresh.
    public var refreshInterval: Duration?
    /// While online, older pages keep loading until this many items are stored or the feed's end
    /// is reached; 0 loads older pages only when asked (`loadOlder()`).
    public var backfillDepth: Int
    /// Whether a feed loaded in an earlier run fetches newer items when it starts.
    public var refreshOnStart: Bool
    /// Pages one refresh loads into a gap (page-numbered feeds that got more new items than a
    /// page) before it stops and shows the gap as not closed; the next refresh goes on from there.
    public var gapPageLimit: Int
    /// Older pages a backfill fetches ahead of the store's commits, at most. A commit that takes
    /// long (a group of pages being written while the disk is busy) then does not stop the
    /// network: on a fast link pages arrive much faster than such a commit ends, so the count must
    /// cover many of them (measured: BENCHMARKS.md, "Reading further ahead"). ``readAheadBytes``
    /// bounds the memory whatever the count. At least 1.
    public var readAheadPages: Int
    /// The item bytes of pages fetched ahead and not yet committed past which no further page is
    /// asked for, so feeds with large pages hold fewer of them. At least 1.
    public var readAheadBytes: Int
    /// Older pages a backfill stores in one transaction at most, when they arrive close behind
    /// each other: a page waits up to ``backfillCommitDelay`` for those fetched ahead right behind
    /// it. Fewer, larger transactions cost the store much less per item. At most half of
    /// ``readAheadPages`` is used, so the network never waits for the store; 1 commits every
    /// page as it arrives.
    public var backfillCommitPages: Int
    /// How long a backfill page waits, at most, for the pages behind it before it is committed
    /// with those that arrived (``backfillCommitPages``); zero commits every page as it arrives.
    /// A backfill's pages are old items, so a short wait is not seen.
    public var backfillCommitDelay: Duration
    /// What the feed does while its host is reached over a metered link. A manual trigger
    /// (``FeedEvent/refresh``, ``FeedEvent/loadOlder``, ``FeedEvent/retry``) still loads once.
    public var onMetered: MeteredPolicy
    /// Bytes the feed may receive over metered links per day, counted from what its source
    /// received (``FeedSource/bytesReceived``); `nil` for no limit. Past it, every automatic load
    /// waits for the next day or an unmetered link.
    public var meteredBudget: MeteredBudget?
    /// How much of the feed's newest part a refresh reads again, at most every
    /// ``revalidateInterval``, to find items the server edited or deleted; `nil` reads only what
    /// is new. See ``RevalidationWalk`` and ``ReconcileRule``. Not done for a feed listed oldest
    /// first (``listsOldestFirst``): its head is its oldest page.
    public var revalidate: RevalidationWindow?
    /// The least time between two revalidations; refreshes in between read only what is new.
    public var revalidateInterval: Duration
    /// The feed is listed oldest first (``FeedSource/listsOldestFirst``, which a coordinator sets
    /// here from its source): after the first load, which is the oldest page, the newer walk
    /// starts at once and goes on while each page leads to another, so the whole list is read
    /// forward; a refresh goes on from the last page. Items it brings then are not counted as
    /// new to the user until the first walk has reached the newest.
    public var listsOldestFirst = false

    /// A configuration; negative values are raised to the smallest that makes sense.
    public init(
        retry: RetryPolicy = .default,
        reconnectSpread: Duration = .seconds(1),
        refreshInterval: Duration? = nil,
        backfillDepth: Int = 0,
        refreshOnStart: Bool = true,
        gapPageLimit: Int = 10,
        readAheadPages: Int = 64,
        readAheadBytes: Int = 8 << 20,
        backfillCommitPages: Int = 8,
        backfillCommitDelay: Duration = .milliseconds(20),
        onMetered: MeteredPolicy = .newer,
        meteredBudget: MeteredBudget? = nil,
        revalidate: RevalidationWindow? = nil,
        revalidateInterval: Duration = .seconds(600)
    ) {
        self.retry = retry
        self.reconnectSpread = max(.zero, reconnectSpread)
        self.refreshInterval = refreshInterval
        self.backfillDepth = max(0, backfillDepth)
        self.refreshOnStart = refreshOnStart
        self.gapPageLimit = max(1, gapPageLimit)
        self.readAheadPages = max(1, readAheadPages)
        self.readAheadBytes = max(1, readAheadBytes)
        self.backfillCommitPages = max(1, backfillCommitPages)
        self.backfillCommitDelay = max(.zero, backfillCommitDelay)
        self.onMetered = onMetered
        self.meteredBudget = meteredBudget
        self.revalidate = revalidate.map { if case .items(let count) = $0 { .items(max(1, count)) } else { $0 } }
        self.revalidateInterval = max(.zero, revalidateInterval)
    }

    /// The defaults: no periodic refresh, no backfill, refresh on start, only newer items over a
    /// metered link, no byte budget, no revalidation (every ten minutes when one is set).
    public static let `default` = SyncConfiguration()
}
