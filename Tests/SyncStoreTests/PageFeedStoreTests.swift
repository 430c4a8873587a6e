import Foundation
import SyncCore
import SyncStore
import Testing
import TestSupport

/// Page shifts, gaps, exact ids and changed sources in the SQLite store, checked against the
/// reference model (FeedLog).
@Suite struct PageFeedStoreTests {
    // A time the store gives back exactly, to compare with the reference's: it keeps Unix
    // seconds in a Double, which holds this fraction, not every one a `Date` holds.
    let date = Date(timeIntervalSince1970: 1_767_225_600.375)

    func paged(_ ids: [String], next: String?, newer: String? = nil) -> FeedPage {
        FeedPage(items: ids.map(item), olderCursor: next, newerCursor: newer, continuation: next)
    }

    /// Random pages of a page-numbered feed: overlapping, shifted, opening and closing gaps.
    @Test(arguments: 0..<20)
    func agreesWithTheReferenceModelOnPageFeeds(seed: Int) async throws {
        var both = try StoreAndReference()
        let store = both.store
        var rng = SeededRandomSource(seed: UInt64(seed) + 1000)
        for step in 0..<60 {
            let direction: Direction = step == 0 ? .initial : [.older, .newer, .newer][Int(rng.next() % 3)]
            let count = Int(rng.next() % 6)
            let ids = (0..<count).map { _ in "x\(rng.next() % 80)" }
            let unique = ids.reduce(into: [String]()) { if !$0.contains($1) { $0.append($1) } }
            let next: String? = rng.next() % 5 == 0 ? nil : "p\(rng.next() % 10)"
            let p = paged(unique, next: next, newer: rng.next() % 2 == 0 ? "p1" : nil)
            let (actual, expected) = try await both.commit(p, direction, at: date, "seed \(seed) step \(step)")
            // The outcome is computed, not read back: it must be what a later load reads.
            #expect(try await store.load(feed: "f") == actual.feed, "seed \(seed) step \(step)")
            let stored = try await store.items(feed: "f", offset: 0, limit: 1_000).map(\.id)
            #expect(stored == both.reference.items.map(\.id), "seed \(seed) step \(step): \(direction) \(unique) gap \(String(describing: both.reference.feed.gap))")
            if actual != expected || stored != both.reference.items.map(\.id) { break }
        }
        #expect(try await store.items(feed: "f", offset: 0, limit: 1_000) == both.reference.items)
        #expect(try await store.load(feed: "f") == both.reference.feed)
    }

    /// An older page that repeats an id (in or out of the page's order, or as another spelling
    /// of the same name) stores each id once, its first time, as the reference model does.
    @Test(arguments: [
        ["3", "2", "3", "1"], ["1", "2", "1"], ["3", "2", "1", "2"], ["2", "2"], ["b", "a", "c", "a"],
        ["caf\u{E9}", "cafe\u{301}", "caf\u{E9}"], ["caf\u{E9}", "cafe\u{301}"], ["3", "2", "1"],
    ])
    func anOlderPageStoresARepeatedIdOnce(ids: [String]) async throws {
        let dir = try TemporaryDirectory()
        let store = try SQLiteFeedStore(path: dir.file("feeds.sqlite"))
        var reference = FeedLog()
        for (direction, p) in [(Direction.initial, paged(["9", "8"], next: "p2", newer: "p1")), (.older, paged(ids, next: "p3"))] {
            let expected = reference.commit(p, direction: direction, at: date)
            #expect(try await store.commit(feed: "f", direction: direction, page: p, at: date) == expected, "\(ids)")
        }
        let stored = try await store.items(feed: "f", offset: 0, limit: 100)
        #expect(stored.map { Array($0.id.utf8) } == reference.items.map { Array($0.id.utf8) }, "\(ids)")
        #expect(Set(stored.map { ExactID($0.id) }).count == stored.count)
    }

    @Test func anOlderPageWithNewerItemsPutsThemAboveTheStoredMaximum() async throws {
        let dir = try TemporaryDirectory()
        let store = try SQLiteFeedStore(path: dir.file("feeds.sqlite"))
        _ = try await store.commit(feed: "f", direction: .initial, page: page(["10", "9"], older: "p2", newer: "p1"), at: date)
        _ = try await store.commit(feed: "f", direction: .older, page: page(["12", "11", "10", "9", "8"], older: "p3", newer: nil), at: date)
        // Between two adjacent stored items there is no free position: the store makes room.
        _ = try await store.commit(feed: "f", direction: .older, page: page(["9", "8.7", "8.5", "8"], older: "p4", newer: nil), at: date)
        #expect(try await store.items(feed: "f", offset: 0, limit: 100).map(\.id) == ["12", "11", "10", "9", "8.7", "8.5", "8"])
        #expect(try await store.load(feed: "f").itemCount == 7)
    }

