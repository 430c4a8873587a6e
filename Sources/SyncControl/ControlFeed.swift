import Foundation
import SyncCore

/// Why a direction that would load waits while its host is reachable: what the link costs.
public struct ControlHold: Sendable, Hashable, Codable, CustomStringConvertible {
    /// What holds the direction back.
    public enum Reason: String, Sendable, Hashable, Codable {
        /// The link is metered and the feed's `on_metered` policy waits it out.
        case meteredLink = "metered_link"
        /// The feed's `metered_budget` for today is used.
        case meteredBudget = "metered_budget"
    }

    /// What holds the direction back.
    public var reason: Reason
    /// A spent budget: bytes received over metered links today.
    public var used: Int64?
    /// A spent budget: the budget, in bytes per day.
    public var budget: Int64?

    /// A hold for `reason`; `used` and `budget` describe a spent budget.
    public init(reason: Reason, used: Int64? = nil, budget: Int64? = nil) {
        self.reason = reason
        self.used = used
        self.budget = budget
    }

    /// `metered link`, `metered budget used: 50 MB today`: the words of the ``LoadHold`` it
    /// carries.
    public var description: String {
        switch reason {
        case .meteredLink: LoadHold.meteredLink.description
        case .meteredBudget: LoadHold.meteredBudget(used: used ?? 0, budget: budget ?? 0).description
        }
    }
}

/// Bytes a feed received over metered links on a day, against its budget.
public struct ControlMeteredUsage: Sendable, Hashable, Codable {
    /// The day, `YYYY-MM-DD` in syncd's local time.
    public var day: String
    /// Bytes received over metered links that day.
    public var bytes: Int64
    /// The feed's budget, in bytes per day.
    public var budget: Int64

    /// `bytes` of `budget` used on `day`.
    public init(day: String, bytes: Int64, budget: Int64) {
        self.day = day
        self.bytes = bytes
        self.budget = budget
    }
}

/// Why the store refuses what syncd writes, while it does.
public struct ControlStoreProblem: Sendable, Hashable, Codable {
    /// The condition.
    public enum Kind: String, Sendable, Hashable, Codable {
        /// The store's filesystem is mounted read-only.
        case readOnlyFilesystem = "read_only_filesystem"
        /// syncd may not write the store or its directory.
        case permissionDenied = "permission_denied"
        /// The store's directory does not exist.
        case noDirectory = "no_directory"
        /// The store's device is full.
        case diskFull = "disk_full"
        /// The file is not an SQLite database.
        case notADatabase = "not_a_database"
        /// The store's pages are damaged.
        case damaged
        /// The store was deleted or replaced while open.
        case replaced
        /// The device fails to read or write.
        case ioError = "io_error"
        /// Anything else.
        case other
    }

    /// The condition.
    public var kind: Kind
    /// The store's path.
    public var path: String
    /// The condition, the path and what to do, in words.
    public var message: String

    /// A problem of `kind` with the store at `path`, said as `message`.
    public init(kind: Kind, path: String, message: String) {
        self.kind = kind
        self.path = path
        self.message = message
    }
}

/// The state of one load direction of a feed (first load, older pages, newer items).
public struct ControlDirection: Sendable, Hashable, Codable {
    /// Where a direction's loading stands: not run yet, in flight, failed, or done.
    public enum Phase: String, Sendable, Hashable, Codable {
        /// Has not run.
        case idle
        /// A request is in flight.
        case loading
        /// The last request failed.
        case failed
        /// The last request succeeded.
        case loaded
    }

    /// Where loading stands.
    public var phase: Phase
    /// Waiting for connectivity; orthogonal to the phase.
    public var paused: Bool
    /// Failed: a message safe to show.
    public var error: String?
    /// Failed: attempts made so far.
    public var attempt: Int?
    /// Failed: when the next automatic attempt is due (`nil`: only on request).
    public var nextRetryAt: Date?
    /// Reachable, but held back by what the link costs; it loads when that lifts.
    public var held: ControlHold?

    /// A direction; `error`, `attempt` and `nextRetryAt` describe a failure.
    public init(phase: Phase, paused: Bool = false, error: String? = nil, attempt: Int? = nil, nextRetryAt: Date? = nil, held: ControlHold? = nil) {
        self.phase = phase
        self.paused = paused
        self.error = error
        self.attempt = attempt
        self.nextRetryAt = nextRetryAt
        self.held = held
    }

    /// Has not run.
    public static let idle = ControlDirection(phase: .idle)
    /// A request is in flight.
    public static let loading = ControlDirection(phase: .loading)
    /// The last request succeeded.
    public static let loaded = ControlDirection(phase: .loaded)

