import ConnectivityPolicy
import Foundation
import SyncCore
import SyncCoordinator
import SyncStore
import TestSupport
import Testing

/// The coordinator on a ``ManualClock``: no test sleeps on real time; every wait is for an event,
/// and every advance that means to wake (or approach) a timer first waits until it is asleep.
@Suite(.timeLimit(.minutes(1)))
struct FeedCoordinatorTests {
    let clock = ManualClock()
    let store = InMemoryFeedStore()

    func coordinator(
        _ source: ScriptedSource,
        _ configuration: SyncConfiguration = .init(reconnectSpread: .zero),
        random: any RandomSource = ConstantRandomSource(1),
        store: (any FeedStore)? = nil
    ) async throws -> FeedCoordinator<ManualClock> {
        try await FeedCoordinator(feed: "home", source: source, store: store ?? self.store, configuration: configuration,
                                  clock: clock, random: random, wallOrigin: origin)
    }

    @Test func firstLoadIsCommittedAndPublished() async throws {
        let source = ScriptedSource()
        let feed = try await coordinator(source)
        await feed.start()
        #expect(try await source.call(0).direction == "initial")
        #expect(await feed.state.initial.load == .loading)
        try await source.respond(0, page(["3", "2", "1"], older: "1", newer: "3"))
        let state = try await feed.waitFor { $0.hasLoaded }
        #expect(state.itemCount == 3)
        #expect(state.lastSyncAt == origin)
        #expect(try await feed.items().map(\.id) == ["3", "2", "1"])
        #expect(Presentation(state: state).main == .content(itemCount: 3))
    }

    @Test func failuresBackOffOnTheInjectedClock() async throws {
        let source = ScriptedSource()
        let policy = RetryPolicy(base: .seconds(1), multiplier: 2, cap: .seconds(4))
        let feed = try await coordinator(source, .init(retry: policy, reconnectSpread: .zero))
        await feed.start()
        _ = try await source.call(0)
        try await source.fail(0, transient)
        var state = try await feed.waitFor { $0.initial.load.failure != nil }
        #expect(state.initial.load.failure == LoadFailure(error: transient, attempt: 1, nextRetryAt: origin.addingTimeInterval(1)))
        #expect(Presentation(state: state).main == .error(.init(message: "service unavailable", isPermanent: false, nextRetryAt: origin.addingTimeInterval(1), attempt: 1)))

        try await clock.advance(by: .milliseconds(999), before: "the first retry's timer")
        #expect(await source.callCount == 1, "not before the backoff delay")
        try await clock.advance(by: .milliseconds(1), waking: "the first retry's timer")
        #expect(try await source.call(1).direction == "initial")

        // 1 s, 2 s, 4 s, then the 4 s cap, each counted from the failure.
        var elapsed: Duration = .seconds(1)
        for (index, delay) in [Duration.seconds(2), .seconds(4), .seconds(4)].enumerated() {
            try await source.fail(index + 1, transient)
            state = try await feed.waitFor { $0.initial.load.failure?.attempt == index + 2 }
            let retryAt = try #require(state.initial.load.failure?.nextRetryAt)
            #expect(abs(retryAt.timeIntervalSince(origin.adding(elapsed + delay))) < 1e-6, "attempt \(index + 2)")
            try await clock.advance(by: delay, waking: "retry \(index + 2)'s timer")
            _ = try await source.call(index + 2)
            elapsed += delay
        }
        // Retry-After is a floor above the cap.
        try await source.fail(4, FeedError(.httpStatus(429), "too many requests", retryAfter: .seconds(30)))
        state = try await feed.waitFor { $0.initial.load.failure?.attempt == 5 }
        let retryAt = try #require(state.initial.load.failure?.nextRetryAt)
        #expect(abs(retryAt.timeIntervalSince(origin.adding(elapsed + .seconds(30)))) < 1e-6)
        try await clock.advance(by: .seconds(29), before: "the retry timer set by Retry-After")
        #expect(await source.callCount == 5)
        try await clock.advance(by: .seconds(1), waking: "the retry timer set by Retry-After")
        try await source.respond(try await source.call(5).id, page(["1"], older: nil, newer: "1"))
        state = try await feed.waitFor { $0.hasLoaded }
        #expect(state.initial.load == .loaded, "success resets")
    }

