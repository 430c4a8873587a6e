import Foundation
import HTTPFeedSource
import Logging
import SyncCore

/// Everything syncd is configured with, read from TOML (`/etc/syncd/syncd.toml` by default).
///
/// ```toml
/// [daemon]
/// store = "/var/lib/syncd/syncd.sqlite"   # SQLite file (WAL)
/// control_socket = "/run/syncd/io.syncd"  # Varlink socket
/// control_group = "syncd"                 # members may refresh/retry/load older; root always may
/// log_level = "info"
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
/// ```
public struct DaemonConfiguration: Sendable {
    public var storePath: String = "/var/lib/syncd/syncd.sqlite"
    public var controlSocketPath: String = "/run/syncd/io.syncd"
    public var controlGroup: String?
    public var logLevel: Logger.Level = .info
    public var settle: Duration = .seconds(2)
    public var networkNamespacePath: String?
    public var receiveBufferSize: Int = 8 << 20
    public var retry: RetryPolicy = .default
    public var reconnectSpread: Duration = .seconds(1)
    public var connectTimeout: Duration = .seconds(10)
    /// How often feed host names are re-resolved besides resolver file changes and reconnects.
    public var resolveInterval: Duration = .seconds(300)
    /// Requests in a row without an answer before a feed's server is marked unreachable.
    public var unansweredThreshold: Int = 2
    /// The captive-portal check, when configured.
    public var connectivityCheck: ConnectivityCheck?
    public var feeds: [Feed] = []

    /// The `[connectivity_check]` table: NetworkManager's connectivity check, for captive portals.
    public struct ConnectivityCheck: Sendable {
        public var url: URL
        /// Expected status; `nil`: 204, or 200 when a body is expected.
        public var status: Int?
        /// The body must start with this.
        public var body: String?
        public var interval: Duration = .seconds(300)
        public var timeout: Duration = .seconds(10)

        public init(url: URL) {
            self.url = url
        }
    }

    /// One `[[feed]]` table.
    public struct Feed: Sendable {
        public var name: String
        public var http: HTTPFeedConfiguration
        public var sync: SyncConfiguration
        /// Retention: at most this many items (`keep_items`).
        public var keepItems: Int?
        /// Retention: items stored longer ago than this are dropped (`keep_days`).
        public var keepAge: Duration?
    }

    public init() {}

    public static let defaultPath = "/etc/syncd/syncd.toml"
}

/// A configuration problem, located in the file when possible.
public struct ConfigurationError: Error, CustomStringConvertible, Sendable {
    public var file: String
    public var line: Int?
    public var key: String?
    public var message: String

    public var description: String {
        var text = file
        if let line { text += ":\(line)" }
        text += ": "
        if let key { text += "\(key): " }
        return text + message
    }
}
