import Foundation

/// `syncctl status`: a dot and a vertical table, like `networkctl status`.
public enum StatusTable {
    /// Width of the right-aligned label column.
    static let labelWidth = 12

    public static func render(_ status: ControlStatus, feeds filter: [String] = [], now: Date, style: TerminalStyle, timeZone: TimeZone = .current) -> String {
        let status = status.terminalSafe
        let filter = filter.map(\.terminalSafe)
        var lines: [String] = []
        let online = status.connectivity.isOnline
        lines.append("\(style.paint("●", online ? .green : .red)) \(style.paint("syncd", .bold)) \(status.version)")
        switch status.connectivity {
        case .online(let link, let family, let since):
            lines.append(row("State", style.paint("online", .green) + " via \(link) (\(family.rawValue))"))
            if let since { lines.append(row("Since", TimeFormatting.full(since, now: now, timeZone: timeZone))) }
        case .offline(let reason, let since):
            lines.append(row("State", style.paint("offline", .red) + " (\(reason))"))
            if let since { lines.append(row("Since", TimeFormatting.full(since, now: now, timeZone: timeZone))) }
        }
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
        lines.append(row("State", style.paint(condition.rawValue, condition.dotColor)))
        for (label, direction) in feed.directions {
            var text = describe(direction, now: now, style: style)
            if label == "older" && feed.endReached { text += ", end of feed" }
            lines.append(row(label.capitalized, text))
        }
        lines.append(row("Items", "\(feed.itemCount)" + (feed.empty ? " (empty)" : "")))
        lines.append(row("Last sync", feed.lastSync.map { TimeFormatting.full($0, now: now, timeZone: timeZone) } ?? "never"))
        if let next = feed.nextRetryAt {
            lines.append(row("Next retry", TimeFormatting.full(next, now: now, timeZone: timeZone)))
        }
        return lines
    }

    /// `failed (attempt 3): HTTP 503; next retry in 12s`, `loading (paused)`.
    static func describe(_ direction: ControlDirection, now: Date, style: TerminalStyle) -> String {
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
        if direction.paused { text += style.paint(" (paused, offline)", .yellow) }
        return text
    }

    static func row(_ label: String, _ value: String) -> String {
        String(repeating: " ", count: max(0, labelWidth - label.count)) + label + ": " + value
    }
}
