import Foundation
import SyncControl
import SyncCore
import SyncTerminal
import Testing
import TestSupport

/// A feed's metered budget, end to end: syncd behind a link the configuration calls metered,
/// fetching from a Mastodon-style server written in the test that counts every byte it sends.
/// The budget is held against those bytes, shown in the status, and kept across a restart.
@Suite(.enabled(if: Privileges.rootTestsEnabled, Comment(rawValue: Privileges.skipReason)))
struct MeteredBudgetDaemonTests {
    typealias Rig = EndToEndTests.Rig

    struct ServerStats: Decodable {
        var bytes: Int64
        var bodies: Int64
        var requests: Int
        var largest: Int64
    }

    /// The HTTP source's tests' Mastodon-style server, which counts what it sends.
    static let oracle = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("HTTPFeedSourceTests/Oracle/mastodon_counting.py").path
    static let budget: Int64 = 100_000

    @Test func theBudgetStopsTheSyncAtWhatTheServerSentAndSurvivesARestart() async throws {
        try Privileges.requireRoot()
        let scratch = try TemporaryDirectory(prefix: "syncd-metered")
        let statsFile = scratch.file("sent.json")
        // 400 items of ~1 kB, 40 a page: each page ~40 kB, so the third page crosses 100 kB.
        let rig = try await Rig(
            initialItems: 0, network: #"metered = ["veth-*"]"#,
            server: ["python3", Self.oracle, "8080", "400", "1000", statsFile],
            feedPath: "/api/v1/timelines/public",
            feedKeys: """
                on_metered = "sync"
                metered_budget = "100kB"
                """)
        try await rig.using { rig in
            func sent() throws -> ServerStats {
                try JSONDecoder().decode(ServerStats.self, from: Data(contentsOf: URL(fileURLWithPath: statsFile)))
            }

            let held = try await rig.waitForStatus("the backfill held by the spent budget") { status in
                status.feeds.first?.older.held?.reason == .meteredBudget
            }
            let feed = try #require(held.feeds.first)
            // The server writes its count after each response has gone out: wait for the count of
            // every page syncd stored (40 items each).
            try await waitUntil("the server's count of \(feed.itemCount / 40) responses", interval: .milliseconds(5)) {
                ((try? sent())?.requests ?? 0) >= feed.itemCount / 40
            }
            let server = try sent()
            let usage = try #require(feed.meteredUsage)
            // What syncd counts is what crossed the wire. This server sends its bodies as they are,
            // framed by Content-Length, so the status line, fields and body add up to the byte.
            #expect(usage.bytes == server.bytes, "syncd counted \(usage.bytes); the server sent \(server)")
            #expect(usage.budget == Self.budget)
            #expect(usage.bytes >= Self.budget)
            // Only the response that crossed the budget goes past it: nothing is fetched ahead.
            #expect(server.bytes < Self.budget + server.largest, "the server sent \(server)")
            #expect(feed.older.held?.used == usage.bytes)
            #expect(feed.itemCount == 40 * server.requests, "every page fetched is stored")
            #expect(feed.itemCount < 400)

            let socket = rig.directory.file("io.syncd")
            let text = try await runCommand([try BuildProducts.path("syncctl"), "status", "--socket", socket])
            let used = ByteCount.describe(usage.bytes)
            #expect(text.contains("Older: paused (metered budget used: \(used) today)"), "\(text)")
            #expect(text.contains("Metered: \(used) of 100 kB today"), "\(text)")
            let json = try await runCommand([try BuildProducts.path("syncctl"), "status", "--json=short", "--socket", socket])
            #expect(json.contains(#""held":{"budget":100000,"reason":"metered_budget","used":\#(usage.bytes)}"#), "\(json)")

            // A restart keeps the day's bytes: nothing goes out by itself, not even the refresh.
            let stopped = await rig.daemon.stop()
            #expect(stopped == 0, "syncd's exit status on SIGTERM")
            let restarted = try ChildProcess(
                ["ip", "netns", "exec", rig.topology.client.name, try BuildProducts.path("syncd"), "--config", rig.directory.file("syncd.toml")],
                logPath: rig.directory.file("syncd-restarted.log"))
            let client = SyncControlClient(socketPath: socket)
            try await waitUntil("the restarted syncd holds the refresh back on the spent budget", interval: .milliseconds(100)) {
                guard let status = try? await client.boundedStatus(), let feed = status.feeds.first else { return false }
                return feed.newer.held?.reason == .meteredBudget && feed.older.held?.reason == .meteredBudget
            }
            let after = try sent()
            #expect(after.requests == server.requests, "requests after the restart: \(after.requests - server.requests)")
            let status = try await client.boundedStatus()
            #expect(status.feeds.first?.meteredUsage?.bytes == usage.bytes)
            // (On a throw before this, releasing `restarted` kills it.)
            #expect(await restarted.stop() == 0, "the restarted syncd's exit status on SIGTERM")
        }
    }
}
