import ConnectivityPolicy
import Foundation
@_spi(StateMachine) import SyncCore
import Testing

/// The per-feed policy over metered links (`on_metered`) and the daily byte budget, as the
/// machine decides them: what is held back, what a manual trigger still does, and what runs
/// when the hold lifts.
@Suite struct FeedMachineMeteredTests {
    static let metered = FeedEvent.online(link: "wwan0", family: "ipv4", cost: LinkCostAssessment(.metered, source: .linkType, detail: "WWAN modem"))
    static let unmetered = FeedEvent.online(link: "eth0", family: "ipv4", cost: LinkCostAssessment(.unmetered, source: .configuration))
    static let utc = TimeZone(identifier: "UTC")!

    /// A loaded feed with older pages left, backfilling up to 1000 items, over `link`.
    func loadedFeed(_ policy: MeteredPolicy, budget: Int64? = nil, spread: Duration = .zero, over link: FeedEvent = metered) -> Harness {
        var h = Harness(configuration: .init(
            reconnectSpread: spread, refreshInterval: .seconds(60), backfillDepth: 1000, onMetered: policy,
            meteredBudget: budget.map { MeteredBudget(bytesPerDay: $0, timeZone: Self.utc) }))
        h.send(link)
        h.send(.start)
        h.succeed(.initial, page(["30", "29"], older: "29", newer: "30"))
        return h
    }

    @Test func newerPolicyHoldsBackfillButRefreshesTheHead() {
        var h = loadedFeed(.newer)
        #expect(h.fetched.isEmpty, "no backfill over a metered link")
        #expect(h.state.older.held == .meteredLink)
        #expect(h.state.newer.held == nil)
        h.send(.periodicRefresh)
        #expect(h.fetched.map(\.direction) == [.newer], "the head stays current")
        h.succeed(.newer, page([], older: nil, newer: nil))
        #expect(h.state.older.held == .meteredLink)
        #expect(LoadHold.meteredLink.description == "metered link")
    }

    @Test func pausePolicyHoldsEveryAutomaticLoadFromTheFirst() {
        var h = Harness(configuration: .init(reconnectSpread: .zero, onMetered: .pause))
        h.send(Self.metered)
        h.send(.start)
        #expect(h.fetched.isEmpty)
        #expect(h.state.initial.held == .meteredLink)
        #expect(!h.state.initial.paused, "paused means waiting for connectivity; this host is reachable")
        h.send(.periodicRefresh)
        #expect(h.fetched.isEmpty)
    }

    @Test func syncPolicySyncsAsOnAnyLink() {
        let h = loadedFeed(.sync)
        #expect(h.fetched.map(\.direction) == [.older])
        #expect(h.state.older.held == nil)
    }

    @Test func aManualTriggerLoadsOncePastThePolicy() {
        var h = loadedFeed(.newer)
        h.send(.loadOlder)
        #expect(h.fetched.map(\.direction) == [.older], "asked for by hand")
        #expect(h.state.older.held == nil)
        h.succeed(.older, page(["28"], older: "28", newer: nil))
        #expect(h.fetched.isEmpty, "the backfill does not go on by itself")
        #expect(h.state.older.held == .meteredLink)
    }

    @Test func leavingTheMeteredLinkResumesWhatWasHeldAfterASpread() {
        var h = loadedFeed(.newer, spread: .seconds(2))
        #expect(h.state.older.held == .meteredLink)
        h.send(Self.unmetered)
        #expect(h.fetched.isEmpty, "not in the same instant as the rest of a fleet")
        #expect(h.scheduled[.older] != nil)
        #expect(h.state.older.held == nil)
        h.advance(2)
        #expect(h.inFlight[.older] != nil)
    }

    @Test func aMeteredLinkHoldsARetryThatWasScheduled() {
        var h = loadedFeed(.newer, over: Self.unmetered)
        #expect(h.inFlight[.older] != nil)
        h.fail(.older, transient)
        #expect(h.timers[.older] != nil)
        h.send(Self.metered)
        #expect(h.timers[.older] == nil, "a retry now would only be held again")
        #expect(h.state.older.held == .meteredLink)
        #expect(h.state.older.load.failure?.nextRetryAt == nil)
        #expect(h.state.older.load.failure?.attempt == 1, "the failure stays shown")
        h.advance(3600)
        #expect(h.allFetches.filter { $0.direction == .older }.count == 1)
        h.send(Self.unmetered)
        #expect(h.inFlight[.older] != nil, "resumed when the link changed")
    }

    @Test func aRequestInFlightFinishesWhenTheLinkBecomesMetered() {
        var h = loadedFeed(.newer, over: Self.unmetered)
        let older = h.inFlight[.older]!
        h.send(Self.metered)
        #expect(!h.effects.contains(.cancelFetch(.older, older.token)))
        h.succeed(.older, page(["28"], older: "28", newer: nil))
        #expect(h.fetched.isEmpty)
        #expect(h.state.older.held == .meteredLink)
    }

    @Test func nothingIsFetchedAheadOverAMeteredLinkUnderABudget() {
        let h = loadedFeed(.sync, budget: 1_000_000)
        let older = h.inFlight[.older]!
        let next = page(["28"], older: "28", newer: nil)
        #expect(h.machine.backfillCursor(afterCommitting: next, answering: older.token, in: .older) == nil)
        #expect(h.machine.readAheadCursor(after: "28", pendingItems: 1) == nil)
        let free = loadedFeed(.sync, over: Self.unmetered)
        let unmeteredOlder = free.inFlight[.older]!
        #expect(free.machine.backfillCursor(afterCommitting: next, answering: unmeteredOlder.token, in: .older) == "28")
    }

