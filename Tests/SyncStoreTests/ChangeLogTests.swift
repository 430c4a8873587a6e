import Foundation
import GRDB
import SyncCore
import SyncStore
import Testing
import TestSupport

/// The store's change log, as a follower uses it: replaying the changes after any point it held
/// into the items it had then gives exactly the items stored now, whatever happened meanwhile
/// (inserts, edits, retention evictions); a point it cannot continue gets a reset first.
@Suite struct ChangeLogTests {
    let date = Date(timeIntervalSince1970: 1_767_225_600.375)

    /// Applies `changes` to `items` as a follower would.
    func replay(_ changes: [ItemChange], into items: inout [String: Data]) {
        for change in changes {
            switch change.kind {
            case .reset: items = [:]
            case .inserted, .updated: items[change.id!] = change.payload!
            case .deleted, .evicted: items[change.id!] = nil
            }
        }
    }

    func all(_ store: SQLiteFeedStore, since: ChangePoint?) async throws -> [ItemChange] {
        var result: [ItemChange] = []
        var point = since
        while true {
            let batch = try await store.changes(feed: "f", since: point, limit: 7)
            // A batch that only resets makes no progress on its own.
            if batch.isEmpty || (batch.count == 1 && batch[0].kind == .reset && !result.isEmpty && result.last?.kind == .reset) { break }
            result += batch
            point = batch.last!.point
            if batch.count < 7 { break }
        }
        return result
    }

    func stored(_ store: SQLiteFeedStore) async throws -> [String: Data] {
        Dictionary(uniqueKeysWithValues: try await store.items(feed: "f", offset: 0, limit: 10_000).map { ($0.id, $0.payload) })
    }

    @Test(arguments: 0..<8)
    func replayFromAnyPointGivesTheStore(seed: Int) async throws {
        let dir = try TemporaryDirectory()
        let store = try SQLiteFeedStore(path: dir.file("s.sqlite"), retention: ["f": SQLiteFeedStore.Retention(keepItems: 25)], tombstoneLimit: 1_000)
        var rng = SeededRandomSource(seed: UInt64(seed) + 900)
        var held: [(point: ChangePoint, items: [String: Data])] = [(try await store.changeHead(), [:])]
        var next = 0
        for step in 0..<30 {
            let direction: Direction = step == 0 ? .initial : [.older, .newer, .newer][Int(rng.next() % 3)]
            // New ids, and some stored ones again with a changed payload (an edit) or the same.
            var ids: [String] = (0..<Int(rng.next() % 6)).map { _ in next += 1; return "n\(next)" }
            for _ in 0..<Int(rng.next() % 4) where next > 0 { ids.append("n\(1 + Int(rng.next() % UInt64(next)))") }
            var seen = Set<String>()
            let items = ids.filter { seen.insert($0).inserted }.map { id in
                FeedItem(id: id, payload: Data(#"{"id":"\#(id)","v":\#(rng.next() % 3)}"#.utf8))
            }
            _ = try await store.commit(feed: "f", direction: direction, page: FeedPage(items: items, olderCursor: "o", newerCursor: "n"), at: date)
            held.append((try await store.changeHead(), try await stored(store)))
        }
        let now = try await stored(store)
        for (index, state) in held.enumerated() {
            var items = state.items
            replay(try await all(store, since: state.point), into: &items)
            #expect(items == now, "seed \(seed): replay from point \(index) (\(state.point)) differs from the store")
        }
        var fresh: [String: Data] = [:]
        let everything = try await all(store, since: nil)
        replay(everything, into: &fresh)
        #expect(fresh == now)
        let first = try await store.changes(feed: "f", since: nil, limit: 1_000)
        #expect(first.allSatisfy { $0.kind == ItemChange.Kind.inserted }, "from the start, every stored item is one insert")
        #expect(Set(first.map(\.id)) == Set(now.keys))
        // Numbers only grow, and the last is the head.
        let numbers = try await all(store, since: held[0].point).map(\.point.seq)
        #expect(numbers == numbers.sorted() && Set(numbers).count == numbers.count)
        #expect(numbers.last == (try await store.changeHead()).seq)
    }

    @Test func pointsThatCannotBeContinuedStartWithAReset() async throws {
        let dir = try TemporaryDirectory()
        let store = try SQLiteFeedStore(path: dir.file("s.sqlite"), retention: ["f": SQLiteFeedStore.Retention(keepItems: 2)], tombstoneLimit: 3)
        let start = try await store.changeHead()
        for n in 1...6 {
            _ = try await store.commit(feed: "f", direction: n == 1 ? .initial : .newer,
                                       page: FeedPage(items: [FeedItem(id: "\(n)", payload: Data("{}".utf8))], olderCursor: nil, newerCursor: "n"), at: date)
        }
        let head = try await store.changeHead()
        #expect(head.epoch == start.epoch && head.seq > start.seq)
        #expect(try await store.changes(feed: "f", since: head, limit: 10).isEmpty)
        // Another store's point, a point ahead (a power loss dropped the newest commits), and one
        // older than the three removals kept: each a reset, then the feed from the start.
        for point in [ChangePoint(epoch: "0000", seq: head.seq), ChangePoint(epoch: head.epoch, seq: head.seq + 5), ChangePoint(epoch: head.epoch, seq: 1)] {
            let changes = try await store.changes(feed: "f", since: point, limit: 10)
            #expect(changes.first?.kind == .reset, "\(point): \(changes.map(\.kind))")
            #expect(changes.dropFirst().map(\.id) == ["5", "6"], "\(point)")
        }
        // A point within the kept removals: the evictions since, no reset.
        let recent = try await store.changes(feed: "f", since: ChangePoint(epoch: head.epoch, seq: head.seq - 2), limit: 10)
        #expect(!recent.contains { $0.kind == .reset })
        #expect(recent.contains { $0.kind == .evicted })
        #expect(ChangePoint(head.description) == head)
        #expect(ChangePoint("nonsense") == nil && ChangePoint("ab:-1") == nil)
    }

    /// A follower gets what is committed after it started, as it is committed, and nothing twice.
    @Test(.timeLimit(.minutes(1))) func followersSeeCommitsAsTheyLand() async throws {
        let dir = try TemporaryDirectory()
        let store = try SQLiteFeedStore(path: dir.file("s.sqlite"))
        _ = try await store.commit(feed: "f", direction: .initial, page: FeedPage(items: [FeedItem(id: "1", payload: Data("{}".utf8))], olderCursor: nil, newerCursor: "n"), at: date)
        let from = try await store.changeHead()
        let follower = BoundedTask { () -> [ItemChange] in
            var seen: [ItemChange] = []
            for try await change in store.changes(feed: "f", since: from, batch: 2) {
                seen.append(change)
                if seen.count == 4 { break }
            }
            return seen
        }
        for n in 2...4 {
            _ = try await store.commit(feed: "f", direction: .newer, page: FeedPage(items: [FeedItem(id: "\(n)", payload: Data("{}".utf8))], olderCursor: nil, newerCursor: "n"), at: date)
        }
        _ = try await store.commit(feed: "f", direction: .newer, page: FeedPage(items: [FeedItem(id: "1", payload: Data(#"{"edited":true}"#.utf8))], olderCursor: nil, newerCursor: "n"), at: date)
        let seen = try await follower.value("the follower's four changes")
        #expect(seen.map(\.kind) == [.inserted, .inserted, .inserted, .updated])
        #expect(seen.map(\.id) == ["2", "3", "4", "1"])
        #expect(seen.last?.payload == Data(#"{"edited":true}"#.utf8))
    }
}
