import Foundation
@_spi(StateMachine) import SyncCore
import Testing

@Suite struct FeedMachineTransitionTests {
    @Test func freshFeedStartsIdleAndTheFirstLoadRunsOnStart() {
        var h = Harness()
        #expect(h.state.initial == DirectionState(load: .idle))
        #expect(!h.state.hasLoaded)
        h.send(.start)
        #expect(h.fetched == [FetchRequest(direction: .initial, cursor: nil, token: h.fetched.first!.token)])
        #expect(h.state.initial.load == .loading)
    }

    @Test func firstLoadSuccessLoadsTheFeed() {
        let h = Harness(afterFirstLoad: page(["9", "8", "7"], older: "7", newer: "9"))
        #expect(h.state.initial.load == .loaded)
        #expect(h.state.hasLoaded)
        #expect(h.state.itemCount == 3)
        #expect(!h.state.endReached)
        #expect(!h.state.isEmpty)
        #expect(h.state.older.load == .idle && h.state.newer.load == .idle)
        #expect(h.state.lastSyncAt == h.now)
        #expect(h.effects.isEmpty, "no backfill configured, so nothing else runs")
    }

    @Test func emptyFirstPageIsTheEmptyStateWithEndReached() {
        var h = Harness(afterFirstLoad: page([], older: nil, newer: nil))
        #expect(h.state.isEmpty)
        #expect(h.state.endReached)
        h.send(.loadOlder)
        #expect(h.fetched.isEmpty, "nothing older than the end")
    }

    @Test func olderAndNewerWaitForTheFirstSuccessfulLoad() {
        var h = Harness()
        h.send(.loadOlder)
        h.send(.periodicRefresh)
        #expect(h.allFetches.isEmpty)
        h.send(.start)
        h.send(.loadOlder)
        h.send(.periodicRefresh)
        h.send(.refresh)
        #expect(h.allFetches.map(\.direction) == [.initial], "refresh before the first load only coalesces with it")
        h.fail(.initial, transient)
        h.send(.loadOlder)
        #expect(h.fetched.isEmpty)
        #expect(h.state.older.load == .idle)
    }

    @Test func olderAppendsFromTheOlderCursorUntilTheEnd() {
        var h = Harness(afterFirstLoad: page(["9", "8"], older: "8", newer: "9"))
        h.send(.loadOlder)
        #expect(h.fetched.map(\.cursor) == ["8"])
        #expect(h.state.older.load == .loading)
        h.succeed(.older, page(["7", "6"], older: "6", newer: nil))
        #expect(h.state.older.load == .loaded)
        h.send(.loadOlder)
        h.succeed(.older, page(["5"], older: nil, newer: nil))
        #expect(h.state.endReached)
        h.send(.loadOlder)
        #expect(h.fetched.isEmpty)
        #expect(h.log.items.map(\.id) == ["9", "8", "7", "6", "5"])
    }

    @Test func newerLoopsWhilePagesBringItemsAndStopsOnAnEmptyPage() {
        var h = Harness(afterFirstLoad: page(["3", "2"], older: "2", newer: "3"))
        h.send(.refresh)
        #expect(h.fetched.map(\.cursor) == ["3"])
        #expect(h.state.newer.load == .loading)
        h.succeed(.newer, page(["5", "4"], older: "4", newer: "5"))
        #expect(h.fetched.map(\.cursor) == ["5"], "a non-empty page asks for the next one")
        h.succeed(.newer, page(["7", "6"], older: "6", newer: "7"))
        #expect(h.fetched.map(\.cursor) == ["7"])
        h.succeed(.newer, page([], older: nil, newer: nil))
        #expect(h.fetched.isEmpty, "an empty page means caught up")
        #expect(h.state.newer.load == .loaded)
        #expect(h.log.items.map(\.id) == ["7", "6", "5", "4", "3", "2"])
    }

    @Test func refreshOfAFeedThatWasEmptyFetchesTheFirstPageAgain() {
        var h = Harness(afterFirstLoad: page([], older: nil, newer: nil))
        h.send(.refresh)
        #expect(h.fetched.map(\.cursor) == [nil], "no newer cursor: the source's first page")
        h.succeed(.newer, page(["2", "1"], older: "1", newer: "2"))
        #expect(h.state.itemCount == 2)
        #expect(!h.state.endReached, "the new content brings an older cursor")
        #expect(h.fetched.map(\.cursor) == ["2"])
    }

