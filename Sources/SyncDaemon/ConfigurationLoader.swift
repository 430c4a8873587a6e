import Foundation
import HTTPFeedSource
import Logging
import SyncCore
import SyncMetrics
import TOMLKit

extension DaemonConfiguration {
    /// Reads and validates a TOML file.
    public static func load(path: String) throws(ConfigurationError) -> DaemonConfiguration {
        let text: String
        do {
            text = try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            throw ConfigurationError(file: path, message: "cannot read the configuration: \(error.localizedDescription)")
        }
        return try parse(text, file: path)
    }

    /// Parses TOML text; `file` names it in errors.
    public static func parse(_ text: String, file: String = "<config>") throws(ConfigurationError) -> DaemonConfiguration {
        let root: TOMLTable
        do {
            root = try TOMLTable(string: text)
        } catch let error as TOMLParseError {
            throw ConfigurationError(file: file, line: error.source.begin.line, message: "TOML syntax: \(error.description)")
        } catch {
            throw ConfigurationError(file: file, message: "TOML syntax: \(error)")
        }
        var reader = ConfigurationReader(file: file, locator: SourceLocator(text))
        return try reader.read(root)
    }
}

/// Walks the TOML tree, converting values and naming the key and line of anything wrong.
struct ConfigurationReader {
    let file: String
    let locator: SourceLocator

