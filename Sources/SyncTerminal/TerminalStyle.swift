import SyncControl
#if canImport(Glibc)
import Glibc
#endif

/// How text output may be decorated: colour on or off, and the width to fit.
///
/// The renderers in this folder are pure functions of their input and a style, so they are
/// tested without a terminal; only ``detect(fileDescriptor:environment:)`` looks at the world.
public struct TerminalStyle: Sendable, Hashable {
    /// Whether SGR colour and attribute codes are written; off, output is plain text.
    public var color: Bool
    /// Columns available.
    public var width: Int
    /// Rows available (for full-screen views).
    public var height: Int

    /// A style of this size; at least 20 columns and 5 rows, whatever is given.
    public init(color: Bool, width: Int = 80, height: Int = 24) {
        self.color = color
        self.width = max(20, width)
        self.height = max(5, height)
    }

    /// No colour, 80×24: for pipes, files and tests.
    public static let plain = TerminalStyle(color: false)

    /// Colour only on a terminal and never when `NO_COLOR` is set (no-color.org), `TERM` is
    /// `dumb`, or `SYSTEMD_COLORS` says no; `SYSTEMD_COLORS=1` forces it, as in systemd tools.
    public static func detect(fileDescriptor: Int32 = STDOUT_FILENO, environment: [String: String]) -> TerminalStyle {
        let isTerminal = isatty(fileDescriptor) == 1
        var color = isTerminal && environment["TERM"] != "dumb"
        if let forced = environment["SYSTEMD_COLORS"] {
            color = !["0", "no", "false", "off"].contains(forced.lowercased())
        }
        if let noColor = environment["NO_COLOR"], !noColor.isEmpty { color = false }
        var size = winsize()
        if isTerminal, ioctl(fileDescriptor, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 0 {
            return TerminalStyle(color: color, width: Int(size.ws_col), height: Int(size.ws_row))
        }
        let columns = environment["COLUMNS"].flatMap(Int.init) ?? 80
        let lines = environment["LINES"].flatMap(Int.init) ?? 24
        return TerminalStyle(color: color, width: columns, height: lines)
    }

    /// Wraps `text` in an SGR sequence when colour is on.
    public func paint(_ text: String, _ sgr: ANSI) -> String {
        guard color, !text.isEmpty else { return text }
        return "\u{1B}[\(sgr.code)m\(text)\u{1B}[0m"
    }
}

/// SGR attributes used by the renderers.
public struct ANSI: Sendable, Hashable {
    /// The SGR parameters between `ESC [` and `m`, e.g. `1;31`.
    public var code: String

    /// Headings and names.
    public static let bold = ANSI(code: "1")
    /// Secondary text: hints, footers, placeholders.
    public static let dim = ANSI(code: "2")
    /// Failures and offline.
    public static let red = ANSI(code: "31")
    /// Online and synced.
    public static let green = ANSI(code: "32")
    /// Paused, loading, limited: waiting for something.
    public static let yellow = ANSI(code: "33")
    /// The count of new items above the view.
    public static let cyan = ANSI(code: "36")
    /// Unknown or idle.
    public static let grey = ANSI(code: "90")
    /// A feed whose first load failed: the most urgent dot.
    public static let brightRed = ANSI(code: "1;31")
    /// Black on yellow: the offline banner.
    public static let banner = ANSI(code: "30;43")
}
