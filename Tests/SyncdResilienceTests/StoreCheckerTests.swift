import DemoFeedServer
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import GRDB
import SyncCore
import SyncStore
import SyncdTesting
import Testing
import TestSupport

extension SyncdResilienceTests {
    /// The store checks used after every kill must catch what they claim to: a gap, a foreign
    /// or altered item, a shared position, a cursor off the stored edge.
    @Test(.timeLimit(.minutes(3)))
    func storeCheckerCatchesGapsCorruptionAndStrayCursors() async throws {
        let directory = try TemporaryDirectory(prefix: "syncd-resilience-checker")
        let served = (1...100).map { DemoFeedItem.generate(feed: "home", sequence: $0, idWidth: 10, idField: "id") }
        let base = "http://127.0.0.1:1/feeds/home?limit=20"
        func page(_ range: ClosedRange<Int>) -> [FeedItem] {
            range.reversed().map { FeedItem(id: served[$0 - 1].id, payload: served[$0 - 1].jsonData) }
        }

        func makeStore(_ name: String) async throws -> String {
            let path = directory.file("\(name).sqlite")
            let store = try SQLiteFeedStore(path: path)
            _ = try await store.commit(feed: "home", direction: .initial, page: FeedPage(
                items: page(81...100), olderCursor: "\(base)&max_id=\(served[80].id)", newerCursor: "\(base)&min_id=\(served[99].id)"), at: Date())
            _ = try await store.commit(feed: "home", direction: .older, page: FeedPage(
                items: page(61...80), olderCursor: "\(base)&max_id=\(served[60].id)", newerCursor: nil), at: Date())
            return path
        }
        func problems(_ path: String, _ damage: String? = nil) throws -> [String] {
            if let damage {
                let queue = try DatabaseQueue(path: path)
                try queue.write { try $0.execute(sql: damage) }
                try queue.close()
            }
            return try StoreSnapshot.read(storePath: path, feed: "home", scratch: directory.file("scratch")).problems(against: served)
        }

        #expect(try problems(try await makeStore("intact")) == [])
        let cases: [(String, String)] = [
            ("DELETE FROM item WHERE id = '\(served[69].id)'", "not a contiguous slice"),
            ("UPDATE item SET id = '0000000500' WHERE id = '\(served[99].id)'", "not a contiguous slice"),
            ("UPDATE item SET payload = x'7b7d' WHERE id = '\(served[75].id)'", "payload"),
            ("UPDATE item SET position = (SELECT position FROM item WHERE id = '\(served[70].id)') WHERE id = '\(served[71].id)'", "share a position"),
            ("UPDATE feed SET older_cursor = '\(base)&max_id=\(served[40].id)'", "older cursor"),
            ("UPDATE feed SET newer_cursor = '\(base)&min_id=\(served[90].id)'", "newer cursor"),
            ("UPDATE feed SET end_reached = 1", "end_reached"),
            ("UPDATE feed SET has_loaded = 0", "has_loaded"),
        ]
        for (index, (damage, expected)) in cases.enumerated() {
            let found = try problems(try await makeStore("damaged-\(index)"), damage)
            #expect(found.contains { $0.contains(expected) }, "\(damage): expected a problem mentioning '\(expected)', got \(found)")
        }
    }
}

extension SyncdResilienceTests {
    /// The Retry-After audit flags a client that comes back too early (and only then). The early
    /// retry is early by far (Retry-After 600 s, sent at once), the late one late by waiting past
    /// its Retry-After: neither verdict depends on how fast the requests go.
    @Test(.timeLimit(.minutes(6)))
    func retryAfterAuditCatchesAnEarlyRetry() async throws {
        let server = try await startServer(.init(feeds: [FeedDefinition(name: "home", initialCount: 10)]))
        try await withCleanup {
            let url = try #require(server.feedURL("home", limit: 5).flatMap(URL.init(string:)))
            try await server.scriptFault(ScriptedFault(.status(429, retryAfter: .seconds(600)), count: 1, feed: "home", kind: .initial))
            try await server.scriptFault(ScriptedFault(.status(503, retryAfter: .seconds(1)), count: 1, feed: "home", kind: .older))
            for _ in 0..<2 { _ = try? await URLSession.shared.data(from: url) }
            let older = URL(string: url.absoluteString + "&max_id=0000000005")!
            _ = try? await URLSession.shared.data(from: older)
            try await Task.sleep(for: .milliseconds(1_100))
            _ = try? await URLSession.shared.data(from: older)
            let result = RetryAfterAudit.audit(await server.requests(feed: "home"))
            #expect(result.checked == 2)
            #expect(result.violations.count == 1, "\(result.violations)")
            #expect(result.violations.first?.contains("429") == true)
        } cleanup: {
            await stopServerInCleanup(server)
        }
    }
}
