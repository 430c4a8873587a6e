import Foundation
import SyncControl
import SyncTerminal
import Testing

/// Feed content cannot control the terminal, and layout counts columns, not characters.
@Suite("Terminal safety and layout")
struct TerminalSafetyTests {
    let utc = TimeZone(identifier: "UTC")!

    /// Text a hostile feed might send: clear screen, set the title (OSC, BEL-terminated), a C1
    /// CSI, DEL, a right-to-left override and an isolate, and line breaks.
    static let hostile = "evil\u{1B}[2J\u{1B}]0;pwned\u{07}\u{9B}31m\u{7F}\u{202E}txt.exe\u{2066}x\u{2069}\r\nnext\tline"

    /// No byte below 0x20 but the newline, and none of C1 or the bidi controls.
    static func isClean(_ text: String) -> Bool {
        text.utf8.allSatisfy { $0 >= 0x20 || $0 == 0x0A }
            && !text.unicodeScalars.contains { (0x7F...0x9F).contains($0.value) || (0x202A...0x202E).contains($0.value) || (0x2066...0x2069).contains($0.value) }
    }

    /// Lines of a plain frame with colour on, with our own SGR sequences taken out.
    static func stripSGR(_ line: String) -> String {
        line.replacingOccurrences(of: "\u{1B}\\[[0-9;]*m", with: "", options: .regularExpression)
    }

    static func hostileStatus() -> ControlStatus {
        var status = Samples.status()
        status.feeds[0].name = "home\u{1B}[31m"
        status.feeds[0].source = "https://x/\u{1B}]0;t\u{07}"
        status.feeds[0].older = .failed("GET https://x/\u{9B}2J: HTTP 500", attempt: 1, nextRetryAt: nil)
        status.feeds[0].presentation = ControlPresentation(
            main: .content([ControlRow(id: "1\u{1B}[H", summary: hostile), ControlRow(id: "2", summary: "fine")]),
            olderFooter: .error("GET https://x/\u{1B}[2J: HTTP 404 Not Found"),
            newerNotice: .error("GET https://x/y: HTTP 503 \u{1B}]0;title\u{07}")
        )
        return status
    }

    @Test func sanitizerRemovesEveryControl() {
        let clean = TerminalText.sanitize(Self.hostile)
        #expect(Self.isClean(clean))
        #expect(!clean.contains("\n"))
        #expect(clean.hasPrefix("evil\u{FFFD}[2J"), "what was there stays visible as U+FFFD")
        #expect(clean.contains("txt.exe"))
        #expect(TerminalText.sanitize("plain ☕ 漢字") == "plain ☕ 漢字")
    }

    @Test(arguments: [
        ("a", 1), ("☕", 2), ("漢字", 4), ("e\u{301}", 1), ("👍🏽", 2), ("👨‍👩‍👧", 2), ("🇩🇪", 2), ("❤️", 2),
        ("ｗｉｄｅ", 8), ("한국어", 6), ("\u{200B}", 0), ("…", 1), ("⚠", 1), ("⠋", 1),
    ])
    func columnsFollowWcwidth(text: String, columns: Int) {
        #expect(TerminalText.columns(of: text) == columns)
    }

    @Test func errorTextPutsTheCauseFirst() {
        #expect(ErrorText.causeFirst("GET https://example.org/a/b: HTTP 404 Not Found") == "HTTP 404 Not Found · GET https://example.org/a/b")
        #expect(ErrorText.causeFirst("timeout") == "timeout")
        #expect(ErrorText.causeFirst("the bearer token is empty") == "the bearer token is empty")
        #expect(ErrorText.split("GET http://h/p: connect timed out").cause == "connect timed out")
    }

    @Test func watchFrameOfAHostileFeedIsClean() {
        let status = Self.hostileStatus()
        for width in [40, 60, 80] {
            let plain = WatchFrame.render(status, time: 0, now: Samples.now, style: TerminalStyle(color: false, width: width, height: 30), timeZone: utc)
            #expect(Self.isClean(plain.joined(separator: "\n")), "\(plain)")
            // With colour on, the only escapes are our own SGR sequences.
            let colored = WatchFrame.render(status, time: 0, now: Samples.now, style: TerminalStyle(color: true, width: width, height: 30), timeZone: utc)
            #expect(colored.allSatisfy { Self.isClean(Self.stripSGR($0)) })
        }
    }

