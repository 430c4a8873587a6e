import SyncControl
import Foundation

/// One frame of `syncctl watch`, drawn from the presentation model.
///
/// Pure: the same status, animation time and style give the same lines, so frames are tested
/// as text. `time` is the one animation clock for the shimmer and the spinner.
public enum WatchFrame {
    static let spinnerFrames = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"]

    /// The spinner glyph at animation time `t`.
    public static func spinner(at t: Double) -> String {
        spinnerFrames[Int((t * 12.5).rounded(.down)) % spinnerFrames.count]
    }

    /// Whether anything on screen moves, so the caller knows whether to keep ticking.
    public static func isAnimated(_ status: ControlStatus?, feed filter: String? = nil) -> Bool {
        guard let status else { return true }
        return status.feeds.filter { filter == nil || $0.name == filter }.contains { feed in
            if case .skeleton = feed.presentation.main { return true }
            if case .error = feed.presentation.main, feed.initial.phase == .loading { return true }
            return feed.presentation.olderFooter == .spinner
        }
    }

    /// Lines of the frame (no trailing newlines), each at most `style.width` columns wide.
    public static func render(
        _ status: ControlStatus?,
        feed filter: String? = nil,
        time: Double,
        now: Date,
        style: TerminalStyle,
        timeZone: TimeZone = .current
    ) -> [String] {
        let width = style.width
        guard let status = status?.terminalSafe else {
            return [style.paint("\(spinner(at: time)) connecting to syncd…".fitted(to: width), .dim)]
        }
        var lines: [String] = []
        let connectivity = status.connectivity.description
        let clock = TimeFormatting.clock(now, timeZone: timeZone)
        let title = "syncd \(status.version) · \(connectivity)"
        let headerSpace = max(1, width - clock.columns)
        lines.append(style.paint(title.fitted(to: headerSpace - 1).padded(to: headerSpace), .bold) + clock)

        if let banner = status.banner {
            let text = " ⚠ \(banner.message) Since \(TimeFormatting.clock(banner.since, timeZone: timeZone)) (\(TimeFormatting.relative(banner.since, now: now)))."
            lines.append(style.paint(text.fitted(to: width).padded(to: width), .banner))
        }

        let feeds = status.feeds.filter { filter == nil || $0.name == filter }
        if feeds.isEmpty {
            lines.append(style.paint((filter.map { "No feed named '\($0.terminalSafe)'." } ?? "No feeds configured.").fitted(to: width), .dim))
            return lines
        }
        // Share the rows left among the feeds; each keeps at least its heading and footer.
        let budget = max(3, (style.height - lines.count) / feeds.count - 1)
        for feed in feeds {
            lines.append("")
            lines.append(contentsOf: section(feed, rows: budget, time: time, now: now, style: style))
        }
        return lines
    }

    static func section(_ feed: ControlFeed, rows budget: Int, time: Double, now: Date, style: TerminalStyle) -> [String] {
        let width = style.width
        let presentation = feed.presentation
        var lines: [String] = []

        var info = "\(feed.itemCount) item\(feed.itemCount == 1 ? "" : "s")"
        if let lastSync = feed.lastSync { info += " · synced \(TimeFormatting.relative(lastSync, now: now))" }
        let condition = FeedCondition(feed)
        let head = "── \(feed.name) "
        let tail = " \(info) ──"
        let fill = max(1, width - head.columns - tail.columns)
        if head.columns + tail.columns + 1 <= width {
            lines.append(style.paint(head, condition.dotColor) + style.paint(String(repeating: "─", count: fill), .dim) + tail)
        } else {
            lines.append(style.paint(head.fitted(to: width), condition.dotColor))
        }

        if let banner = presentation.offlineBanner {
            lines.append(style.paint("  ⏸ paused: \(banner.reason)".fitted(to: width), .yellow))
        }

        switch presentation.newerNotice {
        case .newItems(let count)?:
            lines.append(style.paint("  ↑ \(count) new item\(count == 1 ? "" : "s")".fitted(to: width), .cyan))
        case .error(let message)?:
            lines.append(style.paint("  ✕ Couldn't refresh: \(ErrorText.causeFirst(message))".fitted(to: width), .red))
        case nil:
            break
        }

        var footer: String?
        switch presentation.olderFooter {
        case .spinner?: footer = "  \(spinner(at: time)) Loading older…"
        case .error(let message)?: footer = errorFooter(message, feed: feed.name, width: width, style: style)
        case .end?: footer = style.paint("  ── end of feed ──", .dim)
        case nil: break
        }
        let available = max(1, budget - lines.count - (footer == nil ? 0 : 1))

        switch presentation.main {
        case .skeleton(let rows):
            let phase = Shimmer.phase(at: time)
            for index in 0..<min(rows, available) {
                lines.append("  " + Shimmer.row(index, width: width - 2, phase: phase, style: style))
            }
        case .content(let rows):
            for row in rows.prefix(available) {
                lines.append("  • " + row.summary.fitted(to: width - 4))
            }
            if rows.count > available {
                lines.removeLast()
                lines.append(style.paint("  … \(rows.count - available + 1) more", .dim))
            }
        case .empty:
            lines.append(style.paint("  Nothing here yet.", .dim))
        case .error(let message):
            lines.append(style.paint("  ✕ Couldn't load \(feed.name): \(ErrorText.causeFirst(message))".fitted(to: width), .red))
            // The error stays while it is retried; only this line says the retry is under way.
            let retry: String
            if feed.initial.phase == .loading || feed.initial.nextRetryAt.map({ $0 <= now }) == true {
                retry = "    \(spinner(at: time)) Retrying… · now: syncctl retry \(feed.name)"
            } else if let next = feed.initial.nextRetryAt {
                retry = "    Retrying \(TimeFormatting.relative(next, now: now)) · now: syncctl retry \(feed.name)"
            } else {
                retry = "    Retry: syncctl retry \(feed.name)"
            }
            lines.append(style.paint(retry.fitted(to: width), .dim))
        }
        if let footer { lines.append(footer) }
        return lines
    }

    /// `✕ Couldn't load older: <cause> · retry: syncctl retry <feed> · <request>`: the cause
    /// first and the URL last, so a narrow terminal cuts the URL, never the reason.
    static func errorFooter(_ message: String, feed: String, width: Int, style: TerminalStyle) -> String {
        let (cause, request) = ErrorText.split(message)
        let text = "  ✕ Couldn't load older: \(cause)"
        if text.columns >= width { return style.paint(text.fitted(to: width), .red) }
        // The hint is shown whole or not at all; the request takes whatever room is left.
        var rest = ""
        let hint = " · retry: syncctl retry \(feed)"
        if text.columns + hint.columns <= width { rest = hint }
        if let request { rest += " · \(request)" }
        return style.paint(text, .red) + style.paint(rest.fitted(to: width - text.columns), .dim)
    }
}
