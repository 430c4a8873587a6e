import ConnectivityPolicy
import Foundation
import HTTPFeedSource
import SyncCoordinator
import SyncCore
import SyncStore
import Testing
import TestSupport

/// A feed server whose items the test edits and deletes: the oracle a mirror is compared with.
protocol EditableFeedServer: Sendable {
    /// Adds `count` new items at the top.
    func add(_ count: Int) async throws
    /// Deletes one item.
    func delete(id: String) async throws
    /// Changes one item's bytes where it stands.
    func edit(id: String, title: String) async throws
    /// The feed as the server has it, newest first.
    func items() async throws -> [FeedItem]
}

extension GitHubStyleServer: EditableFeedServer {}

/// The Mastodon-style timeline of `Oracle/mastodon_style.py`: `max_id`/`min_id` paging with Link
/// headers, statuses edited and deleted on request.
struct MastodonStyleServer: EditableFeedServer {
    let port: Int

    func url(limit: Int) -> URL { URL(string: "http://127.0.0.1:\(port)/api/v1/timelines/public?limit=\(limit)")! }
    /// The same statuses in a body-cursor dialect (`{"feed": [...], "cursor": "…"}`, opaque).
    func bodyCursorURL(limit: Int) -> URL { URL(string: "http://127.0.0.1:\(port)/xrpc/feed?limit=\(limit)")! }

    func add(_ count: Int) async throws { try await admin("add?count=\(count)") }
    func delete(id: String) async throws { try await delete(id: id, tombstone: false) }
    /// Deletes one status; with `tombstone` it stays listed in its place, marked `"deleted": true`.
    func delete(id: String, tombstone: Bool) async throws { try await admin("delete?id=\(id)\(tombstone ? "&tombstone=1" : "")") }
    func edit(id: String, title: String) async throws {
        try await admin("edit?id=\(id)&text=\(title.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "")")
    }

    func items() async throws -> [FeedItem] {
        let body = try await admin("items")
        let rows = try JSONDecoder().decode([[String]].self, from: Data(body.utf8))
        return rows.map { FeedItem(id: $0[0], payload: Data($0[1].utf8)) }
    }

    @discardableResult
    private func admin(_ command: String) async throws -> String {
        let response = try await rawRequest("http://127.0.0.1:\(port)/admin/\(command)")
        guard response.status == 200 else { throw CommandFailed(command: [command], status: Int32(response.status), stderr: response.body) }
        return response.body
    }
}

/// Edits and deletions on the server reach the mirror through revalidation: the coordinator with
/// an HTTP source and SQLite, against servers written in the tests. The server changes at random
/// during backfill and between refreshes; after each revalidation the window equals the server
/// exactly, and nothing the server still has is ever removed. A restart with the whole feed as
/// the window, after changes made while nothing ran, leaves the store equal to the server.
@Suite("Revalidation against edited and deleted items, end to end")
struct RevalidationFeedTests {
    static let window = 30

    static func configuration(_ window: RevalidationWindow) -> SyncConfiguration {
        SyncConfiguration(
            retry: RetryPolicy(base: .milliseconds(20), multiplier: 1.6, cap: .milliseconds(200)),
            reconnectSpread: .zero, backfillDepth: Int.max, revalidate: window, revalidateInterval: .zero)
    }

    /// Random changes: deletions anywhere, edits, a few new items.
    static func change(_ server: some EditableFeedServer, _ random: inout SplitMix64, deleted: inout Set<String>) async throws {
        var items = try await server.items()
        for _ in 0..<random.int(in: 1...4) where items.count > 1 {
            let gone = items.remove(at: random.int(in: 0...(items.count - 1)))
            try await server.delete(id: gone.id)
            deleted.insert(gone.id)
        }
        for _ in 0..<random.int(in: 0...3) {
            try await server.edit(id: random.pick(items).id, title: "edited \(random.int(in: 0...999_999))")
        }
        try await server.add(random.int(in: 0...3))
    }

