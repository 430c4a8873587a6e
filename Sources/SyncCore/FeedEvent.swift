import ConnectivityPolicy

/// Identifies one request or one timer, so that answers to cancelled work are recognised.
@_spi(StateMachine) public struct FetchToken: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// The token's number; each new request or timer gets a larger one.
    public let value: UInt64

    /// The token numbered `value`.
    public init(_ value: UInt64) {
        self.value = value
    }

    /// Older tokens sort first.
    public static func < (lhs: FetchToken, rhs: FetchToken) -> Bool { lhs.value < rhs.value }
    /// `#N`, as logs show it.
    public var description: String { "#\(value)" }
}

/// A request the machine wants sent.
@_spi(StateMachine) public struct FetchRequest: Sendable, Hashable {
    /// Which way to load.
    public var direction: Direction
    /// The cursor to continue from. `nil` for `initial`, and for `newer` when the server never
    /// gave a newer cursor (the feed was empty): then the source's first page is fetched.
    public var cursor: String?
    /// Identifies this request's answer.
    public var token: FetchToken
    /// For a newer request: read this much of the feed from its head down instead
    /// (``RevalidationWalk``), and commit it with ``FeedStore/revalidate(feed:walk:at:)``. When
    /// the walk meets no stored item, the driver sends the plain newer request instead.
    public var revalidate: RevalidationWindow?

    /// A request to load `direction` from `cursor`, revalidating `revalidate` when set.
    public init(direction: Direction, cursor: String?, token: FetchToken, revalidate: RevalidationWindow? = nil) {
        self.direction = direction
        self.cursor = cursor
        self.token = token
        self.revalidate = revalidate
    }
}

/// What happens to a feed: triggers, answers, timers and connectivity.
@_spi(StateMachine) public enum FeedEvent: Sendable, Hashable {
    /// The feed starts: the first load, or a refresh of a feed loaded in an earlier run.
    case start
    /// Manual refresh: loads newer items (or retries a failed first load).
    case refresh
    /// The periodic refresh timer: loads newer items unless a retry is already scheduled.
    case periodicRefresh
    /// Manual request for the next older page.
    case loadOlder
    /// Manual retry of what failed: the first load if it failed, otherwise older and newer.
    case retry
    /// The user has seen the feed's newest items: the count of new ones starts again at zero.
    case seen
    /// A fetched page was committed to the store.
    case committed(Direction, FetchToken, CommitOutcome)
    /// A request failed (fetching or committing).
    case failed(Direction, FetchToken, FeedError)
    /// A scheduled retry or reconnect delay is due.
    case timerFired(Direction, FetchToken)
    /// A request the machine did not send (one its driver fetched ahead) was answered with a
    /// `Retry-After`: nothing more in `direction` until `wait` has passed, and a retry already
    /// scheduled sooner moves to then.
    case serverAskedToWait(Direction, Duration)
    /// The feed's host is reachable, through `link` over `family` when the verdict names them,
    /// at the link's `cost`. Sent again when only the path or its cost changes.
    case online(link: String? = nil, family: String? = nil, cost: LinkCostAssessment = .unknown)
    /// Connectivity to the feed's host is lost, for `reason`.
    case offline(OfflineReason)
    /// The kernel routes the feed's host (through `link` over `family` when known), but something
    /// above the route fails: `code` (`dns-failed`, `portal`, `server-unreachable`), `reason` in
    /// words, and the evidence in `detail` (the name, the portal's URL, the server's failure).
    /// Pauses the feed like ``offline(_:)``: no request is sent, no retry is spent.
    case limited(LimitedReason, detail: String, link: String? = nil, family: String? = nil)
    /// What the feed received over metered links so far today (sent after each answer that
    /// added to it, and when a new day begins), for its ``SyncConfiguration/meteredBudget``.
    case meteredUsage(MeteredUsage)
}

/// What the machine asks its driver (the coordinator) to do.
@_spi(StateMachine) public enum FeedEffect: Sendable, Hashable {
    /// Send a request; answer with `.committed` or `.failed` carrying the same token.
    case fetch(FetchRequest)
    /// Cancel a request in flight; its answer, if any, must not be committed.
    case cancelFetch(Direction, FetchToken)
    /// Answer with `.timerFired` after `after`.
    case schedule(Direction, after: Duration, FetchToken)
    /// Drop a scheduled timer.
    case cancelTimer(Direction, FetchToken)
}
