import ConnectivityPolicy
import Foundation
import SyncCore
import SyncCoordinator
import Testing
import TestSupport

/// Several feeds under one coordinator run independently.
@Suite(.timeLimit(.minutes(1)))
struct SyncCoordinatorTests {
    @Test func aStuckOrFailingFeedNeverBlocksAnother() async throws {
        let clock = ManualClock()
        let coordinator = SyncCoordinator(store: InMemoryFeedStore(), configuration: .init(reconnectSpread: .zero),
                                          clock: clock, random: SeededRandomSource(seed: 1), wallOrigin: origin)
        let stuck = ScriptedSource(), failing = ScriptedSource(), healthy = ScriptedSource()
        try await coordinator.addFeed("stuck", source: stuck)
        try await coordinator.addFeed("failing", source: failing)
        let good = try await coordinator.addFeed("healthy", source: healthy)
        #expect(await coordinator.feedIDs == ["stuck", "failing", "healthy"])
        try await coordinator.start()

        _ = try await stuck.call(0)                                  // never answered
        try await failing.fail(try await failing.call(0).id, FeedError(.httpStatus(404), "not found"))
        try await healthy.respond(try await healthy.call(0).id, page(["1"], older: nil, newer: "1"))
        let state = try await good.waitFor { $0.hasLoaded }
        #expect(state.itemCount == 1)
        let failed = try await coordinator.feed("failing")!.waitFor { $0.initial.load.failure != nil }
        #expect(Presentation(state: failed).main == .error(.init(message: "not found", isPermanent: true, nextRetryAt: nil, attempt: 1)))
        #expect(await coordinator.feed("stuck")!.state.initial.load == .loading)
        #expect(await good.state.initial.load == .loaded, "the others' troubles do not touch it")

        // Retrying everything retries only what failed; the healthy feed refreshes on its own terms.
        await coordinator.retry()
        #expect(try await failing.call(1).direction == "initial")
        #expect(await healthy.callCount == 1)
        await coordinator.refresh(feed: "healthy")
        #expect(try await healthy.call(1).direction == "newer")
        #expect(await stuck.callCount == 1, "refreshing one feed leaves the others")
    }

    @Test func connectivityReachesEveryFeedAndUpdatesStream() async throws {
        let clock = ManualClock()
        let coordinator = SyncCoordinator(store: InMemoryFeedStore(), configuration: .init(reconnectSpread: .zero),
                                          clock: clock, random: SeededRandomSource(seed: 2), wallOrigin: origin)
        let a = ScriptedSource(), b = ScriptedSource()
        try await coordinator.addFeed("a", source: a)
        try await coordinator.addFeed("b", source: b)
        let updates = await coordinator.updates()
        await coordinator.connectivityChanged(noCarrier)
        try await coordinator.start()
        var offlineFeeds: Set<String> = []
        for await state in updates where state.offline != nil {
            offlineFeeds.insert(state.feed)
            if offlineFeeds.count == 2 { break }
        }
        #expect(await a.callCount == 0)
        #expect(await b.callCount == 0)
        await coordinator.connectivityChanged(online)
        #expect(try await a.call(0).direction == "initial")
        #expect(try await b.call(0).direction == "initial")
        // A feed added later inherits the last verdict.
        await coordinator.connectivityChanged(noCarrier)
        let late = try await coordinator.addFeed("late", source: ScriptedSource())
        #expect(await late.state.offline != nil)
        #expect(await late.state.initial.paused)
        await coordinator.stop()
    }

    @Test func stopIsFinal() async throws {
        let coordinator = SyncCoordinator(store: InMemoryFeedStore(), configuration: .init(reconnectSpread: .zero),
                                          clock: ManualClock(), random: SeededRandomSource(seed: 3), wallOrigin: origin)
        let source = ScriptedSource()
        try await coordinator.addFeed("a", source: source)
        try await coordinator.start()
        _ = try await source.call(0)
        await coordinator.stop()
        #expect(await coordinator.isStopped)
        await #expect(throws: SyncCoordinatorError.stopped) { try await coordinator.start() }
        await #expect(throws: SyncCoordinatorError.stopped) { try await coordinator.addFeed("b", source: ScriptedSource()) }
        var updates = await coordinator.updates().makeAsyncIterator()
        // A stopped coordinator's stream replays the states it has and then ends.
        while await updates.next() != nil {}
        #expect(await coordinator.feedIDs == ["a"])
    }

    @Test func runStartsTheFeedsAndStopsThemWhenCancelled() async throws {
        let coordinator = SyncCoordinator(store: InMemoryFeedStore(), configuration: .init(reconnectSpread: .zero),
                                          clock: ManualClock(), random: SeededRandomSource(seed: 4), wallOrigin: origin)
        let source = ScriptedSource()
        try await coordinator.addFeed("a", source: source)
        let running = BoundedTask { try await coordinator.run() }
        #expect(try await source.call(0).direction == "initial", "run() started the feed")
        running.cancel()
        try await running.value("run() after its cancellation")
        #expect(await coordinator.isStopped)
    }

    @Test func itemUpdatesFollowTheStore() async throws {
        let coordinator = SyncCoordinator(store: InMemoryFeedStore(), configuration: .init(reconnectSpread: .zero),
                                          clock: ManualClock(), random: SeededRandomSource(seed: 5), wallOrigin: origin)
        let source = ScriptedSource()
        let feed = try await coordinator.addFeed("a", source: source)
        var items = await feed.itemUpdates(limit: 2).makeAsyncIterator()
        #expect(await items.next()?.isEmpty == true, "first the (empty) store")
        try await coordinator.start()
        try await source.respond(try await source.call(0).id, page(["3", "2", "1"], older: nil, newer: "3"))
        #expect(await items.next()?.map(\.id) == ["3", "2"], "then the newest two once the page landed")
        await coordinator.stop()
        #expect(await items.next() == nil, "and the stream ends with the feed")
    }
}
