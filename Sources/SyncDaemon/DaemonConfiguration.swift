import ConnectivityCheck
import ConnectivityPolicy
import Foundation
import HTTPFeedSource
import NameResolution
import NetlinkMonitor
import Reachability
import LinkCost
import Logging
import SyncCore
import SyncMetrics
import SyncStore

/// Everything syncd is configured with, read from TOML (`/etc/syncd/syncd.toml` by default).
///
/// ```toml
/// [daemon]
/// store = "/var/lib/syncd/syncd.sqlite"   # SQLite file (WAL)
/// control_socket = "/run/syncd/io.syncd"  # Varlink socket
/// control_group = "syncd"                 # members may refresh/retry/load older; root always may
/// log_level = "info"
/// change_log_removals = 10000             # removals kept for WatchItems clients
///
/// [network]
/// settle = "2s"                           # online must hold this long before loads resume
/// namespace = "/var/run/netns/NAME"       # watch another network namespace (optional)
/// receive_buffer = 8388608                # netlink notification buffer, bytes
/// resolve_interval = "5m"                 # re-resolve feed host names this often (and on changes)
/// unanswered_threshold = 2                # requests in a row without an answer: server unreachable
///
/// [connectivity_check]                    # optional: captive portal detection, as NetworkManager's
/// url = "http://check.example/generate_204"
/// status = 204                            # expected status (204 without body, else 200)
/// body = "ok"                             # the body must start with this (optional)
/// interval = "5m"
/// timeout = "10s"
///
/// [metrics]                             # all optional; syncctl metrics always works
/// listen = "127.0.0.1:9559"               # HTTP /metrics; or a Unix socket path
/// textfile = "/var/lib/prometheus/node-exporter/syncd.prom"  # for node_exporter's textfile collector
/// textfile_interval = "15s"               # at most one write this often
///
/// [retry]
/// base = "1s"
/// multiplier = 1.6
/// cap = "2m"
/// max_attempts = 0                        # 0: no limit (transient errors only)
/// reconnect_spread = "1s"                 # random delay before resuming after reconnect
/// connect_timeout = "10s"
///
/// [[feed]]
/// name = "home"
/// url = "https://mastodon.example/api/v1/timelines/home"
/// id_field = "id"
/// page_size = 40
/// refresh_interval = "5m"
/// backfill = 1000                         # keep at least this many items (or the whole feed)
/// token_file = "/etc/syncd/home.token"    # or token = "..."
/// timeout = "30s"
/// max_body_bytes = 8388608
/// pagination = "cursor"                   # or "page" (GitHub); detected when not given
/// page_size_parameter = "limit"           # "per_page" for page feeds
/// gap_pages = 10                          # pages one refresh loads into a gap
/// ca_file = "/etc/syncd/ca.pem"           # https only: a private CA, besides the system store
/// client_certificate = "/etc/syncd/client.pem"  # mTLS; client_key defaults to this file
/// client_key = "/etc/syncd/client.key"
/// keep_items = 5000                       # retention: at most this many items
/// keep_days = 30                          # retention: drop items stored longer ago
/// stale_after = "1h"                      # syncctl status exits 2 when no page was stored this long
/// ```
public struct DaemonConfiguration: Sendable {
    /// The SQLite store (`store`); its directory is created when missing.
    public var storePath: String = "/var/lib/syncd/syncd.sqlite"
    /// How long one write of the store may run before syncd counts the store as hung (a frozen
    /// filesystem, a disk that stopped answering) and stops feeding systemd's watchdog, so that
    /// systemd restarts it (`[daemon] store_stall_limit`).
    public var storeStallLimit: Duration = .seconds(60)
    /// Removed items the store's change log keeps for `WatchItems` clients (`[daemon]
    /// change_log_removals`); a client asking from before the oldest kept is reset. The store's
    /// own default unless set.
    public var changeLogRemovals: Int = SQLiteFeedStore.defaultTombstoneLimit
    /// The Varlink control socket (`control_socket`), used when syncd was not socket-activated.
    public var controlSocketPath: String = "/run/syncd/io.syncd"
    /// Group whose members may refresh, load older and retry (`control_group`); root always may,
    /// `nil` means root only.
    public var controlGroup: String?
    /// The lowest level logged (`log_level`).
    public var logLevel: Logger.Level = .info
    /// How long online must hold before paused loads resume (`[network] settle`).
    public var settle: Duration = defaultSettleDelay
    /// Watch another network namespace (`[network] namespace`); `nil` watches syncd's own.
    public var networkNamespacePath: String?
    /// The netlink notification buffer in bytes (`[network] receive_buffer`).
    public var receiveBufferSize: Int = NetlinkMonitor.Configuration().receiveBufferSize
    /// Backoff for failed loads (`[retry]` base, multiplier, cap, max_attempts).
    public var retry: RetryPolicy = .default
    /// Random delay before feeds resume after a reconnect (`[retry] reconnect_spread`), so a
    /// fleet does not hit its servers at once.
    public var reconnectSpread: Duration = SyncConfiguration.default.reconnectSpread
    /// Limit on establishing a TCP connection (`[retry] connect_timeout`).
    public var connectTimeout: Duration = HTTPFeedClient.Options().connectTimeout
    /// How often feed host names are re-resolved besides resolver file changes and reconnects.
    public var resolveInterval: Duration = NameResolver.Configuration().refreshInterval
    /// Requests in a row without an answer before a feed's server is marked unreachable.
    public var unansweredThreshold: Int = HostReachability<ContinuousClock>.Configuration().unansweredThreshold
    /// The captive-portal check, when configured.
    public var connectivityCheck: ConnectivityCheck?
    /// The `[[feed]]` tables, in file order.
    public var feeds: [Feed] = []
    /// Where link costs come from besides NetworkManager: `[network] metered`, `unmetered`.
    public var linkCost = LinkCostTracker.Configuration()
    /// Whether NetworkManager's `Metered` is followed over the system bus (`[network] networkmanager`).
    public var followsNetworkManager = true
    /// The HTTP metrics endpoint (`[metrics] listen`); `nil`: none.
    public var metricsEndpoint: MetricsEndpoint.Configuration?
    /// The metrics textfile (`[metrics] textfile`, `textfile_interval`); `nil`: none.
    public var metricsTextfile: MetricsTextfileConfiguration?