    mutating func read(_ root: TOMLTable) throws(ConfigurationError) -> DaemonConfiguration {
        var config = DaemonConfiguration()
        try expectOnly(root, keys: ["daemon", "network", "connectivity_check", "retry", "metrics", "feed"], table: nil)

        if let daemon = try table(root, "daemon") {
            let t = Section(name: "daemon", index: nil, table: daemon)
            try expectOnly(daemon, keys: ["store", "control_socket", "control_group", "log_level", "store_stall_limit", "change_log_removals"], table: t)
            if let v = try string(t, "store") { config.storePath = try nonEmpty(t, "store", v) }
            if let v = try duration(t, "store_stall_limit") { config.storeStallLimit = v }
            if let v = try int(t, "change_log_removals", range: 0...10_000_000) { config.changeLogRemovals = v }
            if let v = try string(t, "control_socket") { config.controlSocketPath = try nonEmpty(t, "control_socket", v) }
            config.controlGroup = try string(t, "control_group")
            if let v = try string(t, "log_level") {
                guard let level = Logger.Level(rawValue: v.lowercased()) else {
                    throw error(t, "log_level", "must be one of \(Logger.Level.allCases.map(\.rawValue).joined(separator: ", "))")
                }
                config.logLevel = level
            }
        }
        if let network = try table(root, "network") {
            let t = Section(name: "network", index: nil, table: network)
            try expectOnly(
                network, keys: ["settle", "namespace", "receive_buffer", "resolve_interval", "unanswered_threshold", "metered", "unmetered", "networkmanager"],
                table: t)
            if let v = try duration(t, "settle", allowZero: true) { config.settle = v }
            config.networkNamespacePath = try string(t, "namespace")
            if let v = try int(t, "receive_buffer", range: 4096...(1 << 30)) { config.receiveBufferSize = v }
            if let v = try duration(t, "resolve_interval") { config.resolveInterval = v }
            if let v = try int(t, "unanswered_threshold", range: 1...100) { config.unansweredThreshold = v }
            if let v = try globs(t, "metered") { config.linkCost.globs.metered = v }
            if let v = try globs(t, "unmetered") { config.linkCost.globs.unmetered = v }
            if let v = try bool(t, "networkmanager") { config.followsNetworkManager = v }
        }
        if let check = try table(root, "connectivity_check") {
            let t = Section(name: "connectivity_check", index: nil, table: check)
            try expectOnly(check, keys: ["url", "status", "body", "interval", "timeout"], table: t)
            guard let text = try string(t, "url") else { throw error(t, "url", "is required") }
            guard let url = URL(string: text), let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https",
                  url.host?.isEmpty == false
            else { throw error(t, "url", "must be an absolute http or https URL") }
            var settings = DaemonConfiguration.ConnectivityCheck(url: url)
            settings.status = try int(t, "status", range: 100...599)
            settings.body = try string(t, "body")
            if let v = try duration(t, "interval") { settings.interval = v }
            if let v = try duration(t, "timeout") { settings.timeout = v }
            config.connectivityCheck = settings
        }
        if let retry = try table(root, "retry") {
            let t = Section(name: "retry", index: nil, table: retry)
            try expectOnly(retry, keys: ["base", "multiplier", "cap", "max_attempts", "reconnect_spread", "connect_timeout"], table: t)
            var policy = config.retry
            if let v = try duration(t, "base") { policy.base = v }
            if let v = try double(t, "multiplier") {
                guard v >= 1 else { throw error(t, "multiplier", "must be at least 1") }
                policy.multiplier = v
            }
            if let v = try duration(t, "cap") { policy.cap = v }
            guard policy.cap >= policy.base else { throw error(t, "cap", "must not be smaller than base") }
            if let v = try int(t, "max_attempts", range: 0...1_000_000) { policy.maxAutomaticAttempts = v == 0 ? nil : v }
            config.retry = policy
            if let v = try duration(t, "reconnect_spread", allowZero: true) { config.reconnectSpread = v }
            if let v = try duration(t, "connect_timeout") { config.connectTimeout = v }
        }

        if let metrics = try table(root, "metrics") {
            let t = Section(name: "metrics", index: nil, table: metrics)
            try expectOnly(metrics, keys: ["listen", "textfile", "textfile_interval"], table: t)
            if let v = try string(t, "listen") {
                guard let address = MetricsEndpoint.Address(parsing: v) else {
                    throw error(t, "listen", "must be HOST:PORT (127.0.0.1:9559, [::1]:9559) or an absolute Unix socket path")
                }
                config.metricsEndpoint = .init(address: address)
            }
            if let v = try string(t, "textfile") {
                let path = try nonEmpty(t, "textfile", v)
                guard path.hasPrefix("/") else { throw error(t, "textfile", "must be an absolute path") }
                guard path.hasSuffix(".prom") else { throw error(t, "textfile", "must end in .prom (node_exporter's textfile collector reads no other names)") }
                config.metricsTextfile = .init(path: path)
            }
            if let v = try duration(t, "textfile_interval") {
                guard config.metricsTextfile != nil else { throw error(t, "textfile_interval", "needs textfile") }
                config.metricsTextfile?.interval = v
            }
        }

        guard let feedValue = root["feed"] else {
            throw ConfigurationError(file: file, key: "feed", message: "no [[feed]] configured: add at least one")
        }
        guard let feeds = feedValue.array else {
            throw ConfigurationError(file: file, line: locator.line(ofTable: "feed"), key: "feed", message: "must be an array of tables ([[feed]])")
        }
        var names = Set<String>()
        for (index, element) in feeds.enumerated() {
            guard let feedTable = element.table else {
                throw ConfigurationError(file: file, key: "feed[\(index)]", message: "must be a table")
            }
            let t = Section(name: "feed", index: index, table: feedTable)
            let feed = try readFeed(t, defaults: config)
            guard names.insert(feed.name).inserted else { throw error(t, "name", "duplicate feed name '\(feed.name)'") }
            config.feeds.append(feed)
        }
        return config
    }

