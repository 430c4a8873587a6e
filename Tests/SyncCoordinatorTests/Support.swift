import ConnectivityPolicy
import Foundation
import SyncCore
import SyncCoordinator
import Synchronization
import Testing
import TestSupport

/// A feed source the test answers by hand: every request waits until `respond` is called, and
/// cancellation is recorded (and, unless `ignoresCancellation`, ends the request).
///
/// Every wait of the test's (for a request, for its cancellation) is bounded by real time and
/// fails naming what it waited for.
actor ScriptedSource: FeedSource {
    struct Call: Sendable, Hashable {
        var id: Int
        var direction: String
        var cursor: String?
    }

    private(set) var calls: [Call] = []
    private(set) var cancelled: Set<Int> = []
    private var waiting: [Int: CheckedContinuation<FeedPage, any Error>] = [:]
    private var answers: [Int: Result<FeedPage, any Error>] = [:]
    private var known: [Int: @Sendable (String?) -> Void] = [:]
    let ignoresCancellation: Bool
    /// What the answers so far cost on the wire, as the test declares with each answer.
    private nonisolated let received = Mutex<Int64>(0)

    nonisolated var bytesReceived: Int64 { received.withLock { $0 } }

    init(ignoresCancellation: Bool = false) {
        self.ignoresCancellation = ignoresCancellation
    }

    func fetchInitial() async throws -> FeedPage { try await call("initial", nil) }
    func fetchOlder(cursor: String) async throws -> FeedPage { try await call("older", cursor) }
    func fetchNewer(cursor: String) async throws -> FeedPage { try await call("newer", cursor) }
    /// Keeps `olderCursorKnown` for ``announce(_:older:)``; the page still waits for ``respond(_:_:)``.
    func fetchOlder(cursor: String, olderCursorKnown: @escaping @Sendable (String?) -> Void) async throws -> FeedPage {
        known[calls.count] = olderCursorKnown
        return try await call("older", cursor)
    }

    private func call(_ direction: String, _ cursor: String?) async throws -> FeedPage {
        let id = calls.count
        calls.append(Call(id: id, direction: direction, cursor: cursor))
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                if cancelled.contains(id) && !ignoresCancellation {
                    continuation.resume(throwing: CancellationError())
                } else if let answer = answers.removeValue(forKey: id) {
                    continuation.resume(with: answer)
                } else {
                    waiting[id] = continuation
                }
            }
        } onCancel: {
            Task { await self.cancel(id) }
        }
    }

    private func cancel(_ id: Int) {
        cancelled.insert(id)
        if !ignoresCancellation, let continuation = waiting.removeValue(forKey: id) {
            continuation.resume(throwing: CancellationError())
        }
    }

    /// Waits for the `index`-th request (0-based) and returns it.
    func call(_ index: Int) async throws -> Call {
        try await waitUntil("request #\(index) is made", interval: .milliseconds(1)) { calls.count > index }
        return calls[index]
    }

    /// Waits until request `id` has been cancelled.
    func waitUntilCancelled(_ id: Int) async throws {
        try await waitUntil("request #\(id) is cancelled", interval: .milliseconds(1)) { cancelled.contains(id) }
    }

    /// Answers request `id` with a page, waiting for it to be made if need be; the answer took
    /// `bytes` on the wire.
    func respond(_ id: Int, _ page: FeedPage, bytes: Int64 = 0) async throws {
        _ = try await call(id)
        received.withLock { $0 += bytes }
        try await answer(id, .success(page))
    }

    /// Tells older request `id`'s caller the page's older cursor, as a source does from the
    /// headers before the body has arrived.
    func announce(_ id: Int, older: String?) async throws {
        _ = try await call(id)
        known.removeValue(forKey: id)?(older)
    }

    /// Answers request `id` with an error, waiting for it to be made if need be.
    func fail(_ id: Int, _ error: FeedError) async throws {
        try await answer(id, .failure(error))
    }

    private func answer(_ id: Int, _ result: Result<FeedPage, any Error>) async throws {
        _ = try await call(id)
        if let continuation = waiting.removeValue(forKey: id) {
            continuation.resume(with: result)
        } else {
            answers[id] = result
        }
    }

    var callCount: Int { calls.count }
    var cancelledCount: Int { cancelled.count }
}

