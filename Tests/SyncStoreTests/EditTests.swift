import Foundation
import GRDB
import SyncCore
import SyncStore
import Testing
import TestSupport

/// Items the server changed: a page that brings a stored item with other bytes (or, where the
/// feed states versions, a newer version) replaces it where it stands, in the page's
/// transaction; an unchanged item is not written; a stale version changes nothing.
@Suite struct EditTests {
    let date = Date(timeIntervalSince1970: 1_767_225_600.375)

    func item(_ id: String, _ title: String, version: String? = nil) -> FeedItem {
        FeedItem(id: id, payload: Data(#"{"id":"\#(id)","title":"\#(title)"}"#.utf8), version: version)
    }

    func titles(_ store: SQLiteFeedStore) async throws -> [String] {
        try await store.items(feed: "f", offset: 0, limit: 100).map { String(decoding: $0.payload, as: UTF8.self) }
    }

    @Test func aChangedItemIsReplacedWhereItStandsAndAnUnchangedOneIsNotWritten() async throws {
        let dir = try TemporaryDirectory()
        let store = try SQLiteFeedStore(path: dir.file("s.sqlite"))
        _ = try await store.commit(feed: "f", direction: .initial, page: FeedPage(items: [item("3", "c"), item("2", "b"), item("1", "a")], olderCursor: nil, newerCursor: "n"), at: date)
        let positions = try await DatabaseQueue(path: dir.file("s.sqlite")).read { try Row.fetchAll($0, sql: "SELECT id, position FROM item ORDER BY id").map { "\($0["id"] as String)@\($0["position"] as Int)" } }

        let same = try await store.commit(feed: "f", direction: .newer, page: FeedPage(items: [item("3", "c"), item("2", "b")], olderCursor: nil, newerCursor: "n"), at: date)
        #expect(same.updated == 0 && same.inserted == 0)

        let edited = try await store.commit(feed: "f", direction: .newer, page: FeedPage(items: [item("4", "d"), item("3", "c"), item("2", "B!")], olderCursor: nil, newerCursor: "n"), at: date)
        #expect(edited.updated == 1 && edited.inserted == 1)
        #expect(edited.feed.itemCount == 4)
        #expect(try await titles(store) == [#"{"id":"4","title":"d"}"#, #"{"id":"3","title":"c"}"#, #"{"id":"2","title":"B!"}"#, #"{"id":"1","title":"a"}"#])
        let after = try await DatabaseQueue(path: dir.file("s.sqlite")).read { try Row.fetchAll($0, sql: "SELECT id, position FROM item WHERE id != '4' ORDER BY id").map { "\($0["id"] as String)@\($0["position"] as Int)" } }
        #expect(after == positions, "an edit moved items")
    }

    @Test func withVersionsOnlyANewerOneReplaces() async throws {
        let dir = try TemporaryDirectory()
        let store = try SQLiteFeedStore(path: dir.file("s.sqlite"))
        _ = try await store.commit(feed: "f", direction: .initial, page: FeedPage(items: [item("2", "b", version: "2026-01-02T00:00:00Z"), item("1", "a", version: "9")], olderCursor: nil, newerCursor: "n"), at: date)
        // Older versions with other bytes (a stale cache): nothing changes.
        let stale = try await store.commit(feed: "f", direction: .newer, page: FeedPage(items: [item("2", "old", version: "2026-01-01T00:00:00Z"), item("1", "old", version: "8")], olderCursor: nil, newerCursor: "n"), at: date)
        #expect(stale.updated == 0)
        // The same version with other bytes: not newer, kept.
        #expect(try await store.commit(feed: "f", direction: .newer, page: FeedPage(items: [item("2", "same", version: "2026-01-02T00:00:00Z")], olderCursor: nil, newerCursor: "n"), at: date).updated == 0)
        // Newer: as numbers 10 > 9 (as text it would be older), as RFC 3339 text.
        let newer = try await store.commit(feed: "f", direction: .newer, page: FeedPage(items: [item("2", "new", version: "2026-01-03T00:00:00Z"), item("1", "new", version: "10")], olderCursor: nil, newerCursor: "n"), at: date)
        #expect(newer.updated == 2)
        #expect(try await titles(store) == [#"{"id":"2","title":"new"}"#, #"{"id":"1","title":"new"}"#])
        let versions = try await DatabaseQueue(path: dir.file("s.sqlite")).read { try String?.fetchAll($0, sql: "SELECT version FROM item ORDER BY position DESC") }
        #expect(versions == ["2026-01-03T00:00:00Z", "10"])
    }

    /// Random pages over a small id space whose payloads and versions change between pages:
    /// the store and the reference model (``FeedLog``) agree on every outcome and the end state.
    @Test(arguments: 0..<10)
    func agreesWithTheReferenceModelWhenItemsChange(seed: Int) async throws {
        var both = try StoreAndReference()
        var rng = SeededRandomSource(seed: UInt64(seed) + 500)
        let versioned = seed % 2 == 0
        for step in 0..<40 {
            let direction: Direction = step == 0 ? .initial : [.older, .newer][Int(rng.next() % 2)]
            let count = Int(rng.next() % 12)
            var seen = Set<String>()
            let ids = (0..<count).map { _ in "x\(rng.next() % 30)" }.filter { seen.insert($0).inserted }
            let items = ids.map { id in
                item(id, "t\(rng.next() % 3)", version: versioned ? "\(rng.next() % 4)" : nil)
            }
            let p = FeedPage(items: items, olderCursor: rng.next() % 4 == 0 ? nil : "c", newerCursor: "n")
            try await both.commit(p, direction, at: date, "seed \(seed) step \(step)")
        }
        #expect(try await both.store.items(feed: "f", offset: 0, limit: 1_000) == both.reference.items)
    }
}
