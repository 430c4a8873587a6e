import DemoFeedServer
import Foundation
import HTTPFeedSource
import SyncCoordinator
import SyncCore
import SyncStore
import SyncdTesting
import Testing
import TestSupport

/// The whole pipeline: demo server → HTTP feed source → coordinator → SQLite store.
@Suite("End to end: coordinator and SQLite store syncing from the demo server")
struct CoordinatorEndToEndTests {
    /// Quick retries so faults cost milliseconds; Retry-After still acts as a floor.
    static let configuration = SyncConfiguration(
        retry: RetryPolicy(base: .milliseconds(20), multiplier: 1.6, cap: .milliseconds(200)),
        reconnectSpread: .zero,
        refreshInterval: nil,
        backfillDepth: Int.max
    )

    @Test("initial, backfill to the end and refresh under random faults: the store equals the feed")
    func syncUnderFaults() async throws {
        let faults: [RandomFault] = try [
            "status:500=0.05", "status:503:0=0.04", "status:429:0=0.04", "reset=0.04", "reset:body=0.03",
            "malformed=0.03", "truncated=0.03", "oversized:400000:chunked=0.03", "stall=0.02", "stall:body=0.02",
        ].map { try RandomFault(spec: $0) }
        let server = DemoFeedServer.Configuration(feeds: [.init(name: "home", initialCount: 2500, maxLimit: 100)])
        try await withFeedServer(server, faults: .init(randomFaults: faults, seed: 7)) { server, client in
            try await withStore { store in
                let source = try server.source("home", client: client, limit: 100) {
                    $0.requestTimeout = .milliseconds(800)
                    $0.maxBodyBytes = 200_000
                }
                try await withSyncedFeed("home", from: source, into: store, configuration: Self.configuration) { feed in
                    // Items appear while the backfill runs; the refresh below must pick them up.
                    try await server.appendItems(feed: "home", count: 120)
                    try await waitFor(feed, "backfill to the end") { $0.endReached && $0.older.load != .loading }
                    try await server.appendItems(feed: "home", count: 280)
                    let total = try await server.items(feed: "home").count
                    await feed.refresh()
                    try await waitFor(feed, "refresh to catch up") { $0.itemCount == total && !$0.newer.load.isLoading }
                }

                let stored = try await store.items(feed: "home", offset: 0, limit: 100_000)
                #expect(stored == (try await server.expectedItems("home")))
                #expect(await server.requests(feed: "home").contains { $0.fault != nil })
            }
        }
    }

    @Test("a 429 with Retry-After: the coordinator's retry waits at least that long, and nothing is lost")
    func retryAfterHonoured() async throws {
        try await withFeedServer(.init(feeds: [.init(name: "home", initialCount: 300)])) { server, client in
            try await withStore { store in
                try await server.scriptFault(.init(.status(429, retryAfter: .seconds(1)), count: 1, feed: "home", kind: .older))
                try await server.scriptFault(.init(.status(503, retryAfter: .date(secondsAhead: 2)), count: 1, feed: "home", kind: .initial))
                let source = try server.source("home", client: client, limit: 50)
                try await withSyncedFeed("home", from: source, into: store, configuration: Self.configuration) { feed in
                    try await waitFor(feed, "backfill to the end") { $0.endReached && $0.itemCount == 300 }
                }

                let requests = await server.requests(feed: "home")
                // 1 s for the 429; the HTTP-date 2 s ahead, in whole seconds, is at least 1 s.
                #expect(retryGap(after: .older, in: requests).map { $0 >= .seconds(1) } == true)
                #expect(retryGap(after: .initial, in: requests).map { $0 >= .seconds(1) } == true)
                #expect(try await store.items(feed: "home", offset: 0, limit: 1000) == (try await server.expectedItems("home")))
            }
        }
    }

    @Test("an empty feed, then items: the coordinator follows it from its first item")
    func emptyFeedThenItems() async throws {
        try await withFeedServer(.init(feeds: [.init(name: "new", initialCount: 0)])) { server, client in
            try await withStore { store in
                let source = try server.source("new", client: client, limit: 10)
                try await withSyncedFeed("new", from: source, into: store, configuration: Self.configuration) { feed in
                    try await waitFor(feed, "the first load") { $0.hasLoaded && !$0.initial.load.isLoading }
                    #expect(await feed.state.isEmpty)
                    try await server.appendItems(feed: "new", count: 45)
                    await feed.refresh()
                    try await waitFor(feed, "refresh") { $0.itemCount == 45 && !$0.newer.load.isLoading }
                }
                #expect(try await store.items(feed: "new", offset: 0, limit: 100) == (try await server.expectedItems("new")))
            }
        }
    }
}

/// The time between the first faulted request of `kind` and the next request of that kind (its
/// retry), or `nil` when there is no such pair.
func retryGap(after kind: RequestKind, in requests: [RequestRecord]) -> Duration? {
    let ofKind = requests.filter { $0.kind == kind }
    guard let faulted = ofKind.firstIndex(where: { $0.fault != nil }), faulted + 1 < ofKind.count else { return nil }
    return ofKind[faulted + 1].receivedAt - ofKind[faulted].receivedAt
}

/// Opens an SQLite store in a fresh temporary directory and removes it afterwards.
func withStore<T: Sendable>(_ body: (SQLiteFeedStore) async throws -> T) async throws -> T {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("syncd-e2e-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: directory) }
    return try await body(try SQLiteFeedStore(path: directory.appendingPathComponent("feeds.sqlite").path))
}

/// Syncs `source` as the feed `name` into `store` by a coordinator with `configuration` (by
/// default no reconnect spread and a backfill to the end) while `body` runs, and stops the
/// coordinator after it, on every path.
func withSyncedFeed<T: Sendable>(
    _ name: String, from source: any FeedSource, into store: any FeedStore,
    configuration: SyncConfiguration = .init(reconnectSpread: .zero, backfillDepth: Int.max),
    _ body: (FeedCoordinator<ContinuousClock>) async throws -> T
) async throws -> T {
    let coordinator = SyncCoordinator(store: store, configuration: configuration, clock: ContinuousClock(), logger: quietLogger)
    let feed = try await coordinator.addFeed(name, source: source)
    try await coordinator.start()
    return try await withResource(coordinator, closedBy: { await $0.stop() }) { _ in try await body(feed) }
}

struct WaitTimedOut: Error, CustomStringConvertible {
    var what: String
    var state: FeedState
    var description: String { "gave up waiting for \(what); last state: \(state)" }
}

/// Waits until the feed's state satisfies `condition`.
///
/// The limit only keeps a broken build from hanging the run; it is far above what the work needs
/// and is not what the test measures.
func waitFor<C: Clock>(
    _ feed: FeedCoordinator<C>, _ what: String, limit: Duration = .seconds(120),
    until condition: @escaping @Sendable (FeedState) -> Bool
) async throws where C.Duration == Duration {
    let states = await feed.states()
    let reached = try await withThrowingTaskGroup(of: Bool.self) { group in
        group.addTask {
            for await state in states where condition(state) { return true }
            return false
        }
        group.addTask {
            try await Task.sleep(for: limit)
            return false
        }
        defer { group.cancelAll() }
        return try await group.next() ?? false
    }
    if !reached { throw WaitTimedOut(what: what, state: await feed.state) }
}