    /// An empty id and an empty payload are stored as empty, not as NULL (which the schema refuses).
    @Test func emptyIdsAndPayloadsAreStoredAsEmpty() async throws {
        let dir = try TemporaryDirectory()
        let store = try SQLiteFeedStore(path: dir.file("feeds.sqlite"))
        let page = FeedPage(items: [FeedItem(id: "", payload: Data()), FeedItem(id: "a", payload: Data("{}".utf8))], olderCursor: nil, newerCursor: nil)
        let outcome = try await store.commit(feed: "f", direction: .initial, page: page, at: date)
        #expect(outcome.inserted == 2)
        #expect(try await store.items(feed: "f", offset: 0, limit: 10) == page.items)
        let again = try await store.commit(feed: "f", direction: .newer, page: page, at: date)
        #expect(again.inserted == 0 && again.overlapped)
    }

    @Test func nfcAndNfdIdsAreTwoItems() async throws {
        let dir = try TemporaryDirectory()
        let store = try SQLiteFeedStore(path: dir.file("feeds.sqlite"))
        let nfc = "caf\u{E9}", nfd = "cafe\u{301}"
        let outcome = try await store.commit(feed: "f", direction: .initial, page: page([nfc, nfd], older: nil, newer: "n"), at: date)
        #expect(outcome.inserted == 2)
        let stored = try await store.items(feed: "f", offset: 0, limit: 10)
        #expect(stored.map { Array($0.id.utf8) } == [Array(nfc.utf8), Array(nfd.utf8)])
        // A later page with one spelling meets exactly that item.
        let again = try await store.commit(feed: "f", direction: .newer, page: page([nfd], older: nil, newer: nil), at: date)
        #expect(again.inserted == 0 && again.overlapped)
        #expect(try await store.items(feed: "f", after: nfc, limit: 10)?.map { Array($0.id.utf8) } == [Array(nfd.utf8)])
    }

    @Test func anOpenGapSurvivesARestartAndIsContinuedWhereItWas() async throws {
        let dir = try TemporaryDirectory()
        let store = try await storeReopened(at: dir.file("feeds.sqlite"), feed: "f", at: date, after: [
            (.initial, paged(["5", "4"], next: "p2", newer: "p1")),
            (.newer, paged(["9", "8"], next: "p2")),
        ])
        #expect(try await store.load(feed: "f").gap == FeedGap(cursor: "p2", pages: 1, items: 2))
        _ = try await store.commit(feed: "f", direction: .newer, page: paged(["7", "6", "5"], next: "p3"), at: date)
        #expect(try await store.load(feed: "f").gap == nil)
        #expect(try await store.items(feed: "f", offset: 0, limit: 100).map(\.id) == ["9", "8", "7", "6", "5", "4"])
    }

    @Test func aChangedSourceResetsTheCursorsAndKeepsTheItems() async throws {
        let dir = try TemporaryDirectory()
        let store = try SQLiteFeedStore(path: dir.file("feeds.sqlite"))
        #expect(try await store.adopt(source: "http://a.example/feed", feed: "f") == .unchanged)
        _ = try await store.commit(feed: "f", direction: .initial, page: page(["2", "1"], older: "http://a.example/feed?max_id=1", newer: "http://a.example/feed?min_id=2"), at: date)
        #expect(try await store.adopt(source: "http://a.example/feed", feed: "f") == .unchanged)
        #expect(try await store.adopt(source: "http://b.example/feed", feed: "f") == .changed(from: "http://a.example/feed"))
        let reset = try await store.load(feed: "f")
        #expect(reset.olderCursor == nil && reset.newerCursor == nil && !reset.hasLoaded && !reset.endReached)
        #expect(reset.itemCount == 2)
        #expect(try await store.items(feed: "f", offset: 0, limit: 10).map(\.id) == ["2", "1"])
        // The new source's first page lands above what is kept.
        _ = try await store.commit(feed: "f", direction: .initial, page: page(["b9"], older: nil, newer: "http://b.example/feed?min_id=b9"), at: date)
        #expect(try await store.items(feed: "f", offset: 0, limit: 10).map(\.id) == ["b9", "2", "1"])
        #expect(try await store.load(feed: "f").newerCursor == "http://b.example/feed?min_id=b9")
    }
}