    @Test func duplicateTriggersCoalesce() {
        var h = Harness()
        h.send(.start)
        h.send(.start)
        h.send(.refresh)
        h.send(.retry)
        #expect(h.allFetches.count == 1)
        h.succeed(.initial, page(["3", "2"], older: "2", newer: "3"))
        for _ in 0..<5 {
            h.send(.loadOlder)
            h.send(.refresh)
            h.send(.periodicRefresh)
        }
        #expect(h.allFetches.map(\.direction) == [.initial, .older, .newer])
    }

    @Test func failureBacksOffAndTheTimerRetries() {
        var h = Harness(configuration: .init(retry: .init(base: .seconds(1), multiplier: 2, cap: .seconds(8)), reconnectSpread: .zero))
        h.send(.start)
        let start = h.now
        h.fail(.initial, transient)
        #expect(h.state.initial.load == .failed(LoadFailure(error: transient, attempt: 1, nextRetryAt: start.addingTimeInterval(1))))
        #expect(h.scheduled == [.initial: .seconds(1)])
        h.advance(0.5)
        #expect(h.inFlight.isEmpty, "not before the delay")
        h.advance(0.5)
        #expect(h.inFlight[.initial] != nil)
        #expect(h.state.initial.load == .loading)
        h.fail(.initial, timeout)
        #expect(h.state.initial.load.failure?.attempt == 2)
        #expect(h.scheduled == [.initial: .seconds(2)])
    }

    @Test func backoffSequenceThroughTheMachineReachesTheCap() {
        var h = Harness(configuration: .init(retry: .init(base: .seconds(1), multiplier: 2, cap: .seconds(20)), reconnectSpread: .zero),
                        afterFirstLoad: page(["2", "1"], older: "1", newer: "2"))
        h.send(.refresh)
        var delays: [Duration] = []
        for _ in 0..<7 {
            h.fail(.newer, transient)
            delays.append(h.scheduled[.newer]!)
            h.advance(delays.last!.secondsValue)
        }
        #expect(delays == [.seconds(1), .seconds(2), .seconds(4), .seconds(8), .seconds(16), .seconds(20), .seconds(20)])
        #expect(h.state.newer.load == .loading)
        h.succeed(.newer, page([], older: nil, newer: nil))
        #expect(h.state.newer.load == .loaded)
        h.send(.refresh)
        h.fail(.newer, transient)
        #expect(h.scheduled[.newer] == .seconds(1), "success resets the backoff")
        #expect(h.state.newer.load.failure?.attempt == 1)
    }

    @Test func jitterUsesTheRandomFraction() {
        var h = Harness(configuration: .init(retry: .init(base: .seconds(10), multiplier: 2, cap: .seconds(100)), reconnectSpread: .zero),
                        random: ConstantRandomSource(0.25))
        h.send(.start)
        h.fail(.initial, transient)
        #expect(h.scheduled[.initial] == .seconds(2.5))
        #expect(h.state.nextRetryAt == h.now.addingTimeInterval(2.5))
    }

    @Test func retryAfterIsAFloor() {
        var h = Harness(configuration: .init(retry: .init(base: .seconds(1), multiplier: 2, cap: .seconds(10)), reconnectSpread: .zero),
                        random: ConstantRandomSource(0.1))
        h.send(.start)
        h.fail(.initial, FeedError(.httpStatus(429), "slow down", retryAfter: .seconds(30)))
        #expect(h.scheduled[.initial] == .seconds(30))
        #expect(h.state.initial.load.failure?.nextRetryAt == h.now.addingTimeInterval(30))
        h.advance(29)
        #expect(h.inFlight.isEmpty)
        h.advance(1)
        #expect(h.inFlight[.initial] != nil)
    }