extension FeedCoordinator {
    /// Waits for the first state (current or later) that satisfies `predicate`; throws
    /// ``WaitTimedOut``, naming the caller's line and the state last seen, after the hang guard.
    @discardableResult
    func waitFor(
        sourceLocation: SourceLocation = #_sourceLocation, _ predicate: @escaping @Sendable (FeedState) -> Bool
    ) async throws -> FeedState {
        do {
            return try await withHangGuard("feed '\(feed)' to reach the state awaited at \(sourceLocation)") {
                for await state in await self.states() where predicate(state) { return state }
                throw CancellationError()
            }
        } catch let error as WaitTimedOut {
            throw WaitTimedOut(description: "\(error.description); its state: \(state)")
        }
    }
}

func item(_ id: String) -> FeedItem { FeedItem(id: id, payload: Data("{\"id\":\"\(id)\"}".utf8)) }

func page(_ ids: [String], older: String?, newer: String?) -> FeedPage {
    FeedPage(items: ids.map(item), olderCursor: older, newerCursor: newer)
}

let origin = Date(timeIntervalSinceReferenceDate: 700_000_000)
let online = Verdict.online(OnlinePath(link: "eth0", linkIndex: 2, family: .ipv4, route: IPPrefix("0.0.0.0/0")!, gateway: IPAddress("192.0.2.1")))
let noCarrier = Verdict.offline(.noCarrier)
let transient = FeedError(.httpStatus(503), "service unavailable")

/// A store whose commits wait until the test lets each one through, so a test can act while a
/// page is being committed.
///
/// With `groupsCommits`, a commit of several pages is one transaction held as one (as the SQLite
/// store's is); without, it is the protocol's default, one held commit per page.
actor GatedStore: FeedStore {
    private let inner = InMemoryFeedStore()
    private let groupsCommits: Bool
    private var held: [CheckedContinuation<Void, Never>] = []
    private(set) var commitsStarted = 0
    /// Pages in each transaction, in order.
    private(set) var transactionSizes: [Int] = []

    init(groupsCommits: Bool = false) {
        self.groupsCommits = groupsCommits
    }

    func load(feed: String) async throws -> PersistedFeed { await inner.load(feed: feed) }

    func commit(feed: String, direction: Direction, page: FeedPage, at date: Date) async throws -> CommitOutcome {
        await hold(pages: 1)
        return await inner.commit(feed: feed, direction: direction, page: page, at: date)
    }

    func commit(feed: String, direction: Direction, pages: [FeedPage], at date: Date) async throws -> [CommitOutcome] {
        guard groupsCommits else {
            var outcomes: [CommitOutcome] = []
            for page in pages { outcomes.append(try await commit(feed: feed, direction: direction, page: page, at: date)) }
            return outcomes
        }
        await hold(pages: pages.count)
        var outcomes: [CommitOutcome] = []
        for page in pages { outcomes.append(await inner.commit(feed: feed, direction: direction, page: page, at: date)) }
        return outcomes
    }

    func revalidate(feed: String, walk: RevalidationResult, at date: Date) async throws -> CommitOutcome {
        await hold(pages: 1)
        return await inner.revalidate(feed: feed, walk: walk, at: date)
    }

    private func hold(pages: Int) async {
        commitsStarted += 1
        transactionSizes.append(pages)
        await withCheckedContinuation { held.append($0) }
    }

    func items(feed: String, offset: Int, limit: Int) async throws -> [FeedItem] {
        await inner.items(feed: feed, offset: offset, limit: limit)
    }

    func meteredUsage(feed: String) async throws -> MeteredUsage? { await inner.meteredUsage(feed: feed) }

    func recordMeteredUsage(feed: String, _ usage: MeteredUsage) async throws {
        await inner.recordMeteredUsage(feed: feed, usage)
    }

    /// Waits until the `count`-th commit (1-based) is being held.
    func waitUntilHolding(commit count: Int) async throws {
        try await waitUntil("commit #\(count) is held", interval: .milliseconds(1)) { commitsStarted >= count }
    }

    /// Lets the oldest held commit go through.
    func release() {
        if !held.isEmpty { held.removeFirst().resume() }
    }

    /// Lets the commits numbered `commits` (1-based) through one after another: waits until each
    /// is held, then releases it, so that each is let go only once it has started.
    func releaseCommits(_ commits: ClosedRange<Int>) async throws {
        for commit in commits {
            try await waitUntilHolding(commit: commit)
            release()
        }
    }
}