    /// The `[connectivity_check]` table: NetworkManager's connectivity check, for captive portals.
    public struct ConnectivityCheck: Sendable {
        /// The check's URL (`url`).
        public var url: URL
        /// Expected status; `nil`: 204, or 200 when a body is expected.
        public var status: Int?
        /// The body must start with this.
        public var body: String?
        /// How often the check runs while online (`interval`); it also runs on every reconnect.
        public var interval: Duration = ConnectivityCheckConfiguration.defaultInterval
        /// Limit on one check (`timeout`).
        public var timeout: Duration = ConnectivityCheckConfiguration.defaultTimeout

        /// A check of `url` with the default status, interval and timeout.
        public init(url: URL) {
            self.url = url
        }
    }

    /// One `[[feed]]` table.
    public struct Feed: Sendable {
        /// The feed's name (`name`): its key in the store and in the control API.
        public var name: String
        /// Where and how the feed is fetched: URL, token, page size, pagination, TLS, limits.
        public var http: HTTPFeedConfiguration
        /// How the feed is synced: refresh interval, backfill depth, retry policy.
        public var sync: SyncConfiguration
        /// Retention: at most this many items (`keep_items`).
        public var keepItems: Int?
        /// Retention: items stored longer ago than this are dropped (`keep_days`).
        public var keepAge: Duration?
        /// Health: the feed is stale when no page was stored for this long (`stale_after`).
        public var staleAfter: Duration?
        /// The API's dialect its reading starts from (`dialect`), if one was named.
        public var dialect: FeedDialect?
    }

    /// The defaults, with no feeds.
    public init() {}

    /// Where syncd reads its configuration unless `--config` says otherwise.
    public static let defaultPath = "/etc/syncd/syncd.toml"
}

/// A configuration problem, located in the file when possible.
public struct ConfigurationError: Error, CustomStringConvertible, Sendable {
    /// The configuration file (or `<demo>` for the embedded default).
    public var file: String
    /// The line of the offending key, when TOMLKit reports it.
    public var line: Int?
    /// The offending key, as `table.key` or `feed[N].key`.
    public var key: String?
    /// What is wrong, in words.
    public var message: String

    /// `FILE:LINE: KEY: MESSAGE`, what syncd prints before exiting with EX_CONFIG.
    public var description: String {
        var text = file
        if let line { text += ":\(line)" }
        text += ": "
        if let key { text += "\(key): " }
        return text + message
    }
}

extension DaemonConfiguration {
    /// How long the feeds' pool keeps a connection with no request on it.
    ///
    /// Long enough for the next periodic refresh to reuse it when some feed refreshes within a
    /// minute. Otherwise nothing scheduled comes back before a server would close it anyway, so
    /// it goes two seconds after the last request (a sync's own requests follow each other with
    /// no pause): an idle daemon then holds no socket, and the pool's close does not wake it a
    /// minute later (BENCHMARKS.md, "The pool's idle close moved out of the idle minute").
    var idleConnectionTimeout: Duration {
        let soonest = feeds.compactMap(\.sync.refreshInterval).min()
        if let soonest, soonest + Self.refreshReuseMargin <= Self.longestIdleConnection {
            return soonest + Self.refreshReuseMargin
        }
        return Self.shortIdleConnection
    }

    static let refreshReuseMargin: Duration = .seconds(5)
    static let longestIdleConnection: Duration = .seconds(60)
    static let shortIdleConnection: Duration = .seconds(2)
}
