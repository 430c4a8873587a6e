import Foundation
import SyncControl
import SyncTerminal
import Testing

@Suite("Terminal rendering")
struct RenderingTests {
    let utc = TimeZone(identifier: "UTC")!

    @Test func statusTableOnline() {
        let text = StatusTable.render(Samples.status(), now: Samples.now, style: .plain, timeZone: utc)
        let expected = """
            ● syncd 0.1.0
                   State: online via eth0 (2 of 2 feeds reachable)
                   Since: 2024-05-01 11:55:00 UTC; 5min ago
                Internet: online via eth0 (ipv4)
                   Feeds: 2 (1 failing)

            ● home
                  Source: https://social.example/api/v1/timelines/home
                   State: degraded
            Connectivity: online via eth0 (ipv4) since 2024-05-01 11:55:00 UTC; 5min ago
                 Initial: loaded
                   Older: failed (attempt 3): timeout; next retry in 12s
                   Newer: loaded
                   Items: 120
               Last sync: 2024-05-01 11:57:00 UTC; 3min ago
              Next retry: 2024-05-01 12:00:12 UTC; in 12s

            ● work
                   State: loading
            Connectivity: online via eth0 (ipv4) since 2024-05-01 11:55:00 UTC; 5min ago
                 Initial: loading
                   Older: idle
                   Newer: idle
                   Items: 0
               Last sync: never

            """
        #expect(text == expected)
    }

    @Test func statusTableOfflineShowsReasonSinceAndBanner() {
        let text = StatusTable.render(Samples.status(online: false), feeds: ["work"], now: Samples.now, style: .plain, timeZone: utc)
        #expect(text.contains("State: offline: 2 of 2 feeds (no carrier)"))
        #expect(text.contains("Since: 2024-05-01 11:57:55 UTC; 2min 5s ago"))
        #expect(text.contains("Banner: Offline (no carrier): syncing is paused"))
        #expect(text.contains("State: paused (offline: no carrier)"))
        #expect(text.contains("Initial: loading (paused, offline)"))
        #expect(!text.contains("● home"), "the feed filter applies")
    }

    /// One host behind a blackhole, the other fine: the top line counts, the banner names the
    /// feed it applies to, and that feed reads paused even with nothing loading.
    @Test func statusTableWithOneOfTwoFeedHostsOffline() {
        var status = Samples.status()
        let down = Samples.now.addingTimeInterval(-30)
        status.feeds[1] = ControlFeed(name: "work", initial: .loaded, itemCount: 5, connectivity: .offline(reason: .noRoute, since: down), presentation: ControlPresentation(main: .content([])))
        status = ControlStatus(version: status.version, internet: status.internet, feeds: status.feeds)
        #expect(status.connectivity == ControlConnectivitySummary(state: .partial, feeds: 2, offline: 1, reasons: [.noRoute], link: "eth0", since: down))
        #expect(status.banner?.feeds == ["work"])
        let text = StatusTable.render(status, now: Samples.now, style: .plain, timeZone: utc)
        #expect(text.contains("       State: partial: 1 of 2 feeds offline (no route to host)\n"), "\(text)")
        #expect(text.contains("Banner: Offline (no route to host) for work: its syncing is paused"), "\(text)")
        #expect(text.contains("       State: paused (offline: no route to host)\nConnectivity: offline (no route to host) since 2024-05-01 11:59:30 UTC; 30s ago\n"), "\(text)")
        #expect(text.contains("       State: degraded\nConnectivity: online via eth0 (ipv4)"), "\(text)")
        let frame = WatchFrame.render(status, time: 0, now: Samples.now, style: TerminalStyle(color: false, width: 80, height: 40), timeZone: utc)
        #expect(frame[0].hasPrefix("syncd 0.1.0 · 1 of 2 feeds offline (no route to host)"), "\(frame)")
        #expect(frame[1].contains("Offline (no route to host) for work"), "\(frame)")
    }