    func mirrorStaysTrue(_ server: some EditableFeedServer, url: URL, descriptor: FeedDescriptor = FeedDescriptor(), seed: UInt64) async throws {
        var random = SplitMix64(seed: seed)
        var deleted: Set<String> = []
        try await withFeedClient { client in
            try await withStore { store in
                let http = HTTPFeedConfiguration(url: url, descriptor: descriptor, requestTimeout: hangGuard)
                let source = try HTTPFeedSource(configuration: http, client: client, logger: quietLogger)
                let coordinator = SyncCoordinator(
                    store: store, configuration: Self.configuration(.items(Self.window)), clock: ContinuousClock(), logger: quietLogger)
                let feed = try await coordinator.addFeed("f", source: source)
                try await coordinator.start()
                // Changes while the backfill runs.
                for _ in 0..<3 { try await Self.change(server, &random, deleted: &deleted) }
                try await waitFor(feed, "backfill to the end") { $0.endReached && !$0.older.load.isLoading }
                var everStored = Set(try await store.items(feed: "f", offset: 0, limit: 100_000).map(\.id))

                let online = Verdict.online(OnlinePath(link: "lo", linkIndex: 1, family: .ipv4, route: IPPrefix("127.0.0.0/8")!, gateway: nil))
                await coordinator.connectivityChanged(online)
                for round in 0..<6 {
                    switch round % 3 {
                    case 0:
                        try await Self.change(server, &random, deleted: &deleted)
                        await feed.refresh()
                    case 1:
                        // Changes while the refresh's walk runs; a second, quiet refresh then
                        // confirms what the first could not.
                        await feed.refresh()
                        try await Self.change(server, &random, deleted: &deleted)
                        try await waitFor(feed, "round \(round): the refresh") { !$0.newer.load.isLoading }
                        await feed.refresh()
                    default:
                        // Changes while offline; coming back online refreshes.
                        await coordinator.connectivityChanged(.offline(.noCarrier))
                        try await waitFor(feed, "round \(round): offline") { $0.offline != nil }
                        try await Self.change(server, &random, deleted: &deleted)
                        await coordinator.connectivityChanged(online)
                    }
                    let truth = try await server.items()
                    try await waitUntil("round \(round): the window equals the server after a revalidation") {
                        let state = await feed.state
                        guard !state.newer.load.isLoading else { return false }
                        let stored = try await store.items(feed: "f", offset: 0, limit: Self.window)
                        return stored == Array(truth.prefix(Self.window))
                    }
                    let stored = Set(try await store.items(feed: "f", offset: 0, limit: 100_000).map(\.id))
                    let removed = everStored.subtracting(stored)
                    #expect(removed.isSubset(of: deleted), "round \(round): removed though the server has them: \(removed.subtracting(deleted))")
                    everStored.formUnion(stored)
                }
                await coordinator.stop()

                // Changed while nothing runs; the next start revalidates the whole feed.
                try await Self.change(server, &random, deleted: &deleted)
                let again = SyncCoordinator(store: store, configuration: Self.configuration(.all), clock: ContinuousClock(), logger: quietLogger)
                let restarted = try await again.addFeed("f", source: source)
                try await again.start()
                let truth = try await server.items()
                try await waitUntil("after a restart, the whole feed equals the server") {
                    let state = await restarted.state
                    guard !state.newer.load.isLoading, !state.older.load.isLoading else { return false }
                    return try await store.items(feed: "f", offset: 0, limit: 100_000) == truth
                }
                #expect(await restarted.state.itemCount == truth.count)
                await again.stop()
            }
        }
    }

    @Test("GitHub-style page numbers: deletions and edits reach the mirror", arguments: [UInt64(1), 2])
    func pageNumbers(seed: UInt64) async throws {
        try await withGitHubStyleServer { server in
            try await server.add(70)
            try await mirrorStaysTrue(server, url: server.url(query: "per_page=7"), seed: seed)
        }
    }

    @Test("an opaque body cursor (Bluesky-like): deletions and edits reach the mirror", arguments: [UInt64(1), 2])
    func bodyCursor(seed: UInt64) async throws {
        let directory = try TemporaryDirectory(prefix: "body-cursor")
        try await withPythonOracle("mastodon_style.py", arguments: ["0", "70"], directory: directory) { port in
            let server = MastodonStyleServer(port: port)
            let descriptor = FeedDescriptor(
                items: JSONPointer(tokens: ["feed"]), older: .bodyCursor(JSONPointer(tokens: ["cursor"]), parameter: "cursor"), newer: .head)
            try await mirrorStaysTrue(server, url: server.bodyCursorURL(limit: 7), descriptor: descriptor, seed: seed)
        }
    }

    @Test("Mastodon-style max_id: deletions and edits reach the mirror", arguments: [UInt64(1), 2])
    func keyset(seed: UInt64) async throws {
        let directory = try TemporaryDirectory(prefix: "mastodon-style")
        try await withPythonOracle("mastodon_style.py", arguments: ["0", "70"], directory: directory) { port in
            let server = MastodonStyleServer(port: port)
            try await mirrorStaysTrue(server, url: server.url(limit: 7), seed: seed)
        }
    }
}