    private func readFeed(_ t: Section, defaults: DaemonConfiguration) throws(ConfigurationError) -> DaemonConfiguration.Feed {
        try expectOnly(t.table, keys: Set<String>([
            "name", "url", "id_field", "page_size", "refresh_interval", "backfill", "token", "token_file",
            "timeout", "max_body_bytes", "pagination", "page_size_parameter", "gap_pages",
            "ca_file", "client_certificate", "client_key", "keep_items", "keep_days", "stale_after",
            "on_metered", "metered_budget", "revalidate", "revalidate_interval",
        ]).union(Self.descriptorKeys), table: t)
        guard let name = try string(t, "name") else { throw error(t, "name", "is required") }
        guard !name.isEmpty, name.allSatisfy({ $0.isLetter || $0.isNumber || "-_.".contains($0) }) else {
            throw error(t, "name", "must be non-empty letters, digits, '-', '_' or '.'")
        }
        guard let urlText = try string(t, "url") else { throw error(t, "url", "is required") }
        guard var components = URLComponents(string: urlText), let scheme = components.scheme?.lowercased(),
              scheme == "http" || scheme == "https", components.host?.isEmpty == false
        else { throw error(t, "url", "must be an absolute http or https URL") }
        guard let configuredURL = components.url else { throw error(t, "url", "is not a valid URL") }
        var dialect: FeedDialect?
        if let v = try string(t, "dialect") {
            guard let known = FeedDialect(rawValue: v.lowercased()) else {
                throw error(t, "dialect", "must be one of \(FeedDialect.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            dialect = known
        }
        var pagination = dialect?.pagination ?? FeedPagination.detect(for: configuredURL)
        if let v = try string(t, "pagination") {
            guard let chosen = FeedPagination(rawValue: v.lowercased()) else {
                throw error(t, "pagination", "must be one of \(FeedPagination.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            pagination = chosen
        }
        // GitHub reads per_page and ignores limit; Mastodon reads limit.
        var sizeParameter = dialect?.pageSizeParameter ?? (pagination == .page ? "per_page" : "limit")
        if let v = try string(t, "page_size_parameter") {
            guard !v.isEmpty, v.unicodeScalars.allSatisfy({ $0.isASCII && (CharacterSet.alphanumerics.contains($0) || "-_.".unicodeScalars.contains($0)) }) else {
                throw error(t, "page_size_parameter", "must be a query parameter name (letters, digits, '-', '_', '.')")
            }
            sizeParameter = v
        }
        if let pageSize = try int(t, "page_size", range: 1...1000) {
            var query = (components.queryItems ?? []).filter { $0.name != sizeParameter }
            query.append(URLQueryItem(name: sizeParameter, value: String(pageSize)))
            components.queryItems = query
        }
        guard let url = components.url else { throw error(t, "url", "is not a valid URL") }

        var http = HTTPFeedConfiguration(url: url, descriptor: try readDescriptor(t, dialect: dialect), pagination: pagination)
        let token = try string(t, "token"), tokenFile = try string(t, "token_file")
        switch (token, tokenFile) {
        case (.some, .some): throw error(t, "token_file", "give either token or token_file, not both")
        case (.some(let value), nil): http.authorization = .bearer(BearerToken(try nonEmpty(t, "token", value)))
        case (nil, .some(let path)): http.authorization = .bearerTokenFile(path: try nonEmpty(t, "token_file", path))
        case (nil, nil): break
        }
        let caFile = try string(t, "ca_file"), certificate = try string(t, "client_certificate"), key = try string(t, "client_key")
        if caFile != nil || certificate != nil || key != nil {
            guard scheme == "https" else {
                throw error(t, caFile != nil ? "ca_file" : certificate != nil ? "client_certificate" : "client_key", "needs an https url")
            }
            if key != nil && certificate == nil { throw error(t, "client_key", "needs client_certificate") }
            let tls = FeedTLS(
                caFile: try caFile.map { v throws(ConfigurationError) in try nonEmpty(t, "ca_file", v) },
                certificateFile: try certificate.map { v throws(ConfigurationError) in try nonEmpty(t, "client_certificate", v) },
                keyFile: try key.map { v throws(ConfigurationError) in try nonEmpty(t, "client_key", v) })
            // Read now, so a missing or unreadable file is reported with its line at startup.
            do {
                try tls.validate()
            } catch {
                let key = error.message.hasPrefix("ca_file") ? "ca_file" : error.message.hasPrefix("client_key") ? "client_key" : "client_certificate"
                throw self.error(t, key, error.message)
            }
            http.tls = tls
        }
        if let v = try duration(t, "timeout") { http.requestTimeout = v }
        if let v = try int(t, "max_body_bytes", range: 1024...(1 << 30)) { http.maxBodyBytes = v }

        var sync = SyncConfiguration(retry: defaults.retry, reconnectSpread: defaults.reconnectSpread)
        sync.refreshInterval = try duration(t, "refresh_interval")
        if let v = try int(t, "backfill", range: 0...100_000_000) { sync.backfillDepth = v }
        if let v = try int(t, "gap_pages", range: 1...10_000) { sync.gapPageLimit = v }
        if let v = try string(t, "on_metered") {
            guard let policy = MeteredPolicy(rawValue: v) else {
                throw error(t, "on_metered", "must be one of \(MeteredPolicy.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            sync.onMetered = policy
        }
        if let v = try byteCount(t, "metered_budget") { sync.meteredBudget = MeteredBudget(bytesPerDay: v) }
        if let value = t.table["revalidate"] {
            if let count = value.int, (1...1_000_000).contains(count) {
                sync.revalidate = .items(count)
            } else if value.string == "all" {
                sync.revalidate = .all
            } else {
                throw error(t, "revalidate", "must be a number of items (1 to 1000000) or \"all\"")
            }
        }
        if sync.revalidate != nil, http.descriptor.order == .oldestFirst {
            throw error(t, "revalidate", "does not work with order = \"oldest_first\": a revalidation reads the newest items from the head, and this feed's head holds its oldest")
        }
        if let v = try duration(t, "revalidate_interval") {
            guard sync.revalidate != nil else { throw error(t, "revalidate_interval", "needs revalidate (a number of items or \"all\")") }
            sync.revalidateInterval = v
        }
        let keepItems = try int(t, "keep_items", range: 1...100_000_000)
        var keepAge: Duration?
        if let days = try double(t, "keep_days") {
            guard days > 0, days <= 36_500 else { throw error(t, "keep_days", "must be a number of days above 0 (at most 36500)") }
            keepAge = .milliseconds(Int64((days * 86_400_000).rounded()))
        }
        if let keepItems, sync.backfillDepth > keepItems {
            // Backfill would load what retention deletes, page after page.
            throw error(t, "backfill", "must not exceed keep_items (\(keepItems))")
        }
        return .init(name: name, http: http, sync: sync, keepItems: keepItems, keepAge: keepAge, staleAfter: try duration(t, "stale_after"), dialect: dialect)
    }

    /// The keys of a feed's ``FeedDescriptor`` (docs/feeds.md).
    static let descriptorKeys = [
        "dialect", "items", "id", "updated", "older", "next_url", "cursor", "cursor_param", "cursor_header",
        "last_id_param", "offset_param", "page_param", "first_page", "newer", "newer_param", "prev_url",
        "has_more", "is_last", "total", "deleted", "deleted_value", "order",
    ]

    /// How a feed's pages are read: its dialect's descriptor, with what the keys set instead.
    private func readDescriptor(_ t: Section, dialect: FeedDialect?) throws(ConfigurationError) -> FeedDescriptor {
        var descriptor = dialect?.descriptor ?? FeedDescriptor()
        func pointer(_ key: String) throws(ConfigurationError) -> JSONPointer? {
            guard let text = try string(t, key) else { return nil }
            do {
                return try JSONPointer(text)
            } catch {
                throw self.error(t, key, error.message)
            }
        }
        func parameter(_ key: String) throws(ConfigurationError) -> String? {
            guard let value = try string(t, key) else { return nil }
            guard !value.isEmpty, value.unicodeScalars.allSatisfy({ $0.isASCII && $0.value > 0x20 && $0.value < 0x7F && !"&=#?".unicodeScalars.contains($0) }) else {
                throw error(t, key, "must be a query parameter or header name (printable ASCII, no '&', '=', '#' or '?')")
            }
            return value
        }
        // A key that the chosen way of paging cannot do without.
        func required<Value>(_ value: Value?, _ key: String, by choice: String, _ meaning: String) throws(ConfigurationError) -> Value {
            guard let value else { throw error(t, key, "is required by \(choice): \(meaning)") }
            return value
        }
        if let items = try pointer("items") { descriptor.items = items }
        let idField = try string(t, "id_field"), id = try pointer("id")
        if idField != nil && id != nil { throw error(t, "id", "give either id (a JSON pointer) or id_field (a member name), not both") }
        if let idField { descriptor.id = JSONPointer(tokens: [try nonEmpty(t, "id_field", idField)]) }
        if let id {
            guard !id.isRoot else { throw error(t, "id", "must point inside the item, e.g. \"/id\"") }
            descriptor.id = id
        }
        if let updated = try pointer("updated") { descriptor.updated = updated }
        if let order = try string(t, "order") {
            guard let chosen = FeedOrder(rawValue: order) else {
                throw error(t, "order", "must be one of \(FeedOrder.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            descriptor.order = chosen
        }
        if let deleted = try pointer("deleted") {
            guard !deleted.isRoot else { throw error(t, "deleted", "must point inside the item, e.g. \"/deleted\"") }
            var mark = DeletionMark(pointer: deleted)
            if let value = t.table["deleted_value"] {
                if let flag = value.bool {
                    mark.value = .bool(flag)
                } else if let number = value.int {
                    mark.value = .number(String(number))
                } else if let text = value.string, !text.isEmpty {
                    mark.value = .string(text)
                } else {
                    throw error(t, "deleted_value", "must be true, false, an integer or a non-empty string")
                }
            }
            descriptor.deleted = mark
        } else if t.table["deleted_value"] != nil {
            throw error(t, "deleted_value", "needs deleted (a JSON pointer inside the item)")
        }

        // Older pages: named by `older`, or by the one key that says how.
        let nextURL = try pointer("next_url"), cursor = try pointer("cursor"), cursorParameter = try parameter("cursor_param")
        let cursorHeader = try parameter("cursor_header"), lastID = try parameter("last_id_param")
        let offset = try parameter("offset_param"), page = try parameter("page_param")
        let firstPage = try int(t, "first_page", range: 0...1)
        var way = try string(t, "older")
        if way == nil {
            let named = [("next_url", nextURL != nil), ("cursor", cursor != nil), ("header", cursorHeader != nil),
                         ("last_id", lastID != nil), ("offset", offset != nil), ("page", page != nil)].filter(\.1).map(\.0)
            guard named.count <= 1 else { throw error(t, "older", "several ways to older pages are given (\(named.joined(separator: ", "))): choose one with older = \"…\"") }
            way = named.first
        }
        switch way {
        case nil:
            // The dialect's way; a cursor parameter may still be renamed.
            if let cursorParameter {
                switch descriptor.older {
                case .bodyCursor(let at, _): descriptor.older = .bodyCursor(at, parameter: cursorParameter)
                case .headerCursor(let header, _): descriptor.older = .headerCursor(header: header, parameter: cursorParameter)
                default: throw error(t, "cursor_param", "needs older = \"cursor\" or \"header\"")
                }
            }
        case "link"?: descriptor.older = .linkHeader
        case "next_url"?:
            descriptor.older = .bodyURL(try required(nextURL, "next_url", by: "older = \"next_url\"", "the JSON pointer of the next page's URL, e.g. \"/links/next\""))
        case "cursor"?:
            descriptor.older = .bodyCursor(try required(cursor, "cursor", by: "older = \"cursor\"", "the JSON pointer of the next page's cursor, e.g. \"/cursor\""), parameter: cursorParameter ?? "cursor")
        case "header"?:
            descriptor.older = .headerCursor(header: try required(cursorHeader, "cursor_header", by: "older = \"header\"", "the response header carrying the next page's cursor"), parameter: cursorParameter ?? "cursor")
        case "last_id"?:
            descriptor.older = .lastItemID(parameter: lastID ?? "starting_after")
        case "offset"?:
            descriptor.older = .offset(parameter: offset ?? "offset")
        case "page"?:
            descriptor.older = .pageNumber(parameter: page ?? "page", first: firstPage ?? 1)
        case let other?:
            throw error(t, "older", "must be one of link, next_url, cursor, header, last_id, offset, page (not '\(other)')")
        }

        // Newer items: named by `newer`, or by its parameter or URL.
        let newerParameter = try parameter("newer_param"), previousURL = try pointer("prev_url")
        switch try string(t, "newer") ?? (newerParameter != nil ? "param" : previousURL != nil ? "prev_url" : nil) {
        case nil: break
        case "auto"?: descriptor.newer = .automatic
        case "head"?: descriptor.newer = .head
        case "param"?:
            descriptor.newer = .idParameter(try required(newerParameter, "newer_param", by: "newer = \"param\"", "the query parameter asking for the items just above an id, e.g. \"min_id\""))
        case "prev_url"?:
            descriptor.newer = .bodyURL(try required(previousURL, "prev_url", by: "newer = \"prev_url\"", "the JSON pointer of the newer page's URL, e.g. \"/links/prev\""))
        case let other?:
            throw error(t, "newer", "must be one of auto, param, prev_url, head (not '\(other)')")
        }
        if let hasMore = try pointer("has_more") { descriptor.end.hasMore = hasMore }
        if let isLast = try pointer("is_last") { descriptor.end.isLast = isLast }
        if let total = try pointer("total") { descriptor.end.total = total }
        do {
            try descriptor.validate()
        } catch {
            throw self.error(t, "dialect", error.message)
        }
        return descriptor
    }

    // MARK: Typed access

    struct Section {
        var name: String
        var index: Int?
        var table: TOMLTable
        var path: String { index.map { "\(name)[\($0)]" } ?? name }
    }

    private func error(_ t: Section, _ key: String, _ message: String) -> ConfigurationError {
        ConfigurationError(file: file, line: locator.line(ofKey: key, inTable: t.name, index: t.index), key: "\(t.path).\(key)", message: message)
    }

    private func table(_ root: TOMLTable, _ key: String) throws(ConfigurationError) -> TOMLTable? {
        guard let value = root[key] else { return nil }
        guard let table = value.table else {
            throw ConfigurationError(file: file, line: locator.line(ofKey: key, inTable: nil, index: nil), key: key, message: "must be a table ([\(key)])")
        }
        return table
    }

    private func expectOnly(_ table: TOMLTable, keys: Set<String>, table section: Section?) throws(ConfigurationError) {
        for key in table.keys.sorted() where !keys.contains(key) {
            let known = keys.sorted().joined(separator: ", ")
            if let section {
                throw error(section, key, "unknown key (known: \(known))")
            }
            throw ConfigurationError(file: file, line: locator.line(ofKey: key, inTable: nil, index: nil) ?? locator.line(ofTable: key), key: key, message: "unknown key (known: \(known))")
        }
    }

    private func string(_ t: Section, _ key: String) throws(ConfigurationError) -> String? {
        guard let value = t.table[key] else { return nil }
        guard let string = value.string else { throw error(t, key, "must be a string") }
        return string
    }

    private func bool(_ t: Section, _ key: String) throws(ConfigurationError) -> Bool? {
        guard let value = t.table[key] else { return nil }
        guard let bool = value.bool else { throw error(t, key, "must be true or false") }
        return bool
    }

    /// Link-name globs: an array of non-empty strings of at most 64 bytes with no control
    /// characters.
    private func globs(_ t: Section, _ key: String) throws(ConfigurationError) -> [String]? {
        guard let value = t.table[key] else { return nil }
        let message = "must be an array of link-name globs (at most 64 bytes each), e.g. [\"wwan*\", \"ppp*\"]"
        guard let array = value.array else { throw error(t, key, message) }
        var globs: [String] = []
        for element in array {
            guard let glob = element.string, !glob.isEmpty, glob.utf8.count <= 64,
                  !glob.unicodeScalars.contains(where: { $0.properties.generalCategory == .control })
            else { throw error(t, key, message) }
            globs.append(glob)
        }
        return globs
    }

    private func nonEmpty(_ t: Section, _ key: String, _ value: String) throws(ConfigurationError) -> String {
        guard !value.isEmpty else { throw error(t, key, "must not be empty") }
        return value
    }

    private func int(_ t: Section, _ key: String, range: ClosedRange<Int>) throws(ConfigurationError) -> Int? {
        guard let value = t.table[key] else { return nil }
        guard let int = value.int else { throw error(t, key, "must be an integer") }
        guard range.contains(int) else { throw error(t, key, "must be between \(range.lowerBound) and \(range.upperBound)") }
        return int
    }

    private func double(_ t: Section, _ key: String) throws(ConfigurationError) -> Double? {
        guard let value = t.table[key] else { return nil }
        if let double = value.double { return double }
        if let int = value.int { return Double(int) }
        throw error(t, key, "must be a number")
    }

    /// A byte count: a number of bytes, or a string such as "50MB", "1.5 GB", "512KiB".
    private func byteCount(_ t: Section, _ key: String) throws(ConfigurationError) -> Int64? {
        guard let value = t.table[key] else { return nil }
        let parsed = value.int.map(Int64.init) ?? value.string.flatMap(ByteCount.parse)
        guard let parsed, parsed > 0 else {
            throw error(t, key, "must be a number of bytes above 0, or a string like \"50MB\", \"1.5GB\", \"512KiB\"")
        }
        return parsed
    }

    /// A duration: a number of seconds, or a string such as "500ms", "2s", "5m", "1h".
    private func duration(_ t: Section, _ key: String, allowZero: Bool = false) throws(ConfigurationError) -> Duration? {
        guard let value = t.table[key] else { return nil }
        let parsed: Duration?
        if let seconds = value.double ?? value.int.map(Double.init) {
            parsed = seconds.isFinite && seconds >= 0 ? .milliseconds(Int64((seconds * 1000).rounded())) : nil
        } else if let text = value.string {
            parsed = DurationParser.parse(text)
        } else {
            parsed = nil
        }
        guard let parsed else { throw error(t, key, "must be a duration: seconds as a number, or a string like \"500ms\", \"2s\", \"5m\", \"1h\"") }
        guard allowZero || parsed > .zero else { throw error(t, key, "must be greater than zero") }
        return parsed
    }
}

/// Finds the line of a key or table header in TOML source, for error messages.
///
/// TOMLKit reports positions for syntax errors only; for a value of the wrong type or a key
/// that does not exist, this looks the key up in the text of its table.
struct SourceLocator {
    private let lines: [Substring]

    init(_ text: String) {
        lines = text.split(separator: "\n", omittingEmptySubsequences: false)
    }

    /// The 1-based line of `key = …` inside `[table]` (or the `index`th `[[table]]`), or at the top level.
    func line(ofKey key: String, inTable table: String?, index: Int?) -> Int? {
        var current: String?
        var occurrence = -1
        for (number, raw) in lines.enumerated() {
            let line = raw.trimmingCharacters(in: .whitespaces)
            if line.hasPrefix("[") {
                let name = line.trimmingCharacters(in: CharacterSet(charactersIn: "[] \t"))
                    .split(separator: "#").first.map { $0.trimmingCharacters(in: CharacterSet(charactersIn: "[] \t")) } ?? ""
                current = name
                if name == table && line.hasPrefix("[[") { occurrence += 1 }
                continue
            }
            guard current == table, index == nil || occurrence == index else { continue }
            let name = line.split(separator: "=", maxSplits: 1).first?.trimmingCharacters(in: CharacterSet(charactersIn: " \t\"'"))
            if name == key { return number + 1 }
        }
        return nil
    }

    /// The 1-based line of the first `[table]` or `[[table]]` header.
    func line(ofTable table: String) -> Int? {
        lines.firstIndex { line in
            line.trimmingCharacters(in: .whitespaces).trimmingCharacters(in: CharacterSet(charactersIn: "[] \t")) == table
        }.map { $0 + 1 }
    }
}