    @Test func summaryNamesTheWorstReasonFirstAndWaitsForEveryVerdict() {
        func feed(_ name: String, _ connectivity: ControlConnectivity?) -> ControlFeed {
            ControlFeed(name: name, connectivity: connectivity, presentation: ControlPresentation(main: .empty))
        }
        let t = Samples.now
        let mixed = ControlConnectivitySummary(feeds: [
            feed("a", .offline(reason: .noRoute, since: t)), feed("b", .offline(reason: .noCarrier, since: t.addingTimeInterval(-5))),
            feed("c", .offline(reason: .noRoute, since: t)),
        ])
        #expect(mixed.state == .offline && mixed.reasons == [.noCarrier, .noRoute] && mixed.since == t.addingTimeInterval(-5))
        #expect(mixed.description == "offline (no carrier, no route to host)")
        #expect(ControlConnectivitySummary(feeds: [feed("a", nil), feed("b", .online(link: "wg0", family: .ipv4, since: t))]).state == .unknown)
        #expect(ControlConnectivitySummary(feeds: []).state == .unknown)
        let twoLinks = ControlConnectivitySummary(feeds: [feed("a", .online(link: "wg0", family: .ipv4, since: t)), feed("b", .online(link: "eth0", family: .ipv6, since: t.addingTimeInterval(1)))])
        #expect(twoLinks.state == .online && twoLinks.link == nil && twoLinks.since == t.addingTimeInterval(1))
        #expect(ControlOfflineBanner(feeds: [feed("a", .online(link: "wg0", family: .ipv4, since: t))]) == nil)
    }

    @Test func colourOnlyWhenAllowed() {
        let coloured = StatusTable.render(Samples.status(), now: Samples.now, style: TerminalStyle(color: true), timeZone: utc)
        #expect(coloured.contains("\u{1B}[32m●\u{1B}[0m"))
        let plain = StatusTable.render(Samples.status(), now: Samples.now, style: .plain, timeZone: utc)
        #expect(!plain.contains("\u{1B}"))

        // Tests do not run on a terminal: stdout of `swift test` is a pipe or file.
        #expect(TerminalStyle.detect(fileDescriptor: -1, environment: [:]).color == false)
        #expect(TerminalStyle.detect(fileDescriptor: -1, environment: ["SYSTEMD_COLORS": "1"]).color == true)
        #expect(TerminalStyle.detect(fileDescriptor: -1, environment: ["SYSTEMD_COLORS": "1", "NO_COLOR": "1"]).color == false)
        #expect(TerminalStyle.detect(fileDescriptor: -1, environment: ["SYSTEMD_COLORS": "1", "NO_COLOR": ""]).color == true)
    }

    @Test func spansReadLikeSystemd() {
        #expect(TimeFormatting.span(0.25) == "250ms")
        #expect(TimeFormatting.span(125) == "2min 5s")
        #expect(TimeFormatting.span(3_600 + 300 + 7) == "1h 5min")
        #expect(TimeFormatting.span(2 * 86_400 + 3 * 3_600) == "2d 3h")
        #expect(TimeFormatting.relative(Samples.now.addingTimeInterval(12), now: Samples.now) == "in 12s")
    }

    @Test func shimmerSweepsWithASmoothEdge() {
        #expect(Shimmer.smoothstep(0, 1, 0) == 0)
        #expect(Shimmer.smoothstep(0, 1, 1) == 1)
        #expect(Shimmer.smoothstep(0, 1, 0.5) == 0.5)
        // The peak moves right as the phase advances.
        func peak(_ phase: Double) -> Int {
            (0..<60).max { Shimmer.intensity(column: $0, width: 60, phase: phase) < Shimmer.intensity(column: $1, width: 60, phase: phase) }!
        }
        #expect(peak(0.3) < peak(0.5))
        #expect(peak(0.5) < peak(0.7))
        #expect(Shimmer.phase(at: Shimmer.period * 2.25) == 0.25)
    }