    @Test func aSpentBudgetHoldsEveryDirectionUntilTheNextDay() {
        var h = loadedFeed(.sync, budget: 50_000_000)
        let day = MeteredBudget(bytesPerDay: 1, timeZone: Self.utc).day(of: h.now)
        h.send(.meteredUsage(MeteredUsage(day: day, bytes: 49_999_999)))
        #expect(h.state.older.held == nil, "under the budget")
        h.succeed(.older, page(["28"], older: "28", newer: nil))
        #expect(h.fetched.map(\.direction) == [.older])
        h.send(.meteredUsage(MeteredUsage(day: day, bytes: 50_000_000)))
        #expect(h.inFlight[.older] != nil, "what is in flight finishes")
        h.succeed(.older, page(["27"], older: "27", newer: nil))
        #expect(h.fetched.isEmpty)
        let spent = LoadHold.meteredBudget(used: 50_000_000, budget: 50_000_000)
        #expect(h.state.older.held == spent)
        h.send(.periodicRefresh)
        #expect(h.fetched.isEmpty)
        #expect(h.state.newer.held == spent)
        #expect(spent.description == "metered budget used: 50 MB today")
        #expect(h.state.meteredUsage == MeteredUsage(day: day, bytes: 50_000_000))

        // The next day: the driver says so; everything held runs.
        let midnight = MeteredBudget(bytesPerDay: 1, timeZone: Self.utc).nextDay(after: h.now)
        h.now = midnight
        let tomorrow = MeteredBudget(bytesPerDay: 1, timeZone: Self.utc).day(of: midnight)
        h.send(.meteredUsage(MeteredUsage(day: tomorrow, bytes: 0)))
        #expect(Set(h.fetched.map(\.direction)) == [.older, .newer])
        #expect(h.state.meteredUsage == MeteredUsage(day: tomorrow, bytes: 0))
    }

    @Test func yesterdaysUsageCountsNothingToday() {
        var h = Harness(configuration: .init(
            reconnectSpread: .zero, onMetered: .sync, meteredBudget: MeteredBudget(bytesPerDay: 10, timeZone: Self.utc)))
        h.send(Self.metered)
        h.send(.meteredUsage(MeteredUsage(day: "2000-01-01", bytes: 1_000)))
        h.send(.start)
        #expect(h.fetched.map(\.direction) == [.initial])
    }

    @Test func aSpentBudgetHoldsNothingOverAnUnmeteredLink() {
        var h = loadedFeed(.sync, budget: 10, over: Self.unmetered)
        let day = MeteredBudget(bytesPerDay: 1, timeZone: Self.utc).day(of: h.now)
        h.send(.meteredUsage(MeteredUsage(day: day, bytes: 1_000)))
        #expect(h.state.older.held == nil)
        #expect(h.inFlight[.older] != nil)
    }

    @Test func aGapWalkStopsWhenTheBudgetIsSpentUnlessAskedForByHand() {
        // A catch-up walk (min_id pages bringing new items) continues page by page; the budget
        // stops an automatic one between pages.
        var h = loadedFeed(.sync, budget: 100)
        let day = MeteredBudget(bytesPerDay: 1, timeZone: Self.utc).day(of: h.now)
        h.succeed(.older, page([], older: nil, newer: nil))
        h.send(.periodicRefresh)
        h.send(.meteredUsage(MeteredUsage(day: day, bytes: 100)))
        h.succeed(.newer, page(["32", "31"], older: nil, newer: "32"))
        #expect(h.fetched.isEmpty, "an automatic walk stops")
        #expect(h.state.newer.held == .meteredBudget(used: 100, budget: 100))
        h.send(.refresh)
        #expect(h.fetched.map(\.direction) == [.newer])
        h.succeed(.newer, page(["34", "33"], older: nil, newer: "34"))
        #expect(h.fetched.map(\.direction) == [.newer], "a walk asked for by hand goes on")
    }

    @Test func byteCountsParseAndPrintAsPeopleWriteThem() {
        #expect(ByteCount.parse("50MB") == 50_000_000)
        #expect(ByteCount.parse("1.5 GB") == 1_500_000_000)
        #expect(ByteCount.parse("512KiB") == 524_288)
        #expect(ByteCount.parse("2 gib") == 2_147_483_648)
        #expect(ByteCount.parse("100") == 100)
        for bad in ["", "MB", "-1MB", "1.2.3MB", "5 parsecs", "1e30", "99999999999TB", "1."] {
            #expect(ByteCount.parse(bad) == nil, "\(bad)")
        }
        #expect(ByteCount.describe(812) == "812 B")
        #expect(ByteCount.describe(3_400) == "3.4 kB")
        #expect(ByteCount.describe(50_000_000) == "50 MB")
        #expect(ByteCount.describe(49_999_999) == "50 MB")
        #expect(ByteCount.describe(1_234_000_000) == "1.2 GB")
    }

    @Test func aBudgetDayEndsAtLocalMidnight() {
        let berlin = MeteredBudget(bytesPerDay: 1, timeZone: TimeZone(identifier: "Europe/Berlin")!)
        // 2026-11-27 23:30 UTC is 00:30 on the 28th in Berlin.
        let date = Date(timeIntervalSince1970: 1_795_822_200)
        #expect(berlin.day(of: date) == "2026-11-28")
        #expect(berlin.nextDay(after: date) == Date(timeIntervalSince1970: 1_795_906_800))
        let usage = MeteredUsage(day: "2026-11-27", bytes: 500)
        #expect(usage.bytes(at: date, budget: berlin) == 0)
        #expect(usage.adding(10, at: date, budget: berlin) == MeteredUsage(day: "2026-11-28", bytes: 10))
        #expect(MeteredUsage(day: "2026-11-28", bytes: .max - 1).adding(10, at: date, budget: berlin).bytes == .max)
    }
}