    /// The last request failed with `error`, on its `attempt`-th try.
    public static func failed(_ error: String, attempt: Int, nextRetryAt: Date?, paused: Bool = false) -> ControlDirection {
        ControlDirection(phase: .failed, paused: paused, error: error, attempt: attempt, nextRetryAt: nextRetryAt)
    }
}

/// One feed: per-direction state, counts and what a client should show.
public struct ControlFeed: Sendable, Hashable, Codable {
    /// The feed's name from the configuration.
    public var name: String
    /// Where the feed comes from, e.g. its URL (without credentials).
    public var source: String?
    /// The first load.
    public var initial: ControlDirection
    /// Loading older items.
    public var older: ControlDirection
    /// Loading newer items.
    public var newer: ControlDirection
    /// The oldest item of the feed is stored.
    public var endReached: Bool
    /// Loaded and without items.
    public var empty: Bool
    /// Items stored for the feed.
    public var itemCount: Int
    /// When a page was last stored; `nil` before the first.
    public var lastSync: Date?
    /// The earliest scheduled retry of any direction; computed when `nil` is passed.
    public var nextRetryAt: Date?
    /// Whether the feed's host is reachable, from the feed's own verdict; `nil` until known.
    public var connectivity: ControlConnectivity?
    /// What a client shows for the feed.
    public var presentation: ControlPresentation
    /// The feed counts as stale when no page was stored for this long (`stale_after`, in
    /// seconds); `nil` when not configured.
    public var staleAfter: Int?
    /// Today's bytes over metered links, when the feed has a metered budget.
    public var meteredUsage: ControlMeteredUsage?

    /// A feed's status; `nextRetryAt` is computed from the directions when `nil`.
    public init(
        name: String,
        source: String? = nil,
        initial: ControlDirection = .idle,
        older: ControlDirection = .idle,
        newer: ControlDirection = .idle,
        endReached: Bool = false,
        empty: Bool = false,
        itemCount: Int = 0,
        lastSync: Date? = nil,
        nextRetryAt: Date? = nil,
        connectivity: ControlConnectivity? = nil,
        presentation: ControlPresentation,
        staleAfter: Int? = nil,
        meteredUsage: ControlMeteredUsage? = nil
    ) {
        self.name = name
        self.source = source
        self.initial = initial
        self.older = older
        self.newer = newer
        self.endReached = endReached
        self.empty = empty
        self.itemCount = itemCount
        self.lastSync = lastSync
        self.nextRetryAt = nextRetryAt ?? [initial, older, newer].compactMap(\.nextRetryAt).min()
        self.connectivity = connectivity
        self.presentation = presentation
        self.staleAfter = staleAfter
        self.meteredUsage = meteredUsage
    }

    /// Every direction, labelled, in display order.
    public var directions: [(label: String, state: ControlDirection)] {
        [("initial", initial), ("older", older), ("newer", newer)]
    }
}

/// The whole daemon: connectivity and every feed.
public struct ControlStatus: Sendable, Hashable, Codable {
    /// The daemon's version.
    public var version: String
    /// The feed hosts' reachability, summed over the feeds.
    public var connectivity: ControlConnectivitySummary
    /// The internet at large (a route to a public address), for information: feeds follow their own hosts.
    public var internet: ControlConnectivity?
    /// Present while any feed cannot reach its host.
    public var banner: ControlOfflineBanner?
    /// Every configured feed, in configuration order.
    public var feeds: [ControlFeed]
    /// When syncd started; `nil` from a server that does not say.
    public var started: Date?
    /// Present while the store refuses what syncd writes (its last write failed).
    public var store: ControlStoreProblem?

    /// A status whose summary and banner are derived from the feeds' own connectivity.
    public init(version: String, internet: ControlConnectivity? = nil, feeds: [ControlFeed], started: Date? = nil, store: ControlStoreProblem? = nil) {
        self.init(
            version: version, connectivity: ControlConnectivitySummary(feeds: feeds), internet: internet,
            banner: ControlOfflineBanner(feeds: feeds), feeds: feeds, started: started, store: store
        )
    }

    /// A status with its summary and banner given.
    public init(
        version: String, connectivity: ControlConnectivitySummary, internet: ControlConnectivity? = nil,
        banner: ControlOfflineBanner? = nil, feeds: [ControlFeed], started: Date? = nil, store: ControlStoreProblem? = nil
    ) {
        self.version = version
        self.connectivity = connectivity
        self.internet = internet
        self.banner = banner
        self.feeds = feeds
        self.started = started
        self.store = store
    }

    /// The feed called `name`, if configured.
    public func feed(named name: String) -> ControlFeed? {
        feeds.first { $0.name == name }
    }
}
