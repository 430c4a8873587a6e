import Foundation
import NIOCore
import NIOPosix
import SyncCore
import SyncCoordinator
import Synchronization
import Testing
import TestSupport

/// A source that, like an HTTP source, reads its answers on an event loop and tells the older
/// cursor there (``FeedSource/executor``). Pages come from a ``ScriptedSource``; what this one
/// adds is where the cursor is told, and a record, kept without any hop, of the older requests
/// started so far.
private final class LoopSource: FeedSource {
    let base: ScriptedSource
    let loop: any EventLoop
    /// The cursors of the older requests started, in order, recorded as each call begins.
    let started = Mutex<[String]>([])
    /// For each cursor told: the older requests started when the coordinator's callback returned.
    let startedWhenTold = Mutex<[String?: [String]]>([:])

    /// Older cursors this source knows before asking (as a source with a cache might): told at
    /// once, before the request's first suspension, instead of from the loop.
    let knownAtOnce: [String: String?]
    /// Breaks the promise of ``executor``: tells the cursor from a task of its own instead.
    let toldElsewhere: Bool

    init(base: ScriptedSource, loop: any EventLoop, knownAtOnce: [String: String?] = [:], toldElsewhere: Bool = false) {
        self.base = base
        self.loop = loop
        self.knownAtOnce = knownAtOnce
        self.toldElsewhere = toldElsewhere
    }

    var executor: (any SerialExecutor)? { loop.executor }

    func fetchInitial() async throws -> FeedPage { try await base.fetchInitial() }
    func fetchOlder(cursor: String) async throws -> FeedPage {
        started.withLock { $0.append(cursor) }
        return try await base.fetchOlder(cursor: cursor)
    }
    func fetchNewer(cursor: String) async throws -> FeedPage { try await base.fetchNewer(cursor: cursor) }
    func fetchOlder(cursor: String, olderCursorKnown: @escaping @Sendable (String?) -> Void) async throws -> FeedPage {
        started.withLock { $0.append(cursor) }
        if let older = knownAtOnce[cursor] {
            olderCursorKnown(older)
            return try await base.fetchOlder(cursor: cursor) { _ in }
        }
        return try await base.fetchOlder(cursor: cursor) { [self] older in
            if toldElsewhere {
                Task.detached { olderCursorKnown(older) }
                return
            }
            loop.execute {
                olderCursorKnown(older)
                let now = self.started.withLock { $0 }
                self.startedWhenTold.withLock { $0[older] = now }
            }
        }
    }
}

/// A coordinator of `source` (reading ahead, one page a commit), started, with the first page
/// and the machine's own first older page answered: the page at 17 is fetched ahead next.
private func backfillUnderway(_ source: LoopSource) async throws -> FeedCoordinator<ManualClock> {
    let feed = try await FeedCoordinator(
        feed: "home", source: source, store: InMemoryFeedStore(),
        configuration: .init(reconnectSpread: .zero, backfillDepth: 100, backfillCommitPages: 1),
        clock: ManualClock(), random: ConstantRandomSource(1), wallOrigin: origin)
    await feed.start()
    try await source.base.respond(0, page(["20", "19"], older: "19", newer: "20"))
    try await source.base.respond(1, page(["18", "17"], older: "17", newer: nil))
    return feed
}

/// Waits until the backfill ended, then expects the items 12...20 stored, newest first.
private func expectEndedHolding12To20(_ feed: FeedCoordinator<ManualClock>, sourceLocation: SourceLocation = #_sourceLocation) async throws {
    let ended = try await feed.waitFor { $0.endReached && $0.older.load == .loaded }
    #expect(ended.itemCount == 9, sourceLocation: sourceLocation)
    #expect(try await feed.items().map(\.id) == (12...20).reversed().map(String.init), sourceLocation: sourceLocation)
}

@Suite(.timeLimit(.minutes(1)))
struct SourceExecutorTests {
    @Test func onTheSourcesExecutorTheNextPageIsAskedForBeforeTheCallbackReturns() async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let scripted = ScriptedSource()
        let source = LoopSource(base: scripted, loop: group.next())
        let feed = try await backfillUnderway(source)
        #expect(try await scripted.call(2) == .init(id: 2, direction: "older", cursor: "17"))
        // Page 17's headers name 15: told on the loop, the coordinator (which runs there) has
        // started the request for 15 by the time the callback returns, with no hop between.
        try await scripted.announce(2, older: "15")
        #expect(try await scripted.call(3) == .init(id: 3, direction: "older", cursor: "15"))
        let whenTold = try await waitForRecord(source, "15")
        #expect(whenTold.last == "15", "started when the callback returned: \(whenTold)")

        try await scripted.announce(3, older: "13")
        #expect(try await scripted.call(4) == .init(id: 4, direction: "older", cursor: "13"))
        #expect(try await waitForRecord(source, "13").last == "13")
        for (id, items, older) in [(2, ["16", "15"], "15"), (3, ["14", "13"], "13")] {
            try await scripted.respond(id, page(items, older: older, newer: nil))
        }
        try await scripted.announce(4, older: nil)
        try await scripted.respond(4, page(["12"], older: nil, newer: nil))
        try await expectEndedHolding12To20(feed)
        await feed.stop()
        try await group.shutdownGracefully()
    }

    /// A source told the older cursor while the coordinator was still starting the request
    /// that it belongs to (on the coordinator's executor, before the request first suspended):
    /// the read-ahead keeps its order, so every page is asked for once and none is cancelled.
    @Test func aCursorToldBeforeTheRequestSuspendsKeepsTheReadAheadInOrder() async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let scripted = ScriptedSource()
        let source = LoopSource(base: scripted, loop: group.next(), knownAtOnce: ["17": "15", "15": "13", "13": String?.none])
        let feed = try await backfillUnderway(source)
        for (id, cursor, items, older) in [(2, "17", ["16", "15"], "15"), (3, "15", ["14", "13"], "13"), (4, "13", ["12"], nil)] {
            #expect(try await scripted.call(id) == .init(id: id, direction: "older", cursor: cursor))
            try await scripted.respond(id, page(items, older: older, newer: nil))
        }
        try await expectEndedHolding12To20(feed)
        #expect(await scripted.callCount == 5, "each page asked for once")
        #expect(await scripted.cancelledCount == 0, "nothing fetched ahead was dropped")
        await feed.stop()
        try await group.shutdownGracefully()
    }

    /// A source that names an executor and tells the cursor elsewhere breaks the coordinator's
    /// isolation: the process stops rather than run the coordinator on two threads at once.
    @Test func aCursorToldOffTheNamedExecutorStopsTheProcess() async {
        await #expect(processExitsWith: .signal(SIGILL)) {
            // The parent waits for the child however long it takes: a child that never traps
            // is ended by the alarm (SIGALRM, not SIGILL, so the test fails) instead of hanging.
            alarm(120)
            let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
            let scripted = ScriptedSource()
            let feed = try await backfillUnderway(LoopSource(base: scripted, loop: group.next(), toldElsewhere: true))
            try await scripted.announce(2, older: "15")
            // Not reached: the callback traps on its task's thread. The coordinator is used after
            // the wait, so it is not released before: a released one is told nothing.
            try await Task.sleep(for: .seconds(3600))
            await feed.stop()
        }
    }

    /// What the source recorded when `cursor` was told, once the loop has run the callback.
    private func waitForRecord(_ source: LoopSource, _ cursor: String) async throws -> [String] {
        try await waitUntil("the callback for \(cursor) has run") { source.startedWhenTold.withLock { $0[cursor] } != nil }
        return source.startedWhenTold.withLock { $0[cursor] } ?? []
    }
}