    @Test func goingOfflineCancelsTheRequestAndPausesIt() async throws {
        let source = ScriptedSource()
        let feed = try await coordinator(source)
        await feed.start()
        _ = try await source.call(0)
        await clock.advance(by: .seconds(5))
        await feed.connectivityChanged(noCarrier)
        try await source.waitUntilCancelled(0)
        let state = await feed.state
        #expect(state.initial == DirectionState(load: .idle, paused: true))
        #expect(state.offline == OfflineBanner(since: origin.addingTimeInterval(5), problem: .offline(.noCarrier)))
        #expect(Presentation(state: state).main == .skeleton(rows: 8))
        await feed.refresh()
        await feed.retry()
        #expect(clock.sleepers.isEmpty, "no timer runs while offline")
        await clock.advance(by: .seconds(3600))
        #expect(await source.callCount == 1, "nothing is sent while offline")

        await feed.connectivityChanged(online)
        #expect(try await source.call(1).direction == "initial")
        #expect(await feed.state.offline == nil)
        try await source.respond(1, page(["1"], older: nil, newer: "1"))
        try await feed.waitFor { $0.hasLoaded }
    }

    @Test func aLateAnswerToACancelledRequestIsNeverCommitted() async throws {
        let source = ScriptedSource(ignoresCancellation: true)
        let feed = try await coordinator(source)
        await feed.start()
        _ = try await source.call(0)
        await feed.connectivityChanged(noCarrier)
        try await source.waitUntilCancelled(0)
        try await source.respond(0, page(["late"], older: nil, newer: "late"))
        try await waitUntil("the late answer was dropped") { await feed.droppedAnswers > 0 }
        #expect(await store.load(feed: "home") == .fresh)
        #expect(await feed.state.hasLoaded == false)
        await feed.connectivityChanged(online)
        try await source.respond(try await source.call(1).id, page(["fresh"], older: nil, newer: "fresh"))
        try await feed.waitFor { $0.hasLoaded }
        #expect(try await feed.items().map(\.id) == ["fresh"])
    }

    @Test func duplicateTriggersCoalesce() async throws {
        let source = ScriptedSource()
        let feed = try await coordinator(source)
        await feed.start()
        await feed.start()
        await feed.refresh()
        try await source.respond(try await source.call(0).id, page(["5", "4"], older: "4", newer: "5"))
        try await feed.waitFor { $0.hasLoaded }
        for _ in 0..<5 {
            await feed.loadOlder()
            await feed.refresh()
        }
        let older = try await source.call(1), newer = try await source.call(2)
        #expect(Set([older.direction, newer.direction]) == ["older", "newer"])
        await Task.megaYield()
        #expect(await source.callCount == 3)
        let state = await feed.state
        #expect(state.older.load == .loading && state.newer.load == .loading)
        #expect(Presentation(state: state).olderFooter == .spinner)
        #expect(Presentation(state: state).isRefreshing)
    }

    @Test func newerLoopsUntilCaughtUpAndOlderAppends() async throws {
        let source = ScriptedSource()
        let feed = try await coordinator(source)
        await feed.start()
        try await source.respond(0, page(["5", "4"], older: "4", newer: "5"))
        try await feed.waitFor { $0.hasLoaded }
        await feed.refresh()
        #expect(try await source.call(1) == .init(id: 1, direction: "newer", cursor: "5"))
        try await source.respond(1, page(["7", "6"], older: "6", newer: "7"))
        #expect(try await source.call(2) == .init(id: 2, direction: "newer", cursor: "7"))
        try await source.respond(2, page([], older: nil, newer: nil))
        try await feed.waitFor { $0.newer.load == .loaded }
        await feed.loadOlder()
        #expect(try await source.call(3) == .init(id: 3, direction: "older", cursor: "4"))
        try await source.respond(3, page(["3"], older: nil, newer: "3"))
        let state = try await feed.waitFor { $0.endReached }
        #expect(Presentation(state: state).olderFooter == .end)
        #expect(try await feed.items().map(\.id) == ["7", "6", "5", "4", "3"])
    }

