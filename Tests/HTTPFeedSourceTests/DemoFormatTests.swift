import DemoFeedServer
import Foundation
import HTTPFeedSource
import SyncCoordinator
import SyncCore
import SyncStore
import Testing
import TestSupport

/// The demo server's other page formats (a JSON envelope with a body cursor, an Atom document
/// with RFC 5005 links), which the benchmarks compare with the bare array: syncd mirrors each of
/// them whole, in order, with the bytes the server lists.
@Suite("Demo server page formats")
struct DemoFormatTests {
    static let envelope = FeedDescriptor(
        items: JSONPointer(tokens: ["data"]), older: .bodyCursor(JSONPointer(tokens: ["next_cursor"]), parameter: "max_id"), newer: .head)

    @Test("a JSON envelope with a body cursor and an Atom document mirror the whole feed", arguments: ["envelope", "atom"])
    func mirrorsEachFormat(format: String) async throws {
        try await withFeedServer(.init(feeds: [FeedDefinition(name: "bulk", initialCount: 237)])) { server, client in
            let port = try #require(server.port)
            try await withStore { store in
                let url = URL(string: "http://127.0.0.1:\(port)/feeds/bulk?format=\(format)&limit=20")!
                let http = HTTPFeedConfiguration(url: url, descriptor: format == "envelope" ? Self.envelope : FeedDescriptor(), requestTimeout: hangGuard)
                let source = try HTTPFeedSource(configuration: http, client: client, logger: quietLogger)
                try await withSyncedFeed("bulk", from: source, into: store) { feed in
                    try await waitFor(feed, "\(format): the whole feed") { $0.endReached && !$0.older.load.isLoading && $0.itemCount == 237 }
                }
                let served = try await server.items(feed: "bulk").reversed()
                let stored = try await store.items(feed: "bulk", offset: 0, limit: 1_000)
                if format == "envelope" {
                    #expect(stored.map(\.id) == served.map(\.id))
                    #expect(stored.map(\.payload) == served.map(\.jsonData), "the envelope's items are stored byte for byte")
                } else {
                    #expect(stored.map(\.id) == served.map { "tag:demo-feed.test,2026:bulk/\($0.id)" })
                    // Each entry's content is the item's JSON, escaped in XML and read back.
                    let contents = try stored.map { try #require(JSONSerialization.jsonObject(with: $0.payload) as? [String: Any])["content"] as? String }
                    #expect(contents == served.map(\.json))
                }
            }
        }
    }
}
