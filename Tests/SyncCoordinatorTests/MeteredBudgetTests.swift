import ConnectivityPolicy
import Foundation
import SyncCore
import SyncCoordinator
import Testing
import TestSupport

/// The coordinator keeps a feed's metered budget: it charges what the source received while the
/// link is metered, records it in the store so a restart keeps counting, and renews it at the
/// budget's midnight, on a ``ManualClock``.
@Suite(.timeLimit(.minutes(1)))
struct MeteredBudgetTests {
    let clock = ManualClock()
    let store = InMemoryFeedStore()
    static let utc = TimeZone(identifier: "UTC")!
    /// 2026-11-27 23:00 UTC: an hour before the budget's day ends.
    static let lateEvening = Date(timeIntervalSince1970: 1_795_820_400)
    static let configuration = SyncConfiguration(
        reconnectSpread: .zero, backfillDepth: 100, onMetered: .sync,
        meteredBudget: MeteredBudget(bytesPerDay: 1000, timeZone: utc))

    static func path(_ cost: LinkCost) -> Verdict {
        .online(OnlinePath(
            link: cost == .metered ? "wwan0" : "eth0", linkIndex: 2, family: .ipv4, route: IPPrefix("0.0.0.0/0")!,
            gateway: IPAddress("192.0.2.1"), cost: LinkCostAssessment(cost, source: .configuration)))
    }

    func coordinator(_ source: ScriptedSource) async throws -> FeedCoordinator<ManualClock> {
        try await FeedCoordinator(
            feed: "home", source: source, store: store, configuration: Self.configuration,
            clock: clock, random: ConstantRandomSource(1), wallOrigin: Self.lateEvening)
    }

    @Test func theBudgetHoldsLoadsSurvivesARestartAndRenewsAtMidnight() async throws {
        let source = ScriptedSource()
        let feed = try await coordinator(source)
        await feed.connectivityChanged(Self.path(.metered))
        await feed.start()
        try await source.respond(0, page(["30", "29"], older: "29", newer: "30"), bytes: 600)
        #expect(try await source.call(1).direction == "older", "600 of 1000 bytes: the backfill goes on")
        try await source.respond(1, page(["28"], older: "28", newer: nil), bytes: 500)
        let spent = LoadHold.meteredBudget(used: 1100, budget: 1000)
        let state = try await feed.waitFor { $0.older.held == spent }
        #expect(state.meteredUsage == MeteredUsage(day: "2026-11-27", bytes: 1100))
        #expect(state.itemCount == 3, "the page that crossed the budget is stored")
        await feed.refresh()
        #expect(try await source.call(2).direction == "newer", "asked for by hand: it loads")
        try await source.respond(2, page([], older: nil, newer: nil), bytes: 100)
        try await feed.waitFor { $0.meteredUsage?.bytes == 1200 && !$0.newer.load.isLoading }
        try await waitUntil("the store records 1200 bytes") { await store.meteredUsage(feed: "home")?.bytes == 1200 }
        await feed.stop()

        // A restart reads the day's bytes back: nothing loads by itself.
        let again = try await coordinator(source)
        await again.connectivityChanged(Self.path(.metered))
        await again.start()
        let restarted = try await again.waitFor { $0.newer.held != nil }
        #expect(restarted.newer.held == .meteredBudget(used: 1200, budget: 1000))
        #expect(restarted.older.held == .meteredBudget(used: 1200, budget: 1000))
        #expect(await source.callCount == 3)

        // Midnight: a new day's budget; what was held loads.
        try await clock.advance(by: .seconds(3600), waking: "the budget's midnight")
        let renewed = try await again.waitFor { $0.meteredUsage?.day == "2026-11-28" }
        #expect(renewed.meteredUsage?.bytes == 0)
        #expect(Set([try await source.call(3).direction, try await source.call(4).direction]) == ["newer", "older"])
        await again.stop()
    }

    @Test func bytesOverAnUnmeteredLinkAreNotCharged() async throws {
        let source = ScriptedSource()
        let feed = try await coordinator(source)
        await feed.connectivityChanged(Self.path(.unmetered))
        await feed.start()
        try await source.respond(0, page(["30", "29"], older: "29", newer: "30"), bytes: 5000)
        #expect(try await source.call(1).direction == "older")
        #expect(await feed.state.meteredUsage == MeteredUsage(day: "2026-11-27", bytes: 0))
        // The link turns metered: only what arrives from now on counts.
        await feed.connectivityChanged(Self.path(.metered))
        try await source.respond(1, page(["28"], older: "28", newer: nil), bytes: 700)
        let state = try await feed.waitFor { $0.meteredUsage?.bytes == 700 }
        #expect(state.older.held == nil)
        #expect(try await source.call(2).direction == "older")
        await feed.stop()
    }
}