    @Test func reconnectRefetchesNewerAfterTheSpread() async throws {
        let source = ScriptedSource()
        let feed = try await coordinator(source, .init(reconnectSpread: .seconds(10)), random: ConstantRandomSource(0.5))
        await feed.start()
        try await source.respond(0, page(["2", "1"], older: "1", newer: "2"))
        try await feed.waitFor { $0.hasLoaded }
        await feed.connectivityChanged(noCarrier)
        await feed.connectivityChanged(online)
        try await clock.advance(by: .seconds(4), before: "the reconnect timer")
        #expect(await source.callCount == 1, "spread by 10 s × 0.5")
        try await clock.advance(by: .seconds(1), waking: "the reconnect timer")
        #expect(try await source.call(1) == .init(id: 1, direction: "newer", cursor: "2"))
    }

    @Test func offlineWhileARetryWaitsDoesNotSpendTheBudget() async throws {
        let source = ScriptedSource()
        let feed = try await coordinator(source, .init(retry: .init(base: .seconds(10), multiplier: 2, cap: .seconds(60)), reconnectSpread: .zero))
        await feed.start()
        try await source.fail(try await source.call(0).id, transient)
        try await feed.waitFor { $0.initial.load.failure != nil }
        await feed.connectivityChanged(noCarrier)
        var state = await feed.state
        #expect(state.initial == DirectionState(load: .failed(LoadFailure(error: transient, attempt: 1, nextRetryAt: nil)), paused: true))
        #expect(clock.sleepers.isEmpty, "the scheduled retry was cancelled")
        await clock.advance(by: .seconds(100))
        #expect(await source.callCount == 1, "the scheduled retry was cancelled")
        await feed.connectivityChanged(online)
        try await source.fail(try await source.call(1).id, transient)
        state = try await feed.waitFor { $0.initial.load.failure?.attempt == 2 }
        #expect(state.initial.load.failure?.nextRetryAt == origin.addingTimeInterval(100 + 20), "attempt 2: 20 s")
    }

    @Test func followsAVerdictStream() async throws {
        let source = ScriptedSource()
        let feed = try await coordinator(source)
        let (verdicts, continuation) = AsyncStream.makeStream(of: Verdict.self)
        await feed.follow(verdicts)
        continuation.yield(noCarrier)
        let state = try await feed.waitFor { $0.offline != nil }
        #expect(state.offline?.code == "no-carrier")
        await feed.start()
        #expect(await feed.state.initial.paused)
        continuation.yield(online)
        #expect(try await source.call(0).direction == "initial")
        continuation.finish()
    }

    @Test func periodicRefreshFetchesNewer() async throws {
        let source = ScriptedSource()
        let feed = try await coordinator(source, .init(reconnectSpread: .zero, refreshInterval: .seconds(60)))
        await feed.start()
        try await source.respond(0, page(["2", "1"], older: "1", newer: "2"))
        try await feed.waitFor { $0.hasLoaded }
        try await clock.advance(by: .seconds(59), before: "the refresh timer")
        #expect(await source.callCount == 1)
        try await clock.advance(by: .seconds(1), waking: "the refresh timer")
        #expect(try await source.call(1) == .init(id: 1, direction: "newer", cursor: "2"))
        try await source.respond(1, page([], older: nil, newer: nil))
        // The refresh timer sleeps again as soon as it has fired, before this answer is committed:
        // a refresh due while the previous one still runs is coalesced into it. Advance only once
        // the answer is in.
        try await feed.waitFor { $0.newer.load == .loaded }
        try await clock.advance(by: .seconds(60), waking: "the next refresh's timer")
        #expect(try await source.call(2).direction == "newer")
        await feed.stop()
    }

    @Test func backfillLoadsOlderPagesToTheConfiguredDepth() async throws {
        let source = ScriptedSource()
        let feed = try await coordinator(source, .init(reconnectSpread: .zero, backfillDepth: 5))
        await feed.start()
        try await source.respond(0, page(["9", "8"], older: "8", newer: "9"))
        #expect(try await source.call(1) == .init(id: 1, direction: "older", cursor: "8"))
        try await source.respond(1, page(["7", "6"], older: "6", newer: nil))
        #expect(try await source.call(2) == .init(id: 2, direction: "older", cursor: "6"))
        try await source.respond(2, page(["5", "4"], older: "4", newer: nil))
        let state = try await feed.waitFor { $0.itemCount == 6 && $0.older.load == .loaded }
        #expect(!state.endReached)
        await Task.megaYield()
        #expect(await source.callCount == 3)
    }

