import Foundation
@testable import HTTPFeedSource
import SyncCoordinator
import SyncCore
import SyncStore
import Testing
import TestSupport

/// Deletions a feed states: Atom's tombstones (RFC 6721) and items a JSON API still lists with a
/// deletion mark. A page that carries one removes the stored item at once; a marked item is
/// never stored.
@Suite("Explicit deletion signals")
struct DeletionSignalTests {
    @Test("Atom's at:deleted-entry names the entries deleted")
    func atomTombstones() throws {
        let body = Data("""
            <?xml version="1.0" encoding="utf-8"?>
            <feed xmlns="http://www.w3.org/2005/Atom" xmlns:at="http://purl.org/atompub/tombstones/1.0">
              <title>t</title><id>tag:example.test,2026:feed</id><updated>2026-01-02T00:00:00Z</updated>
              <at:deleted-entry ref="tag:example.test,2026:item-3" when="2026-01-02T00:00:00Z"/>
              <entry><id>tag:example.test,2026:item-4</id><title>four</title><updated>2026-01-02T00:00:00Z</updated></entry>
              <at:deleted-entry ref=" tag:example.test,2026:item-1 " when="2026-01-01T00:00:00Z"><at:comment>spam</at:comment></at:deleted-entry>
              <deleted-entry ref="tag:example.test,2026:item-2"/>
            </feed>
            """.utf8)
        let page = try SyndicationParser.parse(body, url: URL(string: "http://h.example/feed.xml")!)
        #expect(page.items.map(\.id) == ["tag:example.test,2026:item-4"])
        #expect(page.deletedIDs == ["tag:example.test,2026:item-3", "tag:example.test,2026:item-1"], "only RFC 6721's namespace counts")
    }

    @Test("a JSON item carrying the feed's deletion mark is a tombstone; other values are not")
    func jsonMark() throws {
        let body = Data(#"{"data":[{"id":"3","status":"deleted"},{"id":"2","status":"open"},{"id":"1","status":"deleted "}]}"#.utf8)
        let parser = JSONPageParser(id: JSONPointer(tokens: ["id"]), deleted: DeletionMark(pointer: JSONPointer(tokens: ["status"]), value: .string("deleted")))
        let page = try parser.read(body, items: JSONPointer(tokens: ["data"]))
        #expect(page.items.map(\.id) == ["3", "2", "1"], "tombstones stay in the page, where cursors count them")
        #expect(page.deletedIDs == ["3"])
        let flags = JSONPageParser(id: JSONPointer(tokens: ["id"]), deleted: DeletionMark(pointer: JSONPointer(tokens: ["deleted"])))
        let bare = try flags.read(Data(#"[{"id":2,"deleted":true},{"id":1,"deleted":false}]"#.utf8), items: nil)
        #expect(bare.deletedIDs == ["2"])
    }

    @Test("tombstones in a Mastodon-style timeline: never stored by the backfill, removed when a refresh reads them")
    func tombstonesEndToEnd() async throws {
        let directory = try TemporaryDirectory(prefix: "mastodon-tombstones")
        try await withPythonOracle("mastodon_style.py", arguments: ["0", "30"], directory: directory) { port in
            let server = MastodonStyleServer(port: port)
            // On page 3 at 10 a page: listed as deleted before the first load.
            try await server.delete(id: "5", tombstone: true)
            try await withFeedClient { client in
                try await withStore { store in
                    var descriptor = FeedDescriptor(newer: .head)
                    descriptor.deleted = DeletionMark(pointer: JSONPointer(tokens: ["deleted"]))
                    let http = HTTPFeedConfiguration(url: server.url(limit: 10), descriptor: descriptor, requestTimeout: hangGuard)
                    let source = try HTTPFeedSource(configuration: http, client: client, logger: quietLogger)
                    try await withSyncedFeed("f", from: source, into: store) { feed in
                        try await waitFor(feed, "backfill to the end") { $0.endReached && !$0.older.load.isLoading }
                        #expect(try await store.items(feed: "f", offset: 0, limit: 100) == (try await server.items()))
                        #expect(await feed.state.itemCount == 29)
                        let point = try await store.changeHead()

                        // Two statuses of page 1 become tombstones; the refresh reads page 1 again, and
                        // the rows a UI shows (itemUpdates) lose them.
                        let rows = await feed.itemUpdates(limit: 5)
                        let shown = BoundedTask { () async -> [String] in
                            for await items in rows where !items.contains(where: { $0.id == "29" || $0.id == "27" }) {
                                return items.map(\.id)
                            }
                            return []
                        }
                        try await server.delete(id: "29", tombstone: true)
                        try await server.delete(id: "27", tombstone: true)
                        await feed.refresh()
                        #expect(try await shown.value("the rows without the deleted items") == ["30", "28", "26", "25", "24"])
                        try await waitFor(feed, "the tombstones' items removed") { $0.itemCount == 27 && !$0.newer.load.isLoading }
                        #expect(try await store.items(feed: "f", offset: 0, limit: 100) == (try await server.items()))
                        let changes = try await store.changes(feed: "f", since: point, limit: 100)
                        #expect(changes.map(\.kind) == [.deleted, .deleted])
                        #expect(Set(changes.compactMap(\.id)) == ["29", "27"])
                    }
                }
            }
        }
    }
}
