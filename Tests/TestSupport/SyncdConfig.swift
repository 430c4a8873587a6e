import Foundation

/// A whole `syncd.toml`, for tests that run syncd (the binary or the service) with a configuration
/// of their own: the one place the tests spell syncd's configuration file.
///
/// It knows only the keys the tests set most; anything else goes in as raw TOML lines of the
/// table it belongs to (`daemonLines`, ``Network/lines``, ``Retry/lines``, ``Feed/lines``) or as
/// whole raw tables (`tables`); empty raw elements are left out, and each other one ends up on
/// lines of its own. It does not check what it renders: tests of the configuration parser, which
/// feed it malformed or unusual text on purpose, write that TOML as literals (well-formed
/// `[[feed]]` tables they may take from ``Feed/toml``).
public struct SyncdConfig: Sendable, Equatable {
    /// `[daemon] store`: the store's path.
    public var store: String
    /// `[daemon] control_socket`: the control socket's path.
    public var controlSocket: String
    /// `[daemon] log_level` (`"debug"`, `"info"`, …); `nil` leaves the key out (syncd's default).
    public var logLevel: String?
    /// More `[daemon]` keys, as raw TOML, one line each (an element may hold several lines).
    public var daemonLines: [String]
    /// The `[network]` table; `nil` leaves the table out.
    public var network: Network?
    /// The `[retry]` table; `nil` leaves the table out.
    public var retry: Retry?
    /// The `[metrics]` table; `nil` leaves the table out.
    public var metrics: Metrics?
    /// Whole tables more (`[connectivity_check]`, even `[[feed]]`s), as raw TOML, rendered in
    /// this order after the tables above and before ``feeds``.
    public var tables: [String]
    /// The `[[feed]]` entries, rendered in this order, after everything else.
    public var feeds: [Feed]

    /// A configuration with the given `[daemon]` keys and tables; every table left `nil` or empty
    /// is left out of ``toml``.
    public init(
        store: String,
        controlSocket: String,
        logLevel: String? = nil,
        daemonLines: [String] = [],
        network: Network? = nil,
        retry: Retry? = nil,
        metrics: Metrics? = nil,
        tables: [String] = [],
        feeds: [Feed] = []
    ) {
        self.store = store
        self.controlSocket = controlSocket
        self.logLevel = logLevel
        self.daemonLines = daemonLines
        self.network = network
        self.retry = retry
        self.metrics = metrics
        self.tables = tables
        self.feeds = feeds
    }

    /// syncd's `[network]` table.
    public struct Network: Sendable, Equatable {
        /// `settle` (a duration such as `"500ms"`); `nil` leaves the key out.
        public var settle: String?
        /// More `[network]` keys, as raw TOML, one line each (an element may hold several lines).
        public var lines: [String]

        /// A `[network]` table with these keys; `nil` ones are left out.
        public init(settle: String? = nil, lines: [String] = []) {
            self.settle = settle
            self.lines = lines
        }
    }

    /// syncd's `[retry]` table.
    public struct Retry: Sendable, Equatable {
        /// `base`: the first retry's delay (a duration); `nil` leaves the key out.
        public var base: String?
        /// `cap`: the longest delay (a duration); `nil` leaves the key out.
        public var cap: String?
        /// `reconnect_spread` (a duration); `nil` leaves the key out.
        public var reconnectSpread: String?
        /// `connect_timeout` (a duration); `nil` leaves the key out.
        public var connectTimeout: String?
        /// More `[retry]` keys (`multiplier = 2`, `max_attempts = 5`), as raw TOML, one line each.
        public var lines: [String]

        /// A `[retry]` table with these keys; `nil` ones are left out.
        public init(base: String? = nil, cap: String? = nil, reconnectSpread: String? = nil, connectTimeout: String? = nil, lines: [String] = []) {
            self.base = base
            self.cap = cap
            self.reconnectSpread = reconnectSpread
            self.connectTimeout = connectTimeout
            self.lines = lines
        }
    }

    /// syncd's `[metrics]` table.
    public struct Metrics: Sendable, Equatable {
        /// `listen`: `HOST:PORT` or an absolute Unix socket path; `nil` leaves the key out.
        public var listen: String?
        /// `textfile`: the `.prom` file's absolute path; `nil` leaves the key out.
        public var textfile: String?
        /// `textfile_interval` (a duration); `nil` leaves the key out.
        public var textfileInterval: String?

        /// A `[metrics]` table with these keys; `nil` ones are left out.
        public init(listen: String? = nil, textfile: String? = nil, textfileInterval: String? = nil) {
            self.listen = listen
            self.textfile = textfile
            self.textfileInterval = textfileInterval
        }
    }