    @Test func backfillFetchesTheNextOlderPageWhileThePreviousIsCommitted() async throws {
        // The first page is still being committed, and its successor is already on its way.
        let (source, store, feed) = try await backfillAskingBehindAHeldFirstPage()
        try await source.respond(1, page(["7", "6"], older: "6", newer: nil))
        await store.release()
        try await store.waitUntilHolding(commit: 2)
        #expect(try await source.call(2) == .init(id: 2, direction: "older", cursor: "6"))
        try await source.respond(2, page(["5"], older: nil, newer: nil))
        await store.release()
        try await store.waitUntilHolding(commit: 3)
        await store.release()
        try await expectBackfillEnded(feed, holding: 5...9, askedOf: source, requests: 3)
        #expect(await source.cancelled.isEmpty)
    }

    /// A slow store does not hold the network back: the backfill, set to read four pages ahead,
    /// fetches that many ahead of its commits, no further, and each commit taken makes room for one more.
    @Test func backfillReadsAheadOfASlowStoreUpToItsDepth() async throws {
        // The first commit is held; the pages behind it arrive one after another.
        let (source, store, feed) = try await backfillHoldingItsFirstCommit(
            .init(reconnectSpread: .zero, backfillDepth: 100, readAheadPages: 4, backfillCommitPages: 1), answering: ["19", "17", "15", "13"])
        #expect(await source.callCount == 5, "four pages ahead, no more")
        await store.release()
        // The first commit is done and the next page taken: room for one more.
        try await answerLastOlderPage(source, 5)
        try await store.releaseCommits(2...6)
        try await expectBackfillEnded(feed, holding: 10...20, askedOf: source, requests: 6)
        #expect(await source.cancelled.isEmpty)
    }

    /// Near its depth the read-ahead counts each page once: one that arrived by its items, one
    /// still on its way as the largest page so far, never as both. With the first page (2 items)
    /// held in its commit and a depth of 10, it asks for exactly the four pages of two behind it.
    @Test func backfillReadsAheadExactlyToItsDepth() async throws {
        let (source, store, feed) = try await backfillHoldingItsFirstCommit(
            .init(reconnectSpread: .zero, backfillDepth: 10, backfillCommitPages: 1), answering: ["19", "17"])
        // 2 being committed, 4 arrived: room for the page at 15. With a page counted twice this
        // request never comes, and the wait fails naming it.
        _ = try await source.call(3)
        try await source.respond(3, page(["14", "13"], older: "13", newer: nil))
        try await source.respond(4, page(["12", "11"], older: "11", newer: nil))
        await Task.megaYield()
        #expect(await source.callCount == 5, "the depth is reached: nothing beyond it")
        await store.release()
        try await store.releaseCommits(2...5)
        let state = try await feed.waitFor { $0.itemCount == 10 && $0.older.load == .loaded }
        #expect(!state.endReached)
        await Task.megaYield()
        #expect(await source.callCount == 5)
    }

    /// Pages of large items are read ahead by bytes, not only by count: once the pages that arrived
    /// hold the configured bytes, nothing more is asked for until a commit takes them.
    @Test func backfillReadsAheadNoMoreThanItsBytes() async throws {
        // Each page below holds two items of 11 bytes: the budget is passed by the second page.
        let (source, store, feed) = try await backfillHoldingItsFirstCommit(
            .init(reconnectSpread: .zero, backfillDepth: 100, readAheadBytes: 40, backfillCommitPages: 1), answering: ["19", "17"])
        #expect(await source.callCount == 3, "44 bytes arrived against a budget of 40: no third page ahead")
        await store.release()
        // The commit takes the pages that arrived: the read-ahead goes on.
        #expect(try await source.call(3) == .init(id: 3, direction: "older", cursor: "15"))
        try await source.respond(3, page(["14"], older: nil, newer: nil))
        try await store.releaseCommits(2...4)
        try await expectBackfillEnded(feed, holding: 14...20, askedOf: source, requests: 4)
    }

    /// A backfill's coordinator with the scripted source and the gated store of its own it runs on.
    private typealias GatedBackfill = (source: ScriptedSource, store: GatedStore, feed: FeedCoordinator<ManualClock>)

