import Foundation
@_spi(StateMachine) import SyncCore
import Testing

@Suite struct FeedMachineConnectivityTests {
    let offline = FeedEvent.offline(.noRoute)

    @Test func goingOfflineCancelsInFlightRequestsAndPausesThemWithoutFailing() {
        var h = Harness(afterFirstLoad: page(["3", "2"], older: "2", newer: "3"))
        h.send(.loadOlder)
        h.send(.refresh)
        let older = h.inFlight[.older]!.token, newer = h.inFlight[.newer]!.token
        h.send(offline)
        #expect(Set(h.effects) == [.cancelFetch(.older, older), .cancelFetch(.newer, newer)])
        #expect(h.state.older == DirectionState(load: .idle, paused: true))
        #expect(h.state.newer == DirectionState(load: .idle, paused: true))
        #expect(h.state.older.load.failure == nil)
        #expect(h.state.offline == OfflineBanner(since: h.now, problem: .offline(.noRoute)))
        #expect(h.state.isPaused)
    }

    @Test func nothingIsSentWhileOffline() {
        var h = Harness()
        h.send(offline)
        h.send(.start)
        #expect(h.fetched.isEmpty)
        #expect(h.state.initial.paused)
        #expect(h.presentation.main == .skeleton(rows: Presentation.defaultSkeletonRows))
        for event in [FeedEvent.refresh, .retry, .loadOlder, .periodicRefresh, .start] {
            h.send(event)
            #expect(h.fetched.isEmpty, "\(event)")
        }
        h.advance(3600)
        #expect(h.allFetches.isEmpty)
    }

    @Test func aPauseNeverSpendsRetryBudget() {
        var h = Harness(configuration: .init(retry: .init(base: .seconds(1), multiplier: 2, cap: .seconds(60)), reconnectSpread: .zero))
        h.send(.start)
        h.fail(.initial, transient)
        h.advance(1)
        h.fail(.initial, transient)
        #expect(h.state.initial.load.failure?.attempt == 2)
        // Offline while a retry is scheduled: the timer goes, the failure stays, no attempt is counted.
        h.send(offline)
        #expect(h.timers.isEmpty)
        #expect(h.state.initial == DirectionState(load: .failed(LoadFailure(error: transient, attempt: 2, nextRetryAt: nil)), paused: true))
        h.send(.online())
        #expect(h.fetched.map(\.direction) == [.initial], "failed loads run again at once on reconnect")
        // Offline while that request runs: cancelled, paused, still attempt 2.
        h.send(offline)
        #expect(h.state.initial.load.failure?.attempt == 2)
        #expect(h.state.initial.paused)
        for _ in 0..<10 {
            h.send(.online())
            h.send(offline)
        }
        #expect(h.state.initial.load.failure?.attempt == 2)
        h.send(.online())
        h.fail(.initial, transient)
        #expect(h.state.initial.load.failure?.attempt == 3)
        #expect(h.scheduled[.initial] == .seconds(4), "the backoff continues from the real failures only")
    }

    @Test func reconnectRunsPausedLoadsAndNewerAfterARandomSpread() {
        var h = Harness(configuration: .init(reconnectSpread: .seconds(2)), random: ConstantRandomSource(0.5),
                        afterFirstLoad: page(["3", "2"], older: "2", newer: "3"))
        h.send(.loadOlder)
        h.send(offline)
        h.send(.online())
        #expect(h.fetched.isEmpty, "spread: not in the same instant")
        #expect(h.scheduled == [.older: .seconds(1), .newer: .seconds(1)], "paused older, and newer (refetch on reconnect)")
        #expect(h.state.offline == nil)
        #expect(!h.state.isPaused)
        h.advance(1)
        #expect(Set(h.inFlight.keys) == [.older, .newer])
    }

    @Test func reconnectWithoutSpreadRunsAtOnce() {
        var h = Harness()
        h.send(.start)
        h.send(offline)
        h.send(.online())
        #expect(h.fetched.map(\.direction) == [.initial])
    }

    @Test func reconnectKeepsTheRetryAfterFloor() {
        var h = Harness(configuration: .init(reconnectSpread: .seconds(1)), random: ConstantRandomSource(1))
        h.send(.start)
        h.fail(.initial, FeedError(.httpStatus(503), "busy", retryAfter: .seconds(60)))
        h.advance(10)
        h.send(offline)
        h.advance(5)
        h.send(.online())
        #expect(h.scheduled[.initial] == .seconds(45), "the server asked for 60 s; 15 have passed")
    }

    @Test func reconnectLeavesPermanentFailuresAlone() {
        var h = Harness()
        h.send(.start)
        h.fail(.initial, notFound)
        h.send(offline)
        #expect(!h.state.initial.paused)
        h.send(.online())
        #expect(h.effects.isEmpty)
        #expect(h.state.initial.load.failure?.error == notFound)
    }

    @Test func offlineReasonUpdatesKeepTheSinceDate() {
        var h = Harness()
        h.send(offline)
        let since = h.now
        h.advance(30)
        h.send(.offline(.noCarrier))
        #expect(h.state.offline == OfflineBanner(since: since, problem: .offline(.noCarrier)))
        h.send(.online())
        #expect(h.state.offline == nil)
        h.send(.online())
        #expect(h.effects.isEmpty, "online while online is no transition")
    }

    @Test func aPageCommittedWhileGoingOfflineIsNotLoadedAgain() {
        var h = Harness()
        h.send(.start)
        let request = h.inFlight[.initial]!
        h.send(offline)
        // The page was being committed when the verdict arrived: the store now holds it.
        let outcome = h.log.commit(page(["2", "1"], older: "1", newer: "2"), direction: .initial, at: h.now)
        h.send(.committed(.initial, request.token, outcome))
        #expect(h.state.hasLoaded)
        #expect(h.state.initial == DirectionState(load: .loaded, paused: false))
        h.send(.online())
        #expect(h.fetched.map(\.direction) == [.newer], "only the refetch on reconnect, no second first load")
    }

    @Test func unknownConnectivityCountsAsOnline() {
        var h = Harness()
        h.send(.start)
        #expect(h.fetched.count == 1)
        h.send(.online())
        #expect(h.effects.isEmpty, "unknown → online releases nothing and refetches nothing")
    }
}