    /// Every skeleton row is drawn from the one clock: at any time, the highlight sits in the
    /// same column on every row.
    @Test func skeletonRowsShimmerInOnePhase() {
        var status = Samples.status()
        status.feeds = [status.feeds[1]]
        for time in [0.0, 0.4, 0.8, 1.2] {
            let frame = WatchFrame.render(status, time: time, now: Samples.now, style: TerminalStyle(color: false, width: 60, height: 30), timeZone: utc)
            let rows = frame.filter { $0.contains("░") || $0.contains("▓") || $0.contains("▒") }
            #expect(rows.count == 4)
            // Rows differ in length; where the highlight falls inside a row, it is in one column.
            let highlight = rows.map { row in Array(row).firstIndex(of: "▓") }
            #expect(Set(highlight.compactMap { $0 }).count <= 1, "time \(time): \(highlight)")
            if time == 0.4 { #expect(highlight.allSatisfy { $0 != nil }) }
        }
    }

    @Test func watchFrameShowsContentFooterNoticeAndBanner() {
        let frame = WatchFrame.render(Samples.status(online: false), time: 0, now: Samples.now, style: TerminalStyle(color: false, width: 72, height: 40), timeZone: utc)
        let text = frame.joined(separator: "\n")
        #expect(frame[0].hasPrefix("syncd 0.1.0 · offline (no carrier)"))
        #expect(frame[0].hasSuffix("12:00:00"))
        #expect(frame[1].contains("⚠ Offline (no carrier)"))
        #expect(text.contains("↑ 3 new items"))
        #expect(text.contains("• Hello world"))
        #expect(text.contains("✕ Couldn't load older: timeout"))
        #expect(text.contains("syncctl retry home"))
        #expect(frame.allSatisfy { $0.count <= 72 })
    }

    @Test func watchFrameFootersAndMainViews() {
        var feed = Samples.status().feeds[0]
        feed.presentation = ControlPresentation(main: .content([]), olderFooter: .spinner)
        var status = Samples.status()
        status.feeds = [feed]
        let spinning = WatchFrame.render(status, time: 0.08, now: Samples.now, style: .plain, timeZone: utc)
        #expect(spinning.last == "  ⠙ Loading older…")
        #expect(WatchFrame.isAnimated(status))

        status.feeds[0].presentation = ControlPresentation(main: .content([]), olderFooter: .end)
        #expect(WatchFrame.render(status, time: 0, now: Samples.now, style: .plain, timeZone: utc).last == "  ── end of feed ──")
        #expect(!WatchFrame.isAnimated(status))

        status.feeds[0].presentation = ControlPresentation(main: .empty)
        #expect(WatchFrame.render(status, time: 0, now: Samples.now, style: .plain, timeZone: utc).last == "  Nothing here yet.")

        status.feeds[0].presentation = ControlPresentation(main: .error("HTTP 500"))
        let failed = WatchFrame.render(status, time: 0, now: Samples.now, style: .plain, timeZone: utc)
        #expect(failed.suffix(2) == ["  ✕ Couldn't load home: HTTP 500", "    Retry: syncctl retry home"])

        status.feeds[0].presentation = ControlPresentation(main: .content([]), newerNotice: .error("HTTP 503"))
        #expect(WatchFrame.render(status, time: 0, now: Samples.now, style: .plain, timeZone: utc).contains("  ✕ Couldn't refresh: HTTP 503"))
    }

    @Test func watchFrameFitsManyRowsIntoTheHeight() {
        var status = Samples.status()
        status.feeds = [status.feeds[0]]
        status.feeds[0].presentation = ControlPresentation(main: .content((1...100).map { ControlRow(id: "\($0)", summary: "row \($0)") }), olderFooter: .spinner)
        let frame = WatchFrame.render(status, time: 0, now: Samples.now, style: TerminalStyle(color: false, width: 80, height: 12), timeZone: utc)
        #expect(frame.count <= 12)
        #expect(frame.contains { $0.contains("more") })
        #expect(frame.last?.contains("Loading older") == true)
    }

    @Test func itemsTableAndNextHint() {
        let page = ControlItemPage(items: [ControlItem(id: "42", summary: "hello", payload: [:])], next: "42")
        let text = ItemsTable.render(page, feed: "home", style: .plain)
        #expect(text == "ID  SUMMARY\n42  hello\n\n1 item. More: syncctl items home --after 42\n")
    }

    @Test func presentationWireShape() throws {
        let presentation = ControlPresentation(main: .skeleton(rows: 3), olderFooter: .error("timeout"), newerNotice: .newItems(count: 2))
        let json = String(decoding: try ControlJSON.makeEncoder().encode(presentation), as: UTF8.self)
        #expect(json == #"{"main":"skeleton","newerNotice":{"count":2,"kind":"new_items","message":"2 new items"},"olderFooter":{"kind":"error","message":"timeout"},"skeletonRows":3}"#)
        #expect(try ControlJSON.makeDecoder().decode(ControlPresentation.self, from: Data(json.utf8)) == presentation)
    }
}