    /// Starts a backfill of one page a commit on `source` and a new store, answers the first load
    /// with (9, 8) and holds that page's commit; expects the older page at 8 asked for meanwhile.
    private func backfillAskingBehindAHeldFirstPage(
        _ source: ScriptedSource = ScriptedSource(), sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> GatedBackfill {
        let store = GatedStore()
        let feed = try await coordinator(source, .init(reconnectSpread: .zero, backfillDepth: 100, backfillCommitPages: 1), store: store)
        await feed.start()
        try await source.respond(0, page(["9", "8"], older: "8", newer: "9"))
        try await store.waitUntilHolding(commit: 1)
        #expect(try await source.call(1) == .init(id: 1, direction: "older", cursor: "8"), sourceLocation: sourceLocation)
        return (source, store, feed)
    }

    /// Starts a backfill on a new source and a new store (grouping commits if `groupsCommits`)
    /// whose first page (20, 19) is held in its commit, and answers the pages asked for behind it,
    /// in order, at `cursors`: each the two items below its cursor.
    private func backfillHoldingItsFirstCommit(
        _ configuration: SyncConfiguration, answering cursors: [String], groupsCommits: Bool = false
    ) async throws -> GatedBackfill {
        let source = ScriptedSource()
        let store = GatedStore(groupsCommits: groupsCommits)
        let feed = try await coordinator(source, configuration, store: store)
        await feed.start()
        try await source.respond(0, page(["20", "19"], older: "19", newer: "20"))
        try await store.waitUntilHolding(commit: 1)
        for (offset, cursor) in cursors.enumerated() {
            let id = offset + 1
            #expect(try await source.call(id) == .init(id: id, direction: "older", cursor: cursor))
            let older = String(Int(cursor)! - 2)
            try await source.respond(id, page([String(Int(cursor)! - 1), older], older: older, newer: nil))
        }
        await Task.megaYield()
        return (source, store, feed)
    }

    /// Fetches pages 19, 17, 15 and 13 ahead while the first page's commit is held by a store that
    /// groups commits, then lets it through.
    private func backfillBehindAHeldCommit() async throws -> GatedBackfill {
        let backfill = try await backfillHoldingItsFirstCommit(
            .init(reconnectSpread: .zero, backfillDepth: 100, backfillCommitPages: 1), answering: ["19", "17", "15", "13"], groupsCommits: true)
        await backfill.store.release()
        return backfill
    }

    @Test func theNextPageIsAskedForAsSoonAsItsCursorIsKnown() async throws {
        let source = ScriptedSource()
        let feed = try await coordinator(source, .init(reconnectSpread: .zero, backfillDepth: 100, backfillCommitPages: 1))
        await feed.start()
        try await source.respond(0, page(["20", "19"], older: "19", newer: "20"))
        #expect(try await source.call(1) == .init(id: 1, direction: "older", cursor: "19"))
        // Request 1 is the machine's own; its successors are fetched ahead once it is in.
        try await source.respond(1, page(["18", "17"], older: "17", newer: nil))
        #expect(try await source.call(2) == .init(id: 2, direction: "older", cursor: "17"))
        // The headers of page 17 name 15: it is asked for while page 17's body is still coming,
        // and so is 13 once 15's headers are in.
        try await source.announce(2, older: "15")
        #expect(try await source.call(3) == .init(id: 3, direction: "older", cursor: "15"))
        try await source.announce(3, older: "13")
        #expect(try await source.call(4) == .init(id: 4, direction: "older", cursor: "13"))
        for (id, items, older) in [(2, ["16", "15"], "15"), (3, ["14", "13"], "13")] {
            try await source.respond(id, page(items, older: older, newer: nil))
        }
        try await source.announce(4, older: nil)
        try await source.respond(4, page(["12"], older: nil, newer: nil))
        try await expectBackfillEnded(feed, holding: 12...20)
        await Task.megaYield()
        #expect(await source.callCount == 5, "nothing asked for past the end")
    }

    @Test func aRetryAfterOnAPageFetchedAheadHoldsBackTheRetry() async throws {
        let source = ScriptedSource()
        let feed = try await coordinator(source, .init(reconnectSpread: .zero, backfillDepth: 100, backfillCommitPages: 1))
        await feed.start()
        try await source.respond(0, page(["20", "19"], older: "19", newer: "20"))
        try await source.respond(1, page(["18", "17"], older: "17", newer: nil))
        // Page 17's headers name 15, which is asked for at once and answered 429: wait 10 s.
        #expect(try await source.call(2) == .init(id: 2, direction: "older", cursor: "17"))
        try await source.announce(2, older: "15")
        #expect(try await source.call(3) == .init(id: 3, direction: "older", cursor: "15"))
        try await source.fail(3, FeedError(.httpStatus(429), "too many requests", retryAfter: .seconds(10)))
        // Then page 17's body turns out malformed: the backfill retries 17 after its backoff,
        // but not before the server's 10 s are up.
        try await source.fail(2, FeedError(.malformed, "truncated body"))
        // The clock moves only once the failure is taken, so the retry's timer is armed before it.
        let failed = try await feed.waitFor { $0.older.load.failure != nil }
        #expect(failed.older.load.failure?.nextRetryAt == origin.addingTimeInterval(10))
        try await clock.advance(by: .seconds(9), before: "the older retry's timer")
        #expect(await source.callCount == 4, "no older request within the server's 10 s")
        try await clock.advance(by: .seconds(1), waking: "the older retry's timer")
        #expect(try await source.call(4) == .init(id: 4, direction: "older", cursor: "17"))
        _ = feed
    }

    @Test func pagesThatArriveDuringACommitAreCommittedTogether() async throws {
        let (source, store, feed) = try await backfillBehindAHeldCommit()
        // The page at 19 and the three behind it, all arrived: one transaction.
        try await store.waitUntilHolding(commit: 2)
        #expect(await store.transactionSizes == [1, 4])
        // The read-ahead goes on while they commit.
        try await answerLastOlderPage(source, 5)
        await store.release()
        try await expectLastPageCommittedAlone(feed, source, store)
        #expect(await source.cancelled.isEmpty)
    }

    @Test func pagesCommittedAheadAreNotFetchedAgainAfterGoingOffline() async throws {
        let (source, store, feed) = try await backfillBehindAHeldCommit()
        try await store.waitUntilHolding(commit: 2)
        #expect(try await source.call(5) == .init(id: 5, direction: "older", cursor: "11"))
        // Offline while the four pages commit: the page fetched behind them is cancelled, the
        // commit lands, and the machine, paused, has taken only the first of the four.
        await feed.connectivityChanged(noCarrier)
        try await source.waitUntilCancelled(5)
        await store.release()
        try await feed.waitFor { $0.itemCount == 4 && $0.isOffline }
        #expect(try await feed.items().map(\.id) == (11...20).reversed().map(String.init), "all four pages are stored")
        // Back online: the reconnect refresh, and the backfill, whose three pages committed ahead
        // are answered without a request: the next one it sends is for 11.
        await feed.connectivityChanged(online)
        #expect(try await source.call(6) == .init(id: 6, direction: "newer", cursor: "20"))
        try await source.respond(6, page([], older: nil, newer: nil))
        try await store.waitUntilHolding(commit: 3)
        await store.release()
        try await answerLastOlderPage(source, 7)
        try await store.waitUntilHolding(commit: 4)
        await store.release()
        try await expectBackfillEnded(feed, holding: 10...20)
        #expect(await store.transactionSizes == [1, 4, 1, 1])
        #expect(await source.callCount == 8, "none of the pages committed ahead is fetched again")
    }

    /// A backfill page waits for the pages close behind it, so that one transaction stores up to
    /// `backfillCommitPages` of them; the wait ends once enough arrived.
    @Test func aBackfillGathersThePagesCloseBehindIntoOneTransaction() async throws {
        let (source, store, feed) = try await backfillWaitingBehindItsFirstOlderPage()
        // The pages at 17, 15 and 13 arrive one after another (each asked for once the one before
        // it arrived: this source gives no cursor from headers); the fourth page completes the group.
        for (id, cursor) in zip(2..., ["17", "15", "13"]) {
            #expect(await store.commitsStarted == 1, "still gathering before page \(id)")
            try await answerOlder(source, id, cursor: cursor)
        }
        try await store.waitUntilHolding(commit: 2)
        #expect(await store.transactionSizes == [1, 4])
        await store.release()
        try await answerLastOlderPage(source, 5)
        try await expectLastPageCommittedAlone(feed, source, store)
    }

    /// A page whose successor is slow waits no longer than `backfillCommitDelay` on the injected
    /// clock, then is committed with what arrived: here, alone.
    @Test func aBackfillPageWaitsForTheNextNoLongerThanTheCommitDelay() async throws {
        let (source, store, feed) = try await backfillWaitingBehindItsFirstOlderPage()
        try await clock.advance(by: .milliseconds(19), before: "the commit delay's timer")
        #expect(await store.commitsStarted == 1, "the page waits for the one on its way")
        try await clock.advance(by: .milliseconds(1), waking: "the commit delay's timer")
        try await store.waitUntilHolding(commit: 2)
        #expect(await store.transactionSizes == [1, 1])
        await store.release()
        // The slow page comes and ends the feed; nothing waits behind it.
        try await source.respond(2, page(["16"], older: nil, newer: nil))
        try await store.waitUntilHolding(commit: 3)
        await store.release()
        try await expectBackfillEnded(feed, holding: 16...20)
        #expect(await store.transactionSizes == [1, 1, 1])
    }

    /// The page on its way behind a waiting one fails: the wait ends at once, without the clock,
    /// and the waiting page is committed alone.
    @Test func aBackfillPageWhoseNextFailsIsCommittedAtOnce() async throws {
        let (source, store, _) = try await backfillWaitingBehindItsFirstOlderPage()
        try await source.fail(2, FeedError(.httpStatus(503), "service unavailable"))
        try await waitUntil("the waiting page is committed") { await store.commitsStarted >= 2 }
        #expect(await store.transactionSizes == [1, 1], "committed alone, the clock never advanced")
        await store.release()
    }

    /// Going offline while a page waits for the ones behind it: the wait ends, the page is
    /// dropped uncommitted like any answer to a cancelled request, and it is fetched again later.
    @Test func goingOfflineWhileABackfillPageWaitsDropsItUncommitted() async throws {
        let (source, store, feed) = try await backfillWaitingBehindItsFirstOlderPage()
        await feed.connectivityChanged(noCarrier)
        try await source.waitUntilCancelled(2)
        try await feed.waitFor { $0.isOffline }
        await Task.megaYield()
        #expect(await store.commitsStarted == 1)
        #expect(await feed.droppedAnswers == 1)
        #expect(try await feed.items().map(\.id) == ["20", "19"])
        await feed.connectivityChanged(online)
        // Back online: the page at 19 is asked for again, beside the reconnect refresh.
        let again = [try await source.call(3), try await source.call(4)]
        #expect(again.contains { $0.direction == "older" && $0.cursor == "19" })
        #expect(again.contains { $0.direction == "newer" && $0.cursor == "20" })
    }

    /// Starts a backfill of pages of two items grouped by four, on a new source and a new store
    /// that groups commits, commits its first page (20, 19), and answers the first older page (at
    /// 19): it then waits for the page at 17, asked for and not answered.
    private func backfillWaitingBehindItsFirstOlderPage() async throws -> GatedBackfill {
        let source = ScriptedSource()
        let store = GatedStore(groupsCommits: true)
        let configuration = SyncConfiguration(reconnectSpread: .zero, backfillDepth: 100, backfillCommitPages: 4, backfillCommitDelay: .milliseconds(20))
        let feed = try await coordinator(source, configuration, store: store)
        await feed.start()
        try await source.respond(0, page(["20", "19"], older: "19", newer: "20"))
        try await store.waitUntilHolding(commit: 1)
        await store.release()
        try await answerOlder(source, 1, cursor: "19")
        #expect(try await source.call(2) == .init(id: 2, direction: "older", cursor: "17"))
        await Task.megaYield()
        #expect(await store.commitsStarted == 1, "the page at 19 waits for the one behind it")
        return (source, store, feed)
    }

    /// Waits until the backfill reached the feed's end, then expects exactly the items `range`
    /// stored, newest first, and counted.
    private func expectBackfillEnded(
        _ feed: FeedCoordinator<ManualClock>, holding range: ClosedRange<Int>,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        let state = try await feed.waitFor { $0.endReached && $0.older.load == .loaded }
        #expect(state.itemCount == range.count, sourceLocation: sourceLocation)
        #expect(try await feed.items().map(\.id) == range.reversed().map(String.init), sourceLocation: sourceLocation)
    }

    /// As ``expectBackfillEnded(_:holding:sourceLocation:)``, and then, once anything late has had
    /// its turn, that `source` was asked exactly `requests` times: one request per page, none
    /// after the end.
    private func expectBackfillEnded(
        _ feed: FeedCoordinator<ManualClock>, holding range: ClosedRange<Int>, askedOf source: ScriptedSource, requests: Int,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        try await expectBackfillEnded(feed, holding: range, sourceLocation: sourceLocation)
        await Task.megaYield()
        #expect(await source.callCount == requests, "one request per page, none after the end", sourceLocation: sourceLocation)
    }

    /// After a group of four pages (page 5, the feed's last, answered): the last page commits
    /// alone, the backfill ends holding 10...20, and no request follows the sixth.
    private func expectLastPageCommittedAlone(
        _ feed: FeedCoordinator<ManualClock>, _ source: ScriptedSource, _ store: GatedStore,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        try await store.waitUntilHolding(commit: 3)
        await store.release()
        try await expectBackfillEnded(feed, holding: 10...20, askedOf: source, requests: 6, sourceLocation: sourceLocation)
        #expect(await store.transactionSizes == [1, 4, 1], sourceLocation: sourceLocation)
    }

    /// Expects call `id` to ask for the older page at 11, and answers it with the feed's last item.
    private func answerLastOlderPage(_ source: ScriptedSource, _ id: Int, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        #expect(try await source.call(id) == .init(id: id, direction: "older", cursor: "11"), sourceLocation: sourceLocation)
        try await source.respond(id, page(["10"], older: nil, newer: nil))
    }

    /// Expects older request `id` at `cursor` and answers it with the two items below the cursor.
    private func answerOlder(_ source: ScriptedSource, _ id: Int, cursor: String) async throws {
        #expect(try await source.call(id) == .init(id: id, direction: "older", cursor: cursor))
        let top = try #require(Int(cursor)) - 1
        try await source.respond(id, page([String(top), String(top - 1)], older: String(top - 1), newer: nil))
    }

    @Test func goingOfflineDuringACommitCancelsTheEarlyFetchAndNothingOfItIsStored() async throws {
        let (source, store, feed) = try await backfillAskingBehindAHeldFirstPage(ScriptedSource(ignoresCancellation: true))
        await feed.connectivityChanged(noCarrier)
        try await source.waitUntilCancelled(1)
        await store.release()
        try await feed.waitFor { $0.hasLoaded }
        // The early answer arrives anyway (the source ignores cancellation): it is dropped.
        try await source.respond(1, page(["late"], older: nil, newer: nil))
        await Task.megaYield()
        #expect(try await feed.items().map(\.id) == ["9", "8"])
        #expect(await store.commitsStarted == 1)
        #expect(await source.callCount == 2, "nothing is sent while offline")
        // Back online, the older page is asked for again, by a request of its own. The newer
        // refresh of every reconnect starts with it, and the two reach the source in either order.
        await feed.connectivityChanged(online)
        let again = [try await source.call(2), try await source.call(3)]
        #expect(again.contains { $0.direction == "older" && $0.cursor == "8" })
        #expect(again.map(\.direction).sorted() == ["newer", "older"])
    }

    @Test func aRestartResumesFromTheSQLiteStore() async throws {
        let path = NSTemporaryDirectory() + "coordinator-\(UUID().uuidString).sqlite"
        defer { for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) } }
        do {
            let store = try SQLiteFeedStore(path: path)
            let source = ScriptedSource()
            let feed = try await coordinator(source, store: store)
            await feed.start()
            try await source.respond(0, page(["9", "8"], older: "8", newer: "9"))
            try await feed.waitFor { $0.hasLoaded }
            await feed.loadOlder()
            try await source.respond(try await source.call(1).id, page(["7", "6"], older: "6", newer: "7"))
            try await feed.waitFor { $0.itemCount == 4 }
            await feed.stop()
        }
        let store = try SQLiteFeedStore(path: path)
        let source = ScriptedSource()
        let feed = try await coordinator(source, store: store)
        let before = await feed.state
        #expect(before.hasLoaded && before.itemCount == 4)
        #expect(Presentation(state: before).main == .content(itemCount: 4), "no skeleton after a restart")
        await feed.start()
        #expect(try await source.call(0) == .init(id: 0, direction: "newer", cursor: "9"), "no reload from the start")
        try await source.respond(0, page(["10"], older: "10", newer: "10"))
        try await source.respond(try await source.call(1).id, page([], older: nil, newer: nil))
        try await feed.waitFor { $0.newer.load == .loaded }
        await feed.loadOlder()
        #expect(try await source.call(2) == .init(id: 2, direction: "older", cursor: "6"))
        #expect(try await feed.items().map(\.id) == ["10", "9", "8", "7", "6"])
    }
}