    @Test func permanentErrorsWaitForAManualRetry() {
        var h = Harness()
        h.send(.start)
        h.fail(.initial, notFound)
        #expect(h.state.initial.load == .failed(LoadFailure(error: notFound, attempt: 1, nextRetryAt: nil)))
        #expect(h.timers.isEmpty)
        h.advance(10_000)
        #expect(h.inFlight.isEmpty)
        h.send(.retry)
        #expect(h.fetched.map(\.direction) == [.initial], "a manual retry runs even a permanent failure")
        h.succeed(.initial, page(["1"], older: nil, newer: "1"))
        h.send(.refresh)
        h.fail(.newer, FeedError(.httpStatus(403), "forbidden"))
        h.send(.periodicRefresh)
        #expect(h.fetched.isEmpty, "automatic triggers leave a permanent failure alone")
        h.send(.refresh)
        #expect(h.fetched.map(\.direction) == [.newer], "a manual refresh does not")
    }

    @Test func automaticBudgetStopsRetriesButManualOnesStillRun() {
        var h = Harness(configuration: .init(retry: .init(maxAutomaticAttempts: 2), reconnectSpread: .zero))
        h.send(.start)
        h.fail(.initial, transient)
        h.advance(1)
        h.fail(.initial, transient)
        #expect(h.state.initial.load.failure == LoadFailure(error: transient, attempt: 2, nextRetryAt: nil))
        #expect(h.timers.isEmpty)
        h.send(.retry)
        #expect(h.fetched.count == 1)
    }

    @Test func automaticTriggersDoNotBypassAScheduledRetryButManualOnesDo() {
        var h = Harness(afterFirstLoad: page(["2", "1"], older: "1", newer: "2"))
        h.send(.refresh)
        h.fail(.newer, transient)
        h.send(.periodicRefresh)
        #expect(h.fetched.isEmpty)
        h.send(.refresh)
        #expect(h.fetched.map(\.direction) == [.newer])
        #expect(h.timers[.newer] == nil, "the scheduled retry is replaced by the manual run")
    }

    @Test func retryRetriesTheFailedFirstLoadFirst() {
        var h = Harness()
        h.send(.start)
        h.fail(.initial, notFound)
        h.send(.retry)
        #expect(h.fetched.map(\.direction) == [.initial])
        h.succeed(.initial, page(["3", "2"], older: "2", newer: "3"))
        h.send(.loadOlder)
        h.send(.refresh)
        h.fail(.older, notFound)
        h.fail(.newer, notFound)
        h.send(.retry)
        #expect(Set(h.fetched.map(\.direction)) == [.older, .newer])
    }

    @Test func laterFailuresKeepLoadedContent() {
        var h = Harness(afterFirstLoad: page(["3", "2"], older: "2", newer: "3"))
        h.send(.loadOlder)
        h.fail(.older, transient)
        h.send(.refresh)
        h.fail(.newer, notFound)
        #expect(h.state.hasLoaded)
        #expect(h.state.initial.load == .loaded)
        #expect(h.presentation.main == .content(itemCount: 2))
    }

    @Test func staleAnswersAreIgnored() {
        var h = Harness()
        h.send(.start)
        let first = h.inFlight[.initial]!
        h.send(.offline(.noCarrier))
        h.send(.online())
        let second = h.inFlight[.initial]!
        #expect(first.token != second.token)
        h.send(.failed(.initial, first.token, transient))
        #expect(h.state.initial.load == .loading, "a cancelled request's failure changes nothing")
        h.send(.timerFired(.initial, FetchToken(999)))
        #expect(h.fetched.isEmpty)
    }

    @Test func restartResumesFromStoredCursors() {
        let stored = PersistedFeed(olderCursor: "o", newerCursor: "n", endReached: false, hasLoaded: true, itemCount: 40, lastSyncAt: nil, revision: 3)
        var h = Harness(persisted: stored)
        #expect(h.state.hasLoaded)
        #expect(h.presentation.main == .content(itemCount: 40))
        h.send(.start)
        #expect(h.fetched == [FetchRequest(direction: .newer, cursor: "n", token: h.fetched[0].token)], "no initial reload")
        var quiet = Harness(configuration: .init(reconnectSpread: .zero, refreshOnStart: false), persisted: stored)
        quiet.send(.start)
        #expect(quiet.fetched.isEmpty)
    }

