import SyncControl
import SyncCore
import Foundation

/// `syncctl status`: a dot and a vertical table, like `networkctl status`.
public enum StatusTable {
    /// Width of the right-aligned label column.
    static let labelWidth = 12

    /// The daemon's state and each feed's; `filter` names the feeds to show in detail (empty: all), times relative to `now`.
    public static func render(_ status: ControlStatus, feeds filter: [String] = [], now: Date, style: TerminalStyle, timeZone: TimeZone = .current) -> String {
        let status = status.terminalSafe
        let filter = filter.map(\.terminalSafe)
        var lines: [String] = []
        let summary = status.connectivity
        let color: ANSI = switch summary.state {
        case .online: .green
        case .partial, .limited: .yellow
        case .offline: .red
        case .unknown: .grey
        }
        lines.append("\(style.paint("●", color)) \(style.paint("syncd", .bold)) \(status.version)")
        lines.append(row("State", summary.line(.counted) { style.paint($0, color) }))
        if let store = status.store { lines.append(row("Store", style.paint(store.message, .red))) }
        if let since = summary.since { lines.append(row("Since", TimeFormatting.full(since, now: now, timeZone: timeZone))) }
        if let internet = status.internet { lines.append(row("Internet", internet.description)) }
        if let banner = status.banner {
            lines.append(row("Banner", style.paint(banner.message, .yellow)))
        }
        let shown = filter.isEmpty ? status.feeds : status.feeds.filter { filter.contains($0.name) }
        let failing = status.feeds.filter { [.failed, .degraded].contains(FeedCondition($0)) }.count
        lines.append(row("Feeds", "\(status.feeds.count)" + (failing > 0 ? style.paint(" (\(failing) failing)", .red) : "")))
        for feed in shown {
            lines.append("")
            lines.append(contentsOf: render(feed, now: now, style: style, timeZone: timeZone))
        }
        return lines.joined(separator: "\n") + "\n"
    }

    static func render(_ feed: ControlFeed, now: Date, style: TerminalStyle, timeZone: TimeZone) -> [String] {
        let condition = FeedCondition(feed)
        var lines = ["\(style.paint("●", condition.dotColor)) \(style.paint(feed.name, .bold))"]
        if let source = feed.source { lines.append(row("Source", source)) }
        var state = style.paint(condition.rawValue, condition.dotColor)
        switch feed.connectivity {
        case .offline(let reason, _)?: state += " (offline: \(reason))"
        case .limited(let reason, _, _, _, _)?: state += " (limited: \(reason))"
        default: break
        }
        lines.append(row("State", state))
        if let connectivity = feed.connectivity {
            var text = connectivity.description
            if let since = connectivity.since { text += " since " + TimeFormatting.full(since, now: now, timeZone: timeZone) }
            lines.append(row("Connectivity", text))
        }
        // A paused load waits for what the feed's connectivity says: the network, or the rung above it.
        let waitingFor = feed.connectivity?.reason?.isLimited == true ? "limited" : "offline"
        for (label, direction) in feed.directions {
            var text = describe(direction, now: now, style: style, waitingFor: waitingFor)
            if label == "older" && feed.endReached { text += ", end of feed" }
            lines.append(row(label.capitalized, text))
        }
        if let usage = feed.meteredUsage {
            lines.append(row("Metered", "\(ByteCount.describe(usage.bytes)) of \(ByteCount.describe(usage.budget)) today"))
        }
        lines.append(row("Items", "\(feed.itemCount)" + (feed.empty ? " (empty)" : "")))
        lines.append(row("Last sync", feed.lastSync.map { TimeFormatting.full($0, now: now, timeZone: timeZone) } ?? "never"))
        if let next = feed.nextRetryAt {
            lines.append(row("Next retry", TimeFormatting.full(next, now: now, timeZone: timeZone)))
        }
        return lines
    }

    /// `failed (attempt 3): HTTP 503; next retry in 12s`, `loading (paused)`, `paused (metered link)`.
    static func describe(_ direction: ControlDirection, now: Date, style: TerminalStyle, waitingFor: String = "offline") -> String {
        if let held = direction.held, direction.phase != .failed {
            // What it would be doing says nothing here: it waits for the link's cost to lift.
            return style.paint("paused (\(held))", .yellow)
        }
        var text: String
        switch direction.phase {
        case .failed:
            text = style.paint("failed", .red)
            if let attempt = direction.attempt { text += " (attempt \(attempt))" }
            if let error = direction.error { text += ": \(ErrorText.causeFirst(error))" }
            if let next = direction.nextRetryAt { text += "; next retry \(TimeFormatting.relative(next, now: now))" }
        case .loading:
            text = style.paint("loading", .yellow)
        case .loaded:
            text = "loaded"
        case .idle:
            text = "idle"
        }
        if direction.paused { text += style.paint(" (paused, \(waitingFor))", .yellow) }
        if let held = direction.held { text += style.paint("; paused (\(held))", .yellow) }
        return text
    }

    static func row(_ label: String, _ value: String) -> String {
        String(repeating: " ", count: max(0, labelWidth - label.count)) + label + ": " + value
    }
}
