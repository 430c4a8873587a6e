import Foundation
import HTTPFeedSource
import SyncCore
import SyncDaemon
import SyncTerminal

/// `syncd --probe`: one page of a feed, read as a sync would read it, and what was found in it.
/// Nothing is stored and nothing runs in the background: a way to find a feed's keys.
enum Probe {
    /// Probes `target`, a feed's URL (read with `dialect`'s keys, or the defaults) or the name of
    /// a feed in `configuration`; returns the report to print, or throws the page's error.
    static func run(_ target: String, dialect: FeedDialect?, configuration: DaemonConfiguration?) async throws -> String {
        var http: HTTPFeedConfiguration
        var named: FeedDialect? = dialect
        if let feed = configuration?.feeds.first(where: { $0.name == target }) {
            http = feed.http
            named = named ?? feed.dialect
            if let dialect { http.descriptor = dialect.descriptor }
        } else {
            guard let url = URL(string: target), ["http", "https"].contains(url.scheme?.lowercased() ?? ""), url.host != nil else {
                throw ProbeError("\(target.terminalSafe) is neither an http(s) URL nor a feed of the configuration")
            }
            http = HTTPFeedConfiguration(url: url, descriptor: dialect?.descriptor ?? FeedDescriptor(), pagination: dialect?.pagination)
        }
        let client = HTTPFeedClient()
        let report: String
        do {
            let source = try HTTPFeedSource(configuration: http, client: client)
            let found = try await source.probe()
            report = render(found, configuration: http, dialect: named)
        } catch {
            try? await client.shutdown()
            throw ProbeError("\(FeedError(wrapping: error).message)".terminalSafe)
        }
        try? await client.shutdown()
        return report
    }

    /// The report: what was read and how, with every value from the server made safe to print.
    static func render(_ probe: FeedProbe, configuration: HTTPFeedConfiguration, dialect: FeedDialect?) -> String {
        var lines = ["GET \(configuration.url.redactedForLog.terminalSafe)"]
        lines.append("  dialect: \(dialect?.rawValue ?? "none (the keys' defaults)")")
        lines += configuration.descriptor.summary.map { "  \($0)" }
        lines.append("found:")
        let place = probe.document ?? (probe.itemsAt.isRoot ? "the body, an array" : "at \(probe.itemsAt.description.terminalSafe)")
        lines.append("  items: \(probe.itemCount), \(place)")
        if !probe.firstIDs.isEmpty {
            lines.append("  first ids: \(probe.firstIDs.map { $0.terminalSafe }.joined(separator: ", "))")
        }
        lines.append("  older page: \(probe.olderCursor?.terminalSafe ?? "none: this page is the last")")
        if probe.olderCursor == nil, probe.itemCount > 0, case .linkHeader = configuration.descriptor.older {
            lines.append("  (the answer has no Link rel=\"next\": if the API pages by offset, cursor or page number, set older; see docs/feeds.md)")
        }
        lines.append("  newer items from: \(probe.newerCursor?.terminalSafe ?? "none")")
        lines.append("nothing was stored")
        return lines.joined(separator: "\n")
    }
}

/// Why a probe found no page, in words.
struct ProbeError: Error, CustomStringConvertible {
    let description: String

    init(_ description: String) {
        self.description = description
    }
}