    /// A positional older cursor (an offset) kept over a stop may point at items newer than the
    /// stored ones once more arrived: the refresh stores those first, then the backfill resumes.
    @Test func aResumedBackfillWaitsForTheRefreshOnStart() {
        let stored = PersistedFeed(olderCursor: "o", newerCursor: "n", endReached: false, hasLoaded: true, itemCount: 40, lastSyncAt: nil, revision: 3)
        let configuration = SyncConfiguration(reconnectSpread: .zero, backfillDepth: 100)
        var h = Harness(configuration: configuration, persisted: stored)
        h.send(.start)
        #expect(h.fetched.map(\.direction) == [.newer], "the refresh alone")
        h.succeed(.newer, page([], older: nil, newer: nil))
        #expect(h.fetched.map(\.direction) == [.older], "caught up: the backfill goes on")
        #expect(h.fetched.first?.cursor == "o")

        var failing = Harness(configuration: configuration, persisted: stored)
        failing.send(.start)
        failing.fail(.newer, FeedError(.transport, "connection refused"))
        #expect(failing.fetched.map(\.direction) == [.older], "a failed refresh does not hold the backfill")

        var byHand = Harness(configuration: configuration, persisted: stored)
        byHand.send(.start)
        byHand.send(.loadOlder)
        #expect(byHand.fetched.map(\.direction) == [.older], "asked for by hand, at once")

        var quiet = Harness(configuration: .init(reconnectSpread: .zero, backfillDepth: 100, refreshOnStart: false), persisted: stored)
        quiet.send(.start)
        #expect(quiet.fetched.map(\.direction) == [.older], "no refresh on start: nothing to wait for")
    }

    /// A refresh asked for while a newer load runs (a retry, a periodic refresh) is not lost: the
    /// load in flight began before it, and may miss what came since.
    @Test func aRefreshAskedForDuringALoadRunsAfterIt() {
        let stored = PersistedFeed(olderCursor: nil, newerCursor: "n", endReached: true, hasLoaded: true, itemCount: 40, lastSyncAt: nil, revision: 3)
        var h = Harness(configuration: .init(reconnectSpread: .zero), persisted: stored)
        h.send(.start)
        #expect(h.fetched.map(\.direction) == [.newer])
        h.send(.refresh)
        #expect(h.fetched.isEmpty, "one load at a time")
        h.succeed(.newer, page([], older: nil, newer: nil))
        #expect(h.fetched.map(\.direction) == [.newer], "the refresh asked for meanwhile")
        h.succeed(.newer, page([], older: nil, newer: nil))
        #expect(h.fetched.isEmpty, "and only once")

        var failing = Harness(configuration: .init(reconnectSpread: .zero), persisted: stored)
        failing.send(.start)
        failing.send(.refresh)
        failing.fail(.newer, FeedError(.transport, "connection reset"))
        #expect(failing.fetched.map(\.direction) == [.newer], "at once, not after the backoff")
    }

    @Test func backfillLoadsOlderUntilTheDepthIsStored() {
        var h = Harness(configuration: .init(reconnectSpread: .zero, backfillDepth: 5), afterFirstLoad: page(["9", "8"], older: "8", newer: "9"))
        #expect(h.fetched.map(\.cursor) == ["8"])
        h.succeed(.older, page(["7", "6"], older: "6", newer: nil))
        #expect(h.fetched.map(\.cursor) == ["6"])
        h.succeed(.older, page(["5", "4"], older: "4", newer: nil))
        #expect(h.fetched.isEmpty, "6 items ≥ depth 5")
        var ends = Harness(configuration: .init(reconnectSpread: .zero, backfillDepth: 100))
        ends.send(.start)
        ends.succeed(.initial, page(["2"], older: "2", newer: "2"))
        ends.succeed(.older, page(["1"], older: nil, newer: nil))
        #expect(ends.fetched.isEmpty, "the end of the feed stops backfill")
    }

    @Test func backfillDoesNotSpinOnACursorThatBringsNothingNew() {
        var h = Harness(configuration: .init(reconnectSpread: .zero, backfillDepth: 100), afterFirstLoad: page(["2", "1"], older: "1", newer: "2"))
        h.succeed(.older, page(["1"], older: "1", newer: nil))
        #expect(h.fetched.isEmpty)
    }
}
