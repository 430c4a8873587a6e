import Foundation
@_spi(StateMachine) import SyncCore
import Testing

/// A feed server as a list, newest first, paged by position (page numbers) or by keyset
/// (`max_id`): the reference the revalidation walk and the reconcile rule are held against.
private struct ModelServer {
    enum Paging { case positional, keyset }
    var items: [(id: Int, revision: Int)]
    var nextID: Int
    let pageSize: Int
    let paging: Paging

    init(count: Int, pageSize: Int, paging: Paging) {
        items = (1...max(1, count)).reversed().map { ($0, 0) }
        nextID = count + 1
        self.pageSize = pageSize
        self.paging = paging
    }

    static func item(_ id: Int, _ revision: Int) -> FeedItem {
        FeedItem(id: String(id), payload: Data(#"{"id":\#(id),"revision":\#(revision)}"#.utf8))
    }

    var feedItems: [FeedItem] { items.map { Self.item($0.id, $0.revision) } }

    mutating func insertAtTop() {
        items.insert((nextID, 0), at: 0)
        nextID += 1
    }

    mutating func delete(at index: Int) { items.remove(at: index) }

    mutating func edit(at index: Int) { items[index].revision += 1 }

    /// One random change: an item added at the top, one deleted or one edited anywhere.
    mutating func mutate(_ random: inout SeededRandomSource) {
        switch Int.random(in: 0...2, using: &random) {
        case 0: insertAtTop()
        case 1 where items.count > 1: delete(at: Int.random(in: 0...(items.count - 1), using: &random))
        default: if !items.isEmpty { edit(at: Int.random(in: 0...(items.count - 1), using: &random)) }
        }
    }

    func fetch(_ request: RevalidationWalk.Request) -> FeedPage {
        switch paging {
        case .positional:
            let number: Int = if case .older(let cursor) = request { Int(cursor.dropFirst(2))! } else { 0 }
            let chunk = Array(items.dropFirst(number * pageSize).prefix(pageSize))
            let more = items.count > (number + 1) * pageSize
            return FeedPage(items: chunk.map { Self.item($0.id, $0.revision) }, olderCursor: more ? "p:\(number + 1)" : nil, newerCursor: "head")
        case .keyset:
            let below: Int = if case .older(let cursor) = request { Int(cursor.dropFirst(2))! } else { Int.max }
            let rest = items.filter { $0.id < below }
            let chunk = Array(rest.prefix(pageSize))
            let more = rest.count > pageSize
            return FeedPage(
                items: chunk.map { Self.item($0.id, $0.revision) }, olderCursor: more ? "k:\(chunk.last!.id)" : nil, newerCursor: "head",
                olderContinuesAfterLastItem: true)
        }
    }
}

/// Runs a walk against `server`, calling `between` before each request after the first.
private func walk(
    _ window: RevalidationWindow, stored: [String], server: inout ModelServer, between: (inout ModelServer) -> Void = { _ in }
) -> (result: RevalidationResult?, requests: [RevalidationWalk.Request]) {
    var walk = RevalidationWalk(window: window, stored: stored)
    var requests: [RevalidationWalk.Request] = []
    var step = walk.start()
    while true {
        switch step {
        case .fetch(let request):
            if !requests.isEmpty { between(&server) }
            requests.append(request)
            step = walk.received(server.fetch(request))
        case .finished(let result): return (result, requests)
        case .abandoned: return (nil, requests)
        }
    }
}

private func mirror(of server: ModelServer) -> FeedLog {
    var log = FeedLog()
    log.commit(FeedPage(items: server.feedItems, olderCursor: nil, newerCursor: "head"), direction: .initial, at: Date(timeIntervalSince1970: 0))
    return log
}

@Suite("Revalidation: the walk and the reconcile rule")
struct RevalidationTests {
    @Test("keyset pages join without being read again; deletions, edits and new items all reach the store")
    func keysetPagesJoin() {
        var server = ModelServer(count: 40, pageSize: 10, paging: .keyset)
        var log = mirror(of: server)
        server.delete(at: 9)  // the last item of page 1 as it was
        server.delete(at: 25)
        server.edit(at: 3)
        server.insertAtTop()
        let (result, requests) = walk(.items(30), stored: log.items.map(\.id), server: &server)
        let reading = try! #require(result)
        #expect(Set(requests).count == requests.count, "no page read twice: \(requests)")
        #expect(reading.stretches.count == 1)
        let outcome = log.revalidate(reading, at: Date(timeIntervalSince1970: 1))
        #expect(outcome.deleted == 2 && outcome.updated == 1 && outcome.inserted == 1)
        #expect(log.items == server.feedItems)
    }

    @Test("an item deleted at a page-number boundary is found by reading the page above again, and the head")
    func positionalBoundaryIsConfirmed() {
        var server = ModelServer(count: 30, pageSize: 10, paging: .positional)
        var log = mirror(of: server)
        // Stored between page 1's last item and page 2's first once it is gone.
        server.delete(at: 10)
        let (result, requests) = walk(.all, stored: log.items.map(\.id), server: &server)
        let reading = try! #require(result)
        #expect(requests == [.head, .older("p:1"), .head, .older("p:2"), .head], "\(requests)")
        #expect(reading.stretches.count == 1)
        log.revalidate(reading, at: Date(timeIntervalSince1970: 1))
        #expect(log.items == server.feedItems)
    }

    @Test("an item pushed onto the page above by a deletion during the walk is not taken for deleted")
    func aShiftDuringTheWalkRemovesNothingStillThere() {
        var server = ModelServer(count: 30, pageSize: 10, paging: .positional)
        var log = mirror(of: server)
        var deletedDuringWalk = false
        // After page 1 is read, an item on it goes: item 11 moves onto page 1, and page 2 starts at 12.
        let (result, _) = walk(.all, stored: log.items.map(\.id), server: &server) { server in
            if !deletedDuringWalk { server.delete(at: 0); deletedDuringWalk = true }
        }
        let reading = try! #require(result)
        log.revalidate(reading, at: Date(timeIntervalSince1970: 1))
        let stored = Set(log.items.map(\.id))
        for item in server.feedItems { #expect(stored.contains(item.id), "\(item.id) is on the server and was removed") }
        // What the walk could not confirm stays until a quiet revalidation.
        let (again, _) = walk(.all, stored: log.items.map(\.id), server: &server)
        log.revalidate(try! #require(again), at: Date(timeIntervalSince1970: 2))
        #expect(log.items == server.feedItems)
    }

    @Test("a walk that meets no stored item within its bound is abandoned, not taken as the truth")
    func noAnchorAbandons() {
        var server = ModelServer(count: 10, pageSize: 5, paging: .positional)
        let log = mirror(of: server)
        for _ in 0..<50 { server.insertAtTop() }
        let (result, requests) = walk(.items(5), stored: log.items.map(\.id), server: &server)
        #expect(result == nil)
        #expect(requests.count == 6, "the bound for 5 items at 5 per page, (5 / 5 + 1) × 2 + 2 pages, and no page read again: \(requests)")
    }

    @Test("new items pushing the window down never read as deletions")
    func newItemsAreNotDeletions() {
        var server = ModelServer(count: 50, pageSize: 10, paging: .positional)
        var log = mirror(of: server)
        for _ in 0..<25 { server.insertAtTop() }
        let (result, _) = walk(.items(20), stored: log.items.map(\.id), server: &server)
        let outcome = log.revalidate(try! #require(result), at: Date(timeIntervalSince1970: 1))
        #expect(outcome.deleted == 0 && outcome.inserted == 25)
        #expect(log.items == server.feedItems)
    }

    @Test("the machine asks for a revalidation when one is due, and a plain refresh in between")
    func theMachineRevalidatesAtItsInterval() throws {
        var h = Harness(configuration: SyncConfiguration(reconnectSpread: .zero, revalidate: .items(10), revalidateInterval: .seconds(600)))
        h.send(.start)
        #expect(h.fetched.map(\.revalidate) == [nil], "nothing stored yet: nothing to revalidate")
        h.succeed(.initial, page(["3", "2", "1"], older: nil, newer: "3"))
        h.send(.refresh)
        let request = try #require(h.fetched.first)
        #expect(request.direction == .newer && request.revalidate == .items(10))
        h.inFlight[.newer] = nil
        let walk = RevalidationResult(
            pages: [FeedPage(items: [item("3"), item("1")], olderCursor: nil, newerCursor: "3")], stretches: [["3", "1"]],
            reachedEnd: true, newerCursor: "3", requests: 1)
        let outcome = h.log.revalidate(walk, at: h.now)
        #expect(outcome.deleted == 1 && outcome.overlapped)
        h.send(.committed(.newer, request.token, outcome))
        #expect(h.state.itemCount == 2)
        #expect(h.fetched.isEmpty, "a revalidation read down through its window: the refresh is over")
        h.advance(60)
        h.send(.refresh)
        #expect(h.fetched.map(\.revalidate) == [nil], "within the interval, a refresh reads only what is new")
        h.succeed(.newer, page([], older: nil, newer: nil))
        h.advance(600)
        h.send(.refresh)
        #expect(h.fetched.map(\.revalidate) == [.items(10)])
    }

    /// Random feeds, random changes before the walk and (in half the runs) between its requests,
    /// both kinds of paging: no item the server still has is ever removed; a quiet walk leaves
    /// the store equal to the server down to the lowest item it read, covering the window; and a
    /// quiet walk of the whole feed after any walk leaves the store equal to the server.
    @Test("property: no false deletion, none missed in the window", arguments: 0..<2000)
    func property(seed: Int) {
        var random = SeededRandomSource(seed: UInt64(seed))
        let pageSize = Int.random(in: 2...12, using: &random)
        var server = ModelServer(count: Int.random(in: 1...120, using: &random), pageSize: pageSize, paging: (Double.random(in: 0..<1, using: &random) < 0.5) ? .positional : .keyset)
        var log = mirror(of: server)
        for _ in 0..<Int.random(in: 0...(2 * pageSize), using: &random) { server.insertAtTop() }
        for _ in 0..<Int.random(in: 0...12, using: &random) where server.items.count > 1 { server.delete(at: Int.random(in: 0...(server.items.count - 1), using: &random)) }
        for _ in 0..<Int.random(in: 0...6, using: &random) { server.edit(at: Int.random(in: 0...(server.items.count - 1), using: &random)) }
        let quiet = (Double.random(in: 0..<1, using: &random) < 0.5)
        let window: RevalidationWindow = (Double.random(in: 0..<1, using: &random) < 0.3) ? .all : .items(Int.random(in: 1...(log.items.count + 10), using: &random))
        var changes = SeededRandomSource(seed: random.next())
        let snapshot = log.items.map(\.id)
        let before = Set(snapshot.map(ExactID.init))
        let (result, _) = walk(window, stored: snapshot, server: &server) { server in
            if !quiet { for _ in 0..<Int.random(in: 0...3, using: &changes) { server.mutate(&changes) } }
        }
        let context = "seed \(seed), \(server.paging), \(pageSize) per page, window \(window), quiet \(quiet)"
        guard let reading = result else { return }  // more new items than the bound: a plain refresh runs
        let outcome = log.revalidate(reading, at: Date(timeIntervalSince1970: 1))
        let after = Set(log.items.map { ExactID($0.id) })
        let onServer = Set(server.items.map { ExactID(String($0.id)) })
        let removed = before.subtracting(after)
        #expect(removed.isDisjoint(with: onServer), "removed but still on the server: \(removed.intersection(onServer)); \(context)")
        #expect(outcome.deleted == removed.count, "\(context)")
        if quiet {
            let read = Set(reading.items.map { ExactID($0.id) })
            let lowest = log.items.lastIndex { read.contains(ExactID($0.id)) && before.contains(ExactID($0.id)) }
            if reading.reachedEnd {
                #expect(log.items == server.feedItems, "\(context)")
            } else if let lowest {
                let truth = server.feedItems
                let end = try! #require(truth.firstIndex { $0.id == log.items[lowest].id }, "\(context)")
                #expect(Array(log.items[...lowest]) == Array(truth[...end]), "\(context)")
                if case .items(let count) = window {
                    // The window is covered: each of its items is gone or above the lowest read.
                    for id in snapshot.prefix(count) {
                        guard let index = log.items.firstIndex(where: { $0.id == id }) else { continue }
                        #expect(index <= lowest, "\(id) of the window lies below what the walk read; \(context)")
                    }
                }
            }
        }
        let (again, _) = walk(.all, stored: log.items.map(\.id), server: &server)
        log.revalidate(try! #require(again, "\(context)"), at: Date(timeIntervalSince1970: 2))
        #expect(log.items == server.feedItems, "a quiet walk of the whole feed leaves the store equal to the server; \(context)")
    }
}
