import ConnectivityPolicy
import Foundation

/// What an offline banner says: since when and why.
public struct OfflineBanner: Sendable, Hashable {
    /// When connectivity was lost.
    public var since: Date
    /// Why: no usable path, or (limited) a path with a failure above it.
    public var problem: ConnectivityProblem
    /// The evidence of a limited feed: the name that did not resolve, the portal's URL, the
    /// server's failure.
    public var detail: String?

    /// A banner for connectivity lost at `since` for `problem`, with a limited feed's evidence.
    public init(since: Date, problem: ConnectivityProblem, detail: String? = nil) {
        self.since = since
        self.problem = problem
        self.detail = detail
    }

    /// The machine-readable reason, e.g. `no-carrier`, or for a limited feed `dns-failed`.
    public var code: String { problem.code }
    /// The reason in words, e.g. "no carrier".
    public var reason: String { problem.description }
    /// The host is routed but something above the route fails (``detail`` says what).
    public var isLimited: Bool { problem.isLimited }
}

/// Whether a feed's host is reachable, as the feed's own connectivity verdict last said.
///
/// Each feed follows the verdict for its own host, so two feeds of one daemon can disagree (one
/// host behind a blackhole route, the other fine); clients show this per feed.
public struct FeedConnectivity: Sendable, Hashable {
    /// Reachable or not, and through what or why.
    public enum Status: Sendable, Hashable {
        /// Reachable through `link` (e.g. `eth0`) over `family` (`ipv4`, `ipv6`), when known, at
        /// the link's `cost`.
        case online(link: String?, family: String?, cost: LinkCostAssessment = .unknown)
        /// Not reachable, for `reason`.
        case offline(OfflineReason)
        /// Routed (through `link` over `family` when known) but not usable, for `reason`, with the
        /// evidence in `detail`.
        case limited(LimitedReason, detail: String, link: String?, family: String?)
    }

    /// Reachable or not.
    public var status: Status
    /// When the host last became reachable or unreachable; a change of link or of offline reason
    /// keeps it.
    public var since: Date

    /// A status that has held since `since`.
    public init(_ status: Status, since: Date) {
        self.status = status
        self.since = since
    }

    /// Whether the host is reachable.
    public var isOnline: Bool {
        if case .online = status { return true }
        return false
    }
}

/// The whole observable state of one feed: a value that clients render and syncd reports.
public struct FeedState: Sendable, Hashable {
    /// The feed's identifier.
    public var feed: String
    /// The first load.
    public var initial: DirectionState
    /// Loading older items (backfill, infinite scroll).
    public var older: DirectionState
    /// Loading newer items (refresh).
    public var newer: DirectionState
    /// Whether a first load has ever succeeded (possibly in an earlier run, read from the store).
    public var hasLoaded: Bool
    /// The older direction reached the end of the feed.
    public var endReached: Bool
    /// Items stored for this feed.
    public var itemCount: Int
    /// Set while offline.
    public var offline: OfflineBanner?
    /// The feed host's reachability; `nil` until a first verdict arrived.
    public var connectivity: FeedConnectivity?
    /// When a page was last committed.
    public var lastSyncAt: Date?
    /// Items refreshes brought in since the user last looked (``FeedEvent/seen``): new items
    /// only, not edits, not the first load or backfill.
    public var newItems: Int
    /// Newer items known to be missing still (page-numbered feeds); `nil` when none.
    public var gap: FeedGap?
    /// Bytes received over metered links today, when the feed has a
    /// ``SyncConfiguration/meteredBudget``; `nil` without one.
    public var meteredUsage: MeteredUsage?

    /// A state; the defaults are a feed that has not loaded.
    public init(
        feed: String,
        initial: DirectionState = .init(),
        older: DirectionState = .init(),
        newer: DirectionState = .init(),
        hasLoaded: Bool = false,
        endReached: Bool = false,
        itemCount: Int = 0,
        offline: OfflineBanner? = nil,
        connectivity: FeedConnectivity? = nil,
        lastSyncAt: Date? = nil,
        newItems: Int = 0,
        gap: FeedGap? = nil,
        meteredUsage: MeteredUsage? = nil
    ) {
        self.feed = feed
        self.initial = initial
        self.older = older
        self.newer = newer
        self.hasLoaded = hasLoaded
        self.endReached = endReached
        self.itemCount = itemCount
        self.offline = offline
        self.connectivity = connectivity
        self.lastSyncAt = lastSyncAt
        self.newItems = newItems
        self.gap = gap
        self.meteredUsage = meteredUsage
    }

    /// One direction's state.
    public subscript(direction: Direction) -> DirectionState {
        get {
            switch direction {
            case .initial: initial
            case .older: older
            case .newer: newer
            }
        }
        set {
            switch direction {
            case .initial: initial = newValue
            case .older: older = newValue
            case .newer: newer = newValue
            }
        }
    }

    /// A loaded feed with no items.
    public var isEmpty: Bool { hasLoaded && itemCount == 0 }
    /// Some direction waits for connectivity.
    public var isPaused: Bool { Direction.allCases.contains { self[$0].paused } }
    /// Connectivity to the feed's host is lost (or limited): the offline banner shows.
    public var isOffline: Bool { offline != nil }
    /// The earliest scheduled automatic retry over all directions.
    public var nextRetryAt: Date? {
        Direction.allCases.compactMap { self[$0].load.failure?.nextRetryAt }.min()
    }
}
