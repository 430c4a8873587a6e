import TestSupport
import Foundation
import GRDB
import SyncCore
import SyncStore
import Testing

func item(_ id: String) -> FeedItem { FeedItem(id: id, payload: Data("{\"id\":\"\(id)\"}".utf8)) }

func page(_ ids: [String], older: String?, newer: String?) -> FeedPage {
    FeedPage(items: ids.map(item), olderCursor: older, newerCursor: newer)
}

@Suite struct SQLiteFeedStoreTests {
    // A time the store gives back exactly, to compare with the reference's: it keeps Unix
    // seconds in a Double, which holds this fraction, not every one a `Date` holds.
    let date = Date(timeIntervalSince1970: 1_767_225_600.375)

    @Test func storesPagesInFeedOrderWithCursorsInARealWALFile() async throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("feeds.sqlite")
        let store = try SQLiteFeedStore(path: path)
        #expect(try await store.load(feed: "home") == .fresh)
        _ = try await store.commit(feed: "home", direction: .initial, page: page(["5", "4"], older: "4", newer: "5"), at: date)
        _ = try await store.commit(feed: "home", direction: .older, page: page(["3", "2"], older: "2", newer: "3"), at: date)
        let outcome = try await store.commit(feed: "home", direction: .newer, page: page(["7", "6", "5"], older: "5", newer: "7"), at: date)
        #expect(outcome.inserted == 2 && outcome.pageItemCount == 3, "5 was stored already")
        #expect(try await store.items(feed: "home", offset: 0, limit: 100).map(\.id) == ["7", "6", "5", "4", "3", "2"])
        #expect(try await store.items(feed: "home", offset: 2, limit: 2).map(\.id) == ["5", "4"])
        #expect(try await store.items(feed: "home", offset: 0, limit: 1).first == item("7"))
        #expect(try await store.load(feed: "home") == PersistedFeed(
            olderCursor: "2", newerCursor: "7", endReached: false, hasLoaded: true, itemCount: 6, lastSyncAt: date, revision: 3))
        #expect(FileManager.default.fileExists(atPath: path))
        #expect(FileManager.default.fileExists(atPath: path + "-wal"), "WAL journal mode")
    }

    @Test func releasingMemoryLosesNothingAndTheStoreGoesOn() async throws {
        let dir = try TemporaryDirectory()
        let store = try SQLiteFeedStore(path: dir.file("feeds.sqlite"))
        _ = try await store.commit(feed: "home", direction: .initial, page: page((50..<100).reversed().map(String.init), older: "50", newer: "99"), at: date)
        #expect(try await store.items(feed: "home", offset: 0, limit: 100).count == 50)
        // Released while commits and reads are under way: they finish, then the connections
        // let go of their caches; later ones open what they need again.
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                for start in stride(from: 49, to: 0, by: -10) {
                    let ids = (start - 9...start).reversed().map(String.init)
                    _ = try await store.commit(feed: "home", direction: .older, page: page(ids, older: ids.last, newer: nil), at: date)
                }
            }
            group.addTask { for _ in 0..<5 { _ = try await store.items(feed: "home", offset: 0, limit: 10) } }
            group.addTask { for _ in 0..<5 { await store.releaseMemory() } }
            try await group.waitForAll()
        }
        await store.releaseMemory()
        #expect(try await store.items(feed: "home", offset: 0, limit: 200).map(\.id) == (0..<100).reversed().map(String.init))
        #expect(try await store.load(feed: "home").itemCount == 100)
    }

    @Test func pagesCommittedTogetherEndAsCommittedAlone() async throws {
        let dir = try TemporaryDirectory()
        let together = try SQLiteFeedStore(path: dir.file("together.sqlite"))
        let alone = try SQLiteFeedStore(path: dir.file("alone.sqlite"))
        let first = page(["9", "8"], older: "8", newer: "9")
        // The third page repeats an item of the second, and the last one ends the feed.
        let pages = [page(["7", "6"], older: "6", newer: nil), page(["6", "5", "4"], older: "4", newer: nil), page(["3"], older: nil, newer: nil)]
        for store in [together, alone] { _ = try await store.commit(feed: "home", direction: .initial, page: first, at: date) }
        let grouped = try await together.commit(feed: "home", direction: .older, pages: pages, at: date)
        var single: [CommitOutcome] = []
        for page in pages { single.append(try await alone.commit(feed: "home", direction: .older, page: page, at: date)) }
        #expect(grouped == single)
        #expect(grouped.map(\.inserted) == [2, 2, 1])
        #expect(try await together.load(feed: "home") == alone.load(feed: "home"))
        #expect(try await together.items(feed: "home", offset: 0, limit: 20).map(\.id) == ["9", "8", "7", "6", "5", "4", "3"])
    }

    @Test func pagesCommittedTogetherLandTogetherOrNotAtAll() async throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("feeds.sqlite")
        let store = try SQLiteFeedStore(path: path)
        _ = try await store.commit(feed: "home", direction: .initial, page: page(["9", "8"], older: "8", newer: "9"), at: date)
        let before = try await store.load(feed: "home")
        // The database itself refuses the second page's item, half-way through the transaction.
        let other = try DatabaseQueue(path: path)
        try await other.write { db in
            try db.execute(sql: "CREATE TRIGGER refuse BEFORE INSERT ON item WHEN NEW.id = 'refused' BEGIN SELECT RAISE(ABORT, 'refused'); END")
        }
        let pages = [page(["7", "6"], older: "6", newer: nil), page(["5", "refused"], older: "4", newer: nil)]
        await #expect(throws: (any Error).self) {
            try await store.commit(feed: "home", direction: .older, pages: pages, at: date)
        }
        #expect(try await store.load(feed: "home") == before, "the cursors stay where the last whole commit left them")
        #expect(try await store.items(feed: "home", offset: 0, limit: 20).map(\.id) == ["9", "8"], "nothing of the first page either")
    }

    @Test func feedsAreKeptApart() async throws {
        let dir = try TemporaryDirectory()
        let store = try SQLiteFeedStore(path: dir.file("feeds.sqlite"))
        _ = try await store.commit(feed: "a", direction: .initial, page: page(["1"], older: nil, newer: "1"), at: date)
        _ = try await store.commit(feed: "b", direction: .initial, page: page(["1", "0"], older: "0", newer: "1"), at: date)
        #expect(try await store.load(feed: "a").itemCount == 1)
        #expect(try await store.load(feed: "a").endReached)
        #expect(try await store.load(feed: "b").itemCount == 2)
        #expect(try await store.feeds() == ["a", "b"])
    }

    @Test func reopeningResumesFromTheStoredCursors() async throws {
        let dir = try TemporaryDirectory()
        let reopened = try await storeReopened(at: dir.file("feeds.sqlite"), feed: "home", at: date, after: [
            (.initial, page(["9", "8"], older: "8", newer: "9")),
            (.older, page(["7"], older: nil, newer: nil)),
        ])
        let feed = try await reopened.load(feed: "home")
        #expect(feed == PersistedFeed(olderCursor: nil, newerCursor: "9", endReached: true, hasLoaded: true, itemCount: 3, lastSyncAt: date, revision: 2))
        #expect(try await reopened.items(feed: "home", offset: 0, limit: 10).map(\.id) == ["9", "8", "7"])
    }

    @Test func anEmptyFirstPageIsRememberedAsLoaded() async throws {
        let dir = try TemporaryDirectory()
        let store = try SQLiteFeedStore(path: dir.file("feeds.sqlite"))
        _ = try await store.commit(feed: "quiet", direction: .initial, page: page([], older: nil, newer: nil), at: date)
        let feed = try await store.load(feed: "quiet")
        #expect(feed.hasLoaded && feed.itemCount == 0 && feed.endReached)
        _ = try await store.commit(feed: "quiet", direction: .newer, page: page(["2", "1"], older: "1", newer: "2"), at: date)
        let after = try await store.load(feed: "quiet")
        #expect(after.olderCursor == "1" && after.newerCursor == "2" && !after.endReached)
    }

    /// The SQLite store and the pure reference (FeedLog) agree on every random page sequence.
    @Test(arguments: 0..<20)
    func agreesWithTheReferenceModel(seed: Int) async throws {
        try await agreeWithTheReferenceModel(seed: seed) { Int($0.next() % 5) }
    }

    /// The same with pages of 16–63 ids, which the store writes several rows per statement,
    /// overlapping stored items inside one statement.
    @Test(arguments: 0..<10)
    func agreesWithTheReferenceModelOnLargePages(seed: Int) async throws {
        try await agreeWithTheReferenceModel(seed: seed + 100) { rng in
            rng.next() % 3 == 0 ? Int(rng.next() % 5) : 16 + Int(rng.next() % 48)
        }
    }

    private func agreeWithTheReferenceModel(seed: Int, pageSize: (inout SeededRandomSource) -> Int) async throws {
        var both = try StoreAndReference()
        var rng = SeededRandomSource(seed: UInt64(seed) + 1)
        for step in 0..<40 {
            let direction: Direction = step == 0 ? .initial : [.older, .newer][Int(rng.next() % 2)]
            let count = pageSize(&rng)
            // Ids from a small space, so pages overlap stored items and each other.
            let ids = (0..<count).map { _ in "x\(rng.next() % 60)" }
            let unique = ids.reduce(into: [String]()) { if !$0.contains($1) { $0.append($1) } }
            let cursor: () -> String? = { rng.next() % 4 == 0 ? nil : "c\(rng.next() % 100)" }
            let p = page(unique, older: cursor(), newer: cursor())
            try await both.commit(p, direction, at: date, "seed \(seed) step \(step)")
        }
        #expect(try await both.store.items(feed: "f", offset: 0, limit: 1_000) == both.reference.items)
        #expect(try await both.store.load(feed: "f") == both.reference.feed)
    }
}