    /// One `[[feed]]` entry.
    public struct Feed: Sendable, Equatable {
        /// `name`.
        public var name: String
        /// `url`.
        public var url: String
        /// `page_size`; `nil` leaves the key out.
        public var pageSize: Int?
        /// `refresh_interval` (a duration); `nil` leaves the key out.
        public var refreshInterval: String?
        /// `backfill` (a number of items); `nil` leaves the key out.
        public var backfill: Int?
        /// `timeout` (a duration); `nil` leaves the key out.
        public var timeout: String?
        /// `max_body_bytes`; `nil` leaves the key out.
        public var maxBodyBytes: Int?
        /// More keys of this feed, as raw TOML, one line each (an element may hold several lines).
        public var lines: [String]

        /// A feed with these keys; `nil` ones are left out.
        public init(
            name: String,
            url: String,
            pageSize: Int? = nil,
            refreshInterval: String? = nil,
            backfill: Int? = nil,
            timeout: String? = nil,
            maxBodyBytes: Int? = nil,
            lines: [String] = []
        ) {
            self.name = name
            self.url = url
            self.pageSize = pageSize
            self.refreshInterval = refreshInterval
            self.backfill = backfill
            self.timeout = timeout
            self.maxBodyBytes = maxBodyBytes
            self.lines = lines
        }

        /// The entry as a TOML `[[feed]]` table: the header, `name` and `url`, the keys set above
        /// in the order they are declared, then ``lines``; every line ends in a newline. This is
        /// how ``SyncdConfig/toml`` renders each of its feeds.
        public var toml: String {
            var text = "[[feed]]\n"
            text += SyncdConfig.key("name", quoted: name)
            text += SyncdConfig.key("url", quoted: url)
            text += SyncdConfig.key("page_size", pageSize)
            text += SyncdConfig.key("refresh_interval", quoted: refreshInterval)
            text += SyncdConfig.key("backfill", backfill)
            text += SyncdConfig.key("timeout", quoted: timeout)
            text += SyncdConfig.key("max_body_bytes", maxBodyBytes)
            text += SyncdConfig.raw(lines)
            return text
        }
    }

    /// The configuration as TOML text: `[daemon]`, then `[network]`, `[retry]` and `[metrics]`
    /// when set, then ``tables``, then one `[[feed]]` per feed, each table after a blank line.
    /// String values are TOML basic strings (quotes, backslashes and control characters escaped);
    /// every key line, the last included, ends in a newline.
    public var toml: String {
        var text = "[daemon]\n"
        text += Self.key("store", quoted: store)
        text += Self.key("control_socket", quoted: controlSocket)
        text += Self.key("log_level", quoted: logLevel)
        text += Self.raw(daemonLines)
        if let network {
            text += "\n[network]\n"
            text += Self.key("settle", quoted: network.settle)
            text += Self.raw(network.lines)
        }
        if let retry {
            text += "\n[retry]\n"
            text += Self.key("base", quoted: retry.base)
            text += Self.key("cap", quoted: retry.cap)
            text += Self.key("reconnect_spread", quoted: retry.reconnectSpread)
            text += Self.key("connect_timeout", quoted: retry.connectTimeout)
            text += Self.raw(retry.lines)
        }
        if let metrics {
            text += "\n[metrics]\n"
            text += Self.key("listen", quoted: metrics.listen)
            text += Self.key("textfile", quoted: metrics.textfile)
            text += Self.key("textfile_interval", quoted: metrics.textfileInterval)
        }
        for table in tables where !table.isEmpty {
            text += "\n" + Self.raw([table])
        }
        for feed in feeds {
            text += "\n" + feed.toml
        }
        return text
    }

    /// Writes ``toml`` to the file at `path` (atomically, UTF-8), replacing what was there.
    public func write(toFile path: String) throws {
        try toml.write(toFile: path, atomically: true, encoding: .utf8)
    }

    private static func key(_ name: String, quoted value: String?) -> String {
        value.map { "\(name) = \(basicString($0))\n" } ?? ""
    }

    private static func key(_ name: String, _ value: Int?) -> String {
        value.map { "\(name) = \($0)\n" } ?? ""
    }

    private static func raw(_ lines: [String]) -> String {
        lines.filter { !$0.isEmpty }.map { $0.hasSuffix("\n") ? $0 : $0 + "\n" }.joined()
    }

    /// `value` as a TOML basic string: in double quotes, with `"`, `\` and control characters escaped.
    private static func basicString(_ value: String) -> String {
        var out = "\""
        for scalar in value.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\t": out += "\\t"
            case "\r": out += "\\r"
            case _ where scalar.value < 0x20 || scalar.value == 0x7F:
                out += String(format: "\\u%04X", scalar.value)
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }
}