    @Test func itemsAndStatusOfAHostileFeedAreClean() {
        let page = ControlItemPage(items: [ControlItem(id: "1\u{1B}[H", summary: Self.hostile, payload: [:])], next: "1\u{1B}[H")
        let items = ItemsTable.render(page, feed: "home", style: .plain)
        #expect(Self.isClean(items))
        let status = StatusTable.render(Self.hostileStatus(), now: Samples.now, style: .plain, timeZone: utc)
        #expect(Self.isClean(status))
    }

    /// Wide characters, an error footer and notice at 40, 60 and 80 columns: no line is wider
    /// than the terminal (nothing wraps), the header is the first line, and the cause of the
    /// error survives the cut.
    @Test(arguments: [40, 60, 80])
    func wideCharactersFitTheWidth(width: Int) {
        var status = Samples.status()
        status.feeds[0].presentation = ControlPresentation(
            main: .content([
                ControlRow(id: "1", summary: "☕☕☕ coffee break " + String(repeating: "☕", count: 40)),
                ControlRow(id: "2", summary: "漢字のテキストが続きます。" + String(repeating: "漢", count: 40)),
                ControlRow(id: "3", summary: "👨‍👩‍👧 family e\u{301} " + String(repeating: "👍🏽", count: 40)),
            ]),
            olderFooter: .error("GET https://social.example/api/v1/timelines/home?max_id=1234567890: HTTP 404 Not Found"),
            newerNotice: .error("GET https://social.example/api/v1/timelines/home?min_id=1: HTTP 503 Service Unavailable")
        )
        let style = TerminalStyle(color: true, width: width, height: 20)
        let frame = WatchFrame.render(status, time: 0, now: Samples.now, style: style, timeZone: utc).map(Self.stripSGR)
        for line in frame {
            #expect(TerminalText.columns(of: line) <= width, "\(TerminalText.columns(of: line)) columns: \(line)")
        }
        #expect(frame.count <= 20)
        #expect(frame[0].hasPrefix("syncd 0.1.0"))
        let text = frame.joined(separator: "\n")
        #expect(text.contains("HTTP 404"), "the footer's cause survives the cut at \(width) columns")
        #expect(text.contains("HTTP 503"), "the notice's cause survives the cut at \(width) columns")
        #expect(text.contains("☕"))
    }

    @Test func itemsTableFitsWideSummaries() {
        let page = ControlItemPage(items: [ControlItem(id: "1", summary: String(repeating: "漢", count: 100), payload: [:])], next: nil)
        let lines = ItemsTable.render(page, feed: "home", style: TerminalStyle(color: false, width: 60)).split(separator: "\n")
        #expect(lines.allSatisfy { TerminalText.columns(of: String($0)) <= 60 })
    }

    @Test func newerNoticeShowsNewItems() {
        var status = Samples.status()
        status.feeds[0].presentation = ControlPresentation(main: .content([]), newerNotice: .newItems(count: 2))
        let frame = WatchFrame.render(status, time: 0, now: Samples.now, style: .plain, timeZone: utc)
        #expect(frame.contains("  ↑ 2 new items"))
    }

    @Test func firstLoadErrorStaysWhileRetrying() {
        var status = Samples.status()
        status.feeds = [status.feeds[0]]
        status.feeds[0].initial = ControlDirection(phase: .loading)
        status.feeds[0].presentation = ControlPresentation(main: .error("HTTP 500"))
        let frame = WatchFrame.render(status, time: 0, now: Samples.now, style: .plain, timeZone: utc)
        #expect(frame.contains("  ✕ Couldn't load home: HTTP 500"))
        #expect(frame.last?.contains("Retrying…") == true)
        status.feeds[0].initial = .failed("HTTP 500", attempt: 2, nextRetryAt: Samples.now.addingTimeInterval(12))
        let waiting = WatchFrame.render(status, time: 0, now: Samples.now, style: .plain, timeZone: utc)
        #expect(waiting.last?.contains("Retrying in 12s") == true)
    }
}
