import Foundation
import GRDB
@_spi(StateMachine) import SyncCore
import SyncStore
import Testing
import TestSupport

/// A revalidation committed to SQLite: the same items, order and counts as the reference model
/// (``FeedLog``), each removal numbered in the change log as `deleted` in the same transaction,
/// and the removed items gone from listings at once.
@Suite struct RevalidationStoreTests {
    let date = Date(timeIntervalSince1970: 1_767_225_600)

    func item(_ id: Int, _ revision: Int = 0) -> FeedItem {
        FeedItem(id: String(id), payload: Data(#"{"id":\#(id),"revision":\#(revision)}"#.utf8))
    }

    /// Walks `server` (newest first) at `perPage` items per page by page number.
    func walk(_ server: [FeedItem], perPage: Int, window: RevalidationWindow, stored: [String]) throws -> RevalidationResult {
        struct Abandoned: Error {}
        var walk = RevalidationWalk(window: window, stored: stored)
        var step = walk.start()
        while true {
            switch step {
            case .fetch(let request):
                let number: Int = if case .older(let cursor) = request { Int(cursor)! } else { 0 }
                let chunk = Array(server.dropFirst(number * perPage).prefix(perPage))
                let more = server.count > (number + 1) * perPage
                step = walk.received(FeedPage(items: chunk, olderCursor: more ? String(number + 1) : nil, newerCursor: "head"))
            case .finished(let result): return result
            case .abandoned: throw Abandoned()
            }
        }
    }

    @Test(arguments: 0..<12)
    func agreesWithTheReferenceModel(seed: Int) async throws {
        var random = SplitMix64(seed: UInt64(seed))
        let dir = try TemporaryDirectory()
        let store = try SQLiteFeedStore(path: dir.file("s.sqlite"))
        var model = FeedLog()
        var server = (1...random.int(in: 5...80)).reversed().map { item($0) }
        let first = FeedPage(items: server, olderCursor: nil, newerCursor: "head")
        _ = try await store.commit(feed: "f", direction: .initial, page: first, at: date)
        model.commit(first, direction: .initial, at: date)
        let start = try await store.changeHead()

        var next = server.count + 1
        for _ in 0..<random.int(in: 0...10) { server.insert(item(next), at: 0); next += 1 }
        var deleted: [String] = []
        for _ in 0..<random.int(in: 0...8) where server.count > 1 { deleted.append(server.remove(at: random.int(in: 0...(server.count - 1))).id) }
        for _ in 0..<random.int(in: 0...5) {
            let at = random.int(in: 0...(server.count - 1))
            server[at] = item(Int(server[at].id)!, 1)
        }
        let window: RevalidationWindow = random.chance(0.5) ? .all : .items(random.int(in: 1...90))
        let reading = try walk(server, perPage: random.int(in: 2...15), window: window, stored: model.items.map(\.id))

        let expected = model.revalidate(reading, at: date)
        let outcome = try await store.revalidate(feed: "f", walk: reading, at: date)
        #expect(outcome.inserted == expected.inserted && outcome.updated == expected.updated && outcome.deleted == expected.deleted)
        #expect(outcome.feed.itemCount == expected.feed.itemCount)
        #expect(try await store.items(feed: "f", offset: 0, limit: 1_000) == model.items)
        #expect(try await store.load(feed: "f").itemCount == model.items.count)
        if case .all = window { #expect(model.items == server, "seed \(seed): the whole feed walked equals the server") }

        // Each removal is in the log, as `deleted`, with its own number.
        let changes = try await store.changes(feed: "f", since: start, limit: 10_000)
        let removals = changes.filter { $0.kind == .deleted }
        #expect(Set(removals.compactMap(\.id)).count == removals.count)
        #expect(removals.count == outcome.deleted)
        #expect(Set(removals.compactMap(\.id)).isSubset(of: Set(deleted)), "only items the server deleted are removed")
    }

    /// Tombstones a page carries (Atom's `at:deleted-entry`, a JSON deletion mark) remove the
    /// stored items at once, whichever way the page was loaded, as in the reference model.
    @Test(arguments: [Direction.initial, .older, .newer])
    func aPagesTombstonesRemoveStoredItems(direction: Direction) async throws {
        let dir = try TemporaryDirectory()
        let store = try SQLiteFeedStore(path: dir.file("s.sqlite"))
        var model = FeedLog()
        let first = FeedPage(items: (4...9).reversed().map { item($0) }, olderCursor: "4", newerCursor: "head")
        _ = try await store.commit(feed: "f", direction: .initial, page: first, at: date)
        model.commit(first, direction: .initial, at: date)
        let start = try await store.changeHead()
        let items = direction == .older ? [item(3), item(2)] : direction == .newer ? [item(10)] : []
        let page = FeedPage(items: items, olderCursor: nil, newerCursor: nil, deletedIDs: ["7", "5", "1", "7"])
        let outcome = try await store.commit(feed: "f", direction: direction, page: page, at: date)
        let expected = model.commit(page, direction: direction, at: date)
        #expect(outcome.deleted == 2 && expected.deleted == 2, "7 and 5 were stored, 1 never was")
        #expect(try await store.items(feed: "f", offset: 0, limit: 100) == model.items)
        #expect(try await store.load(feed: "f").itemCount == model.items.count)
        let changes = try await store.changes(feed: "f", since: start, limit: 100).filter { $0.kind == .deleted }
        #expect(changes.compactMap(\.id) == ["7", "5"])
    }

    @Test func aRemovalAndItsLogEntryAreOneTransaction() async throws {
        let dir = try TemporaryDirectory()
        let store = try SQLiteFeedStore(path: dir.file("s.sqlite"))
        let items = (1...6).reversed().map { item($0) }
        _ = try await store.commit(feed: "f", direction: .initial, page: FeedPage(items: items, olderCursor: nil, newerCursor: "head"), at: date)
        let start = try await store.changeHead()
        var server = items
        server.remove(at: 2)  // id 4
        let outcome = try await store.revalidate(feed: "f", walk: try walk(server, perPage: 10, window: .all, stored: items.map(\.id)), at: date)
        #expect(outcome.deleted == 1)
        let changes = try await store.changes(feed: "f", since: start, limit: 100)
        #expect(changes.map(\.kind) == [.deleted] && changes.first?.id == "4")
        #expect(changes.first?.point.seq == start.seq + 1)
        let rows = try await DatabaseQueue(path: dir.file("s.sqlite")).read { db in
            (try Int.fetchOne(db, sql: "SELECT count(*) FROM item WHERE id = '4'") ?? -1,
             try Int.fetchOne(db, sql: "SELECT item_count FROM feed WHERE id = 'f'") ?? -1)
        }
        #expect(rows.0 == 0 && rows.1 == 5)
    }
}
