import Foundation
@_spi(StateMachine) import SyncCore
import Testing

private typealias Machine = ReadAheadMachine<ContinuousClock.Instant>

/// Every instant of these tests is an offset from this one: the machine never reads a clock.
private let t0 = ContinuousClock.now

/// The older page at `cursor`: the `items` items just below it, its older cursor the last of
/// them (none below 1). The pages of these tests chain down: 21 → 19 → 17 …
private func pageAt(_ cursor: Int, items: Int = 2) -> FeedPage {
    let ids = (1...items).map { cursor - $0 }.filter { $0 > 0 }
    return page(ids.map(String.init), older: ids.last.flatMap { $0 > 1 ? String($0) : nil }, newer: nil)
}

/// An outcome the store might report for one page of a group.
private func outcome(_ index: Int, items: Int = 2) -> CommitOutcome {
    CommitOutcome(feed: .fresh, pageItemCount: items, inserted: index)
}

/// The feed machine's side, reduced to its depth: the backfill goes on while the items it has
/// counted (`stored`) and those pending stay under `depth`.
private struct Depth: BackfillDecision {
    var configuration: SyncConfiguration
    var depth = 100
    var stored = 0

    func readAheadCursor(after olderCursor: String?, pendingItems: Int) -> String? {
        guard let olderCursor, stored + pendingItems < depth else { return nil }
        return olderCursor
    }
}

/// One event of a table row, with small integers for cursors and ids.
private enum Step: Sendable {
    case received(Int, Direction, next: Int?)
    case known(Int?, of: Int)
    case arrived(Int, id: Int)
    case failed(id: Int, retryAfter: Duration? = nil)
    case request(Int?)
    case tookCommitted(Int)
    case requestEnded(Int)
    case group(after: Int, next: Int?, Direction)
    case committed(Direction, ahead: [Int], outcomes: Int)
    case handled(Direction, continued: Bool)
    case loadFailed(Direction)
    case cancelled(Direction)
    case gather(after: Int, next: Int)
    case lookAgain
    case delayElapsed
    case elapse(Duration)
    case stop
}

/// What one step gave back.
private enum Outcome: Sendable, Equatable, CustomStringConvertible {
    case actions([Machine.Action])
    case answer(Machine.Answer, [Machine.Action])
    case gathering(Machine.Gathering)
    case group([String], [Machine.Action])

    var description: String {
        switch self {
        case .actions(let actions): "\(actions)"
        case .answer(let answer, let actions): "\(answer) \(actions)"
        case .gathering(let gathering): "\(gathering)"
        case .group(let cursors, let actions): "group \(cursors) \(actions)"
        }
    }
}

private func fetch(_ id: Int, _ cursor: Int) -> Machine.Action { .fetch(ReadAheadID(id), cursor: String(cursor)) }
private func cancel(_ id: Int) -> Machine.Action { .cancel(ReadAheadID(id)) }
private func forget(_ id: Int) -> Machine.Action { .forget(ReadAheadID(id)) }

/// Runs steps against a machine as a driver would.
private struct Script {
    var machine = Machine()
    var backfill: Depth
    var now = t0

    mutating func run(_ step: Step) -> Outcome {
        switch step {
        case .received(let cursor, let direction, let next):
            return .actions(machine.received(pageAt(cursor), in: direction, next: next.map(String.init)))
        case .known(let older, let cursor):
            return .actions(machine.known(older.map(String.init), of: String(cursor), backfill: backfill, now: now))
        case .arrived(let cursor, let id):
            return .actions(machine.arrived(pageAt(cursor), cursor: String(cursor), id: ReadAheadID(id), backfill: backfill, now: now))
        case .failed(let id, let retryAfter):
            return .actions(machine.failed(ReadAheadID(id), retryAfter: retryAfter, now: now))
        case .request(let cursor):
            let (answer, actions) = machine.request(older: cursor.map(String.init), backfill: backfill, now: now)
            return .answer(answer, actions)
        case .tookCommitted(let cursor):
            machine.tookCommitted(String(cursor))
            return .actions([])
        case .requestEnded(let cursor):
            machine.requestEnded(older: String(cursor))
            return .actions([])
        case .group(let cursor, let next, let direction):
            let (ahead, actions) = machine.group(after: pageAt(cursor), next: next.map(String.init), in: direction, backfill: backfill, now: now)
            return .group(ahead.map(\.cursor), actions)
        case .committed(let direction, let ahead, let count):
            return .actions(machine.committed(direction, ahead: ahead.map(String.init), outcomes: (0..<count).map { outcome($0) }))
        case .handled(let direction, let continued):
            return .actions(machine.handled(direction, continued: continued))
        case .loadFailed(let direction):
            return .actions(machine.loadFailed(direction))
        case .cancelled(let direction):
            return .actions(machine.requestCancelled(direction))
        case .gather(let cursor, let next):
            return .gathering(machine.gather(after: String(next), committing: pageAt(cursor), backfill: backfill, now: now))
        case .lookAgain:
            return .gathering(machine.lookAgain(now: now))
        case .delayElapsed:
            return .actions(machine.commitDelayElapsed())
        case .elapse(let duration):
            now = now.advanced(by: duration)
            return .actions([])
        case .stop:
            return .actions(machine.stop())
        }
    }
}

/// One transition: the steps before it set the scene, the last one is the transition, and
/// `expect` is what it gives back; `cursors` and `pending` are the run and the pending items after.
private struct Row: Sendable, CustomTestStringConvertible {
    let name: String
    var configuration = SyncConfiguration(backfillDepth: 100, backfillCommitPages: 1)
    var depth = 100
    var stored = 0
    let steps: [Step]
    let expect: Outcome
    var cursors: [Int]?
    var pending: Int?

    var testDescription: String { name }
}

/// Starts a backfill from the first page (21): its next page, at 19, is fetched as #0.
private let started: [Step] = [.received(21, .initial, next: 19)]
/// An older page (23) about to be committed: its next page, at 21, is fetched as #0.
private let olderStarted: [Step] = [.received(23, .older, next: 21)]
private let grouping = SyncConfiguration(backfillDepth: 100, backfillCommitPages: 4, backfillCommitDelay: .milliseconds(20))

private let rows: [Row] = [
    // Starting and extending the run.
    Row(name: "a commit with a next page starts the run there", steps: started, expect: .actions([fetch(0, 19)]), cursors: [19], pending: 2),
    Row(name: "a commit without a next page fetches nothing", steps: [.received(21, .initial, next: nil)], expect: .actions([]), cursors: []),
    Row(name: "a commit whose next the run starts at fetches nothing more", steps: started + [.received(21, .initial, next: 19)], expect: .actions([]), cursors: [19]),
    Row(name: "a commit with another next cancels the run and starts there", steps: started + [.received(31, .initial, next: 29)], expect: .actions([cancel(0), fetch(1, 29)]), cursors: [29]),
    Row(name: "an older cursor known from the headers extends the run", steps: started + [.known(17, of: 19)], expect: .actions([fetch(1, 17)]), cursors: [19, 17], pending: 4),
    Row(name: "a cursor known of a page that is no longer the newest is ignored", steps: started + [.known(17, of: 19), .known(15, of: 19)], expect: .actions([]), cursors: [19, 17]),
    Row(name: "the arrival of a page that is not the newest extends nothing", steps: started + [.known(17, of: 19), .arrived(19, id: 0)], expect: .actions([]), cursors: [19, 17], pending: 4),
    Row(name: "the feed's end extends nothing", steps: started + [.known(nil, of: 19)], expect: .actions([]), cursors: [19]),
    Row(name: "the newest page's arrival extends the run", steps: started + [.arrived(19, id: 0)], expect: .actions([fetch(1, 17)]), cursors: [19, 17], pending: 4),
    Row(name: "an arrival counts its items instead of the largest page", steps: started + [.known(17, of: 19), .arrived(17, id: 1)], expect: .actions([fetch(2, 15)]), cursors: [19, 17, 15], pending: 6),
    Row(
        name: "the run stops at its pages", configuration: .init(backfillDepth: 100, readAheadPages: 2, backfillCommitPages: 1),
        steps: started + [.known(17, of: 19), .known(15, of: 17)], expect: .actions([]), cursors: [19, 17]),
    Row(
        name: "the run stops at the bytes of its arrived pages", configuration: .init(backfillDepth: 100, readAheadBytes: 22, backfillCommitPages: 1),
        steps: started + [.arrived(19, id: 0)], expect: .actions([]), cursors: [19]),
    Row(
        name: "the run goes on below its bytes", configuration: .init(backfillDepth: 100, readAheadBytes: 23, backfillCommitPages: 1),
        steps: started + [.arrived(19, id: 0)], expect: .actions([fetch(1, 17)]), cursors: [19, 17]),
    Row(name: "the run stops at the depth", depth: 6, stored: 2, steps: started + [.known(17, of: 19), .known(15, of: 17)], expect: .actions([]), cursors: [19, 17], pending: 4),
    Row(name: "the run goes on below the depth", depth: 7, stored: 2, steps: started + [.known(17, of: 19), .known(15, of: 17)], expect: .actions([fetch(2, 15)]), cursors: [19, 17, 15]),
    Row(
        name: "a Retry-After holds the run back", steps: started + [.known(17, of: 19), .failed(id: 1, retryAfter: .seconds(10)), .elapse(.seconds(9)), .known(15, of: 17)],
        expect: .actions([]), cursors: [19, 17]),
    Row(
        name: "the run goes on once the Retry-After passed", steps: started + [.known(17, of: 19), .failed(id: 1, retryAfter: .seconds(10)), .elapse(.seconds(10)), .known(15, of: 17)],
        expect: .actions([fetch(2, 15)]), cursors: [19, 17, 15]),

    // The feed machine's older requests.
    Row(name: "the head answers the request for its cursor", steps: started + [.request(19)], expect: .answer(.fetchedAhead(ReadAheadID(0)), []), cursors: [], pending: 0),
    Row(
        name: "taking the head makes room for one more", configuration: .init(backfillDepth: 100, readAheadPages: 2, backfillCommitPages: 1),
        steps: started + [.known(17, of: 19), .known(15, of: 17), .request(19)], expect: .answer(.fetchedAhead(ReadAheadID(0)), [fetch(2, 15)]), cursors: [17, 15]),
    Row(
        name: "a request for another cursor cancels the run", steps: started + [.known(17, of: 19), .request(25)],
        expect: .answer(.request(afterDraining: []), [cancel(0), cancel(1)]), cursors: [], pending: 0),
    Row(
        name: "a taken page that arrived counts until its request ends", steps: started + [.arrived(19, id: 0), .request(19)],
        expect: .answer(.fetchedAhead(ReadAheadID(0)), []), cursors: [17], pending: 4),
    Row(
        name: "a page a request took goes on from its arrival while it is the newest", steps: started + [.request(19), .arrived(19, id: 0)],
        expect: .actions([fetch(1, 17)]), cursors: [17], pending: 4),
    Row(
        name: "a taken page no longer counts once its request ended", steps: started + [.arrived(19, id: 0), .request(19), .requestEnded(19)],
        expect: .actions([]), cursors: [17], pending: 2),
    Row(
        name: "an outcome committed ahead answers its request",
        steps: olderStarted + [.arrived(21, id: 0), .group(after: 23, next: 21, .older), .committed(.older, ahead: [21], outcomes: 2), .request(21)],
        expect: .answer(.committed(outcome(1)), []), cursors: [19], pending: 4),
    Row(
        name: "an outcome committed ahead no longer counts once taken",
        steps: olderStarted + [.arrived(21, id: 0), .group(after: 23, next: 21, .older), .committed(.older, ahead: [21], outcomes: 2), .request(21), .tookCommitted(21)],
        expect: .actions([]), cursors: [19], pending: 2),
    Row(
        name: "a request for another cursor forgets what was committed ahead",
        steps: olderStarted + [.arrived(21, id: 0), .group(after: 23, next: 21, .older), .committed(.older, ahead: [21], outcomes: 2), .request(19), .request(21)],
        expect: .answer(.request(afterDraining: []), []), cursors: [], pending: 0),

    // Failures and going offline.
    Row(
        name: "a failed older load lets go of what finished and leaves the rest to finish",
        steps: olderStarted + [.known(19, of: 21), .arrived(21, id: 0), .loadFailed(.older)], expect: .actions([forget(0)]), cursors: [], pending: 0),
    Row(
        name: "the retry waits for what was left to finish",
        steps: olderStarted + [.known(19, of: 21), .arrived(21, id: 0), .loadFailed(.older), .request(23)],
        expect: .answer(.request(afterDraining: [ReadAheadID(1)]), [])),
    Row(
        name: "a fetch left to finish is let go when it ends",
        steps: olderStarted + [.known(19, of: 21), .loadFailed(.older), .arrived(19, id: 1)], expect: .actions([forget(1)]), cursors: [], pending: 0),
    Row(
        name: "a failed fetch left to finish is let go too",
        steps: olderStarted + [.loadFailed(.older), .failed(id: 0)], expect: .actions([forget(0)])),
    Row(name: "a newer load's failure leaves the run", steps: olderStarted + [.loadFailed(.newer)], expect: .actions([]), cursors: [21]),
    Row(name: "an older request cancelled cancels the run", steps: started + [.cancelled(.older)], expect: .actions([cancel(0)]), cursors: []),
    Row(name: "the request whose commit started the run, cancelled, cancels it", steps: started + [.cancelled(.initial)], expect: .actions([cancel(0)]), cursors: []),
    Row(name: "a newer request cancelled leaves an older run", steps: olderStarted + [.cancelled(.newer)], expect: .actions([]), cursors: [21]),

    // Commits.
    Row(
        name: "the pages arrived behind an older page are grouped in cursor order",
        steps: olderStarted + [.arrived(21, id: 0), .arrived(19, id: 1), .group(after: 23, next: 21, .older)],
        expect: .group(["21", "19"], [forget(0), forget(1)]), cursors: [17], pending: 8),
    Row(
        name: "grouping stops at a page on its way",
        steps: olderStarted + [.arrived(21, id: 0), .known(17, of: 19), .arrived(17, id: 2), .group(after: 23, next: 21, .older)],
        expect: .group(["21"], [forget(0)]), cursors: [19, 17, 15]),
    Row(
        name: "grouping takes nothing where the backfill would stop", depth: 8,
        steps: olderStarted + [.arrived(21, id: 0), .arrived(19, id: 1), .group(after: 23, next: 21, .older)],
        expect: .group([], []), cursors: [21, 19, 17]),
    Row(
        name: "grouping takes nothing when the next page is elsewhere",
        steps: olderStarted + [.arrived(21, id: 0), .group(after: 23, next: 25, .older)], expect: .group([], []), cursors: [21, 19], pending: 6),
    Row(
        name: "a newer page takes no pages", steps: olderStarted + [.arrived(21, id: 0), .group(after: 41, next: nil, .newer)],
        expect: .group([], []), cursors: [21, 19], pending: 6),
    Row(
        name: "a grouped commit makes room for the run",
        configuration: .init(backfillDepth: 100, readAheadPages: 2, backfillCommitPages: 1),
        steps: olderStarted + [.arrived(21, id: 0), .arrived(19, id: 1), .group(after: 23, next: 21, .older)],
        expect: .group(["21", "19"], [forget(0), forget(1), fetch(2, 17)]), cursors: [17]),
    Row(
        name: "a commit that stopped part-way cancels the run",
        steps: olderStarted + [.arrived(21, id: 0), .group(after: 23, next: 21, .older), .committed(.older, ahead: [21], outcomes: 1)],
        expect: .actions([cancel(1)]), cursors: [], pending: 0),
    Row(
        name: "a failed commit cancels the run",
        steps: olderStarted + [.arrived(21, id: 0), .group(after: 23, next: 21, .older), .committed(.older, ahead: [21], outcomes: 0)],
        expect: .actions([cancel(1)]), cursors: []),
    Row(
        name: "a whole commit keeps the run and counts what it committed ahead",
        steps: olderStarted + [.arrived(21, id: 0), .group(after: 23, next: 21, .older), .committed(.older, ahead: [21], outcomes: 2)],
        expect: .actions([]), cursors: [19], pending: 4),
    Row(name: "a failed newer commit leaves an older run", steps: olderStarted + [.committed(.newer, ahead: [], outcomes: 0)], expect: .actions([]), cursors: [21]),
    Row(name: "an older commit not continued ends its run", steps: olderStarted + [.handled(.older, continued: false)], expect: .actions([cancel(0)]), cursors: []),
    Row(name: "a continued commit keeps its run", steps: olderStarted + [.handled(.older, continued: true)], expect: .actions([]), cursors: [21]),
    Row(name: "a newer commit does not end an older run", steps: olderStarted + [.handled(.newer, continued: false)], expect: .actions([]), cursors: [21]),

    // A commit's wait for the pages behind it.
    Row(
        name: "a page waits for those behind it until the commit delay", configuration: grouping,
        steps: olderStarted + [.gather(after: 23, next: 21)], expect: .gathering(.waitUntil(t0.advanced(by: .milliseconds(20)))), pending: 4),
    Row(name: "a page does not wait when commits are not grouped", steps: olderStarted + [.gather(after: 23, next: 21)], expect: .gathering(.commit), pending: 2),
    Row(
        name: "a page does not wait when the run went elsewhere", configuration: grouping,
        steps: olderStarted + [.gather(after: 23, next: 25)], expect: .gathering(.commit)),
    Row(
        name: "an arrival wakes the waiting commit", configuration: grouping,
        steps: olderStarted + [.gather(after: 23, next: 21), .arrived(21, id: 0)], expect: .actions([fetch(1, 19), .wake])),
    Row(
        name: "it goes on waiting while wanted pages are on their way", configuration: grouping,
        steps: olderStarted + [.gather(after: 23, next: 21), .arrived(21, id: 0), .lookAgain], expect: .gathering(.keepWaiting)),
    Row(
        name: "it commits once enough arrived", configuration: grouping,
        steps: olderStarted + [.gather(after: 23, next: 21), .arrived(21, id: 0), .arrived(19, id: 1), .arrived(17, id: 2), .lookAgain],
        expect: .gathering(.commit), pending: 8),
    Row(
        name: "it commits once no page is on its way", configuration: grouping, depth: 4,
        steps: olderStarted + [.gather(after: 23, next: 21), .arrived(21, id: 0), .lookAgain], expect: .gathering(.commit), cursors: [21]),
    Row(
        name: "a failure behind it wakes it", configuration: grouping,
        steps: olderStarted + [.gather(after: 23, next: 21), .failed(id: 0)], expect: .actions([.wake])),
    Row(
        name: "it commits after a failure behind it", configuration: grouping,
        steps: olderStarted + [.gather(after: 23, next: 21), .failed(id: 0), .lookAgain], expect: .gathering(.commit)),
    Row(
        name: "it goes on waiting before the deadline", configuration: grouping,
        steps: olderStarted + [.gather(after: 23, next: 21), .elapse(.milliseconds(19)), .lookAgain], expect: .gathering(.keepWaiting)),
    Row(
        name: "the deadline's timer wakes it", configuration: grouping,
        steps: olderStarted + [.gather(after: 23, next: 21), .elapse(.milliseconds(20)), .delayElapsed], expect: .actions([.wake])),
    Row(
        name: "it commits at the deadline", configuration: grouping,
        steps: olderStarted + [.gather(after: 23, next: 21), .elapse(.milliseconds(20)), .lookAgain], expect: .gathering(.commit), pending: 2),
    Row(
        name: "the run cancelled wakes it", configuration: grouping,
        steps: olderStarted + [.gather(after: 23, next: 21), .cancelled(.older)], expect: .actions([cancel(0), .wake])),
    Row(name: "a timer with nothing waiting does nothing", steps: olderStarted + [.delayElapsed], expect: .actions([])),

    // Stopping.
    Row(name: "stop cancels the run", steps: started + [.known(17, of: 19), .stop], expect: .actions([cancel(0), cancel(1)]), cursors: []),
    Row(
        name: "stop cancels what was left to finish", steps: olderStarted + [.loadFailed(.older), .received(31, .initial, next: 29), .stop],
        expect: .actions([cancel(1), cancel(0)]), cursors: []),
    Row(name: "stop wakes a waiting commit", configuration: grouping, steps: olderStarted + [.gather(after: 23, next: 21), .stop], expect: .actions([cancel(0), .wake])),
    Row(name: "nothing extends the run after stop", steps: started + [.stop, .known(17, of: 19)], expect: .actions([]), cursors: []),
    Row(name: "a page received after stop fetches nothing", steps: started + [.stop, .received(31, .initial, next: 29)], expect: .actions([]), cursors: []),
    Row(name: "nothing arrives after stop", steps: started + [.stop, .arrived(19, id: 0)], expect: .actions([]), cursors: [], pending: 0),
]

@Suite struct ReadAheadMachineTests {
    @Test(arguments: rows)
    fileprivate func transition(_ row: Row) {
        var script = Script(backfill: Depth(configuration: row.configuration, depth: row.depth, stored: row.stored))
        var last: Outcome?
        for step in row.steps { last = script.run(step) }
        #expect(last == row.expect)
        if let cursors = row.cursors { #expect(script.machine.cursors == cursors.map(String.init), "the run") }
        if let pending = row.pending { #expect(script.machine.pendingItems == pending, "pending items") }
    }
}

// MARK: Random sequences

/// A backfill driven by random events against a model of what the read-ahead must hold: a feed
/// of pages chained down from cursor 200 (one to three items each), a feed machine reduced to its
/// older lane and its depth, a store that may commit part of a group or fail, and a driver that
/// holds each fetch the machine starts until it says to cancel it or let it go.
private struct World {
    /// A page fetched ahead, as the driver and the model see it.
    struct Fetch {
        let id: ReadAheadID
        let cursor: String
        /// Its page, once it arrived while in the run.
        var page: FeedPage?
        /// It answered (a page or a failure).
        var finished = false
        /// Its older cursor was told.
        var told = false
    }

    /// The feed machine's older lane.
    enum Lane {
        /// No older request; it resumes at this cursor when online, or the backfill ended (`nil`).
        case idle(String?)
        /// A request at `cursor`, answered as the read-ahead said.
        case waiting(cursor: String, answer: Machine.Answer)
        /// A page at `cursor` waiting for the pages behind it.
        case gathering(cursor: String, page: FeedPage, next: String, deadline: ContinuousClock.Instant?)
        /// A page at `cursor` and those taken behind it, being committed.
        case committing(cursor: String, page: FeedPage, next: String?, ahead: [Machine.Taken])
    }

    var rng: SeededRandomSource
    var machine = Machine()
    var backfill: Depth
    var now = t0
    let seed: UInt64
    var lane = Lane.idle(nil)
    var offline = false
    var stopped = false

    // The model, kept from the actions alone and the rules of the driver.
    var run: [Fetch] = []
    var draining: [ReadAheadID: Fetch] = [:]
    /// The fetch a request took, until the request ends.
    var taken: Fetch?
    var cancelledUnreported: [ReadAheadID: String] = [:]
    var committing: [Direction: Int] = [:]
    var precommitted: [String: CommitOutcome] = [:]
    var lastID = -1
    var woken = false
    /// A fetch failed while a commit waited: the wait must end.
    var failedWhileGathering = false
    /// Cursors whose pages were committed.
    var committed: Set<String> = []
    let largest = 3

    init(seed: UInt64) {
        self.seed = seed
        var rng = SeededRandomSource(seed: seed)
        let configuration = SyncConfiguration(
            backfillDepth: 1000, readAheadPages: Int.random(in: 1...6, using: &rng), readAheadBytes: Int.random(in: 10...80, using: &rng),
            backfillCommitPages: Int.random(in: 1...4, using: &rng), backfillCommitDelay: (Double.random(in: 0..<1, using: &rng) < 0.7) ? .milliseconds(20) : .zero)
        backfill = Depth(configuration: configuration, depth: Int.random(in: 8...120, using: &rng), stored: 0)
        self.rng = rng
    }

    /// Items of the page at `cursor`: one to three, the largest first so that a page on its way
    /// is counted as three from the start.
    func page(at cursor: String) -> FeedPage {
        let top = Int(cursor)!
        let count = top == 201 ? largest : 1 + Int((UInt64(top) &* 2_654_435_761 &+ seed) % 3)
        return pageAt(top, items: count)
    }

    /// True with `probability`, drawn from the world's seed.
    mutating func chance(_ probability: Double) -> Bool { Double.random(in: 0..<1, using: &rng) < probability }

    // MARK: Steps

    mutating func begin() {
        let first = page(at: "201")
        let next = first.olderCursor!
        absorb(machine.received(first, in: .initial, next: next), step: "received first")
        let (ahead, actions) = machine.group(after: first, next: next, in: .initial, backfill: backfill, now: now)
        #expect(ahead.isEmpty)
        absorb(actions, step: "group first")
        absorb(machine.committed(.initial, ahead: [], outcomes: [outcome(0, items: first.items.count)]), step: "committed first")
        backfill.stored = first.items.count
        ask(next)
        absorb(machine.handled(.initial, continued: true), step: "handled first")
    }

    /// One random step.
    mutating func step() {
        switch Int.random(in: 0...11, using: &rng) {
        case 0, 1: tell()
        case 2, 3, 4: deliver()
        case 5: answer()
        case 6: gatherAgain()
        case 7: commitDone()
        case 8: now = now.advanced(by: .milliseconds(Int.random(in: 0...(chance(0.1) ? 3000 : 25), using: &rng)))
        case 9: if chance(0.3) { goOffline() } else { comeBack() }
        case 10: commitNewer()
        default: reportCancelled()
        }
    }

    /// A fetch fails: a commit waiting for the pages behind it must then end its wait.
    mutating func fail(_ id: ReadAheadID, retryAfter: Duration?, now: ContinuousClock.Instant) -> [Machine.Action] {
        if case .gathering = lane { failedWhileGathering = true }
        return machine.failed(id, retryAfter: retryAfter, now: now)
    }

    /// The headers of a page on its way name its older cursor.
    mutating func tell() {
        var candidates = run.filter { !$0.told && !$0.finished }.map(\.id)
        if let taken, !taken.told, !taken.finished { candidates.append(taken.id) }
        guard !candidates.isEmpty else { return }
        let id = candidates.randomElement(using: &rng)!
        let cursor = (run.first { $0.id == id } ?? taken)!.cursor
        if let index = run.firstIndex(where: { $0.id == id }) { run[index].told = true } else { taken?.told = true }
        absorb(machine.known(page(at: cursor).olderCursor, of: cursor, backfill: backfill, now: now), step: "known \(cursor)")
    }

    /// A page fetched ahead arrives or fails: one in the run, one left to finish, or the one a
    /// request took (whose request then ends).
    mutating func deliver() {
        var candidates = run.filter { !$0.finished }.map(\.id) + draining.values.filter { !$0.finished }.map(\.id)
        if let taken, !taken.finished { candidates.append(taken.id) }
        guard !candidates.isEmpty else { return }
        let id = candidates.randomElement(using: &rng)!
        let fails = chance(0.12)
        if let index = run.firstIndex(where: { $0.id == id }) {
            let cursor = run[index].cursor
            run[index].finished = true
            if fails {
                absorb(fail(id, retryAfter: chance(0.3) ? .seconds(1) : nil, now: now), step: "failed \(cursor)")
            } else {
                run[index].page = page(at: cursor)
                absorb(machine.arrived(page(at: cursor), cursor: cursor, id: id, backfill: backfill, now: now), step: "arrived \(cursor)")
            }
        } else if let fetch = draining[id] {
            draining[id]?.finished = true
            let actions = fails
                ? fail(id, retryAfter: chance(0.5) ? .seconds(2) : nil, now: now)
                : machine.arrived(page(at: fetch.cursor), cursor: fetch.cursor, id: id, backfill: backfill, now: now)
            #expect(actions.contains(.forget(id)), "a fetch left to finish is let go when it ends (seed \(seed))")
            absorb(actions, step: "drained \(fetch.cursor)")
        } else if let fetch = taken {
            guard case .waiting(let cursor, .fetchedAhead(id)) = lane else { Issue.record("a taken fetch without its request"); return }
            taken?.finished = true
            if fails {
                absorb(fail(id, retryAfter: nil, now: now), step: "taken failed \(cursor)")
                requestFailed(cursor)
            } else {
                absorb(machine.arrived(page(at: fetch.cursor), cursor: fetch.cursor, id: id, backfill: backfill, now: now), step: "taken arrived \(cursor)")
                requestAnswered(cursor, page(at: cursor))
            }
        }
    }

    /// The older request is answered, when what it waits for is there.
    mutating func answer() {
        guard case .waiting(let cursor, let answer) = lane, !offline else { return }
        switch answer {
        case .committed(let outcome):
            machine.tookCommitted(cursor)
            precommitted[cursor] = nil
            backfill.stored += outcome.pageItemCount
            continueAfterCommit(next: page(at: cursor).olderCursor, in: .older)
        case .fetchedAhead:
            // Answered once the fetch it took ends (deliver).
            guard let taken, taken.finished else { return }
            if taken.page != nil { requestAnswered(cursor, page(at: cursor)) } else { requestFailed(cursor) }
        case .request(let ids):
            guard ids.allSatisfy({ draining[$0]?.finished ?? true }) else { return }
            if let notBefore = machine.olderNotBefore, now < notBefore { now = notBefore }
            if chance(0.1) { requestFailed(cursor) } else { requestAnswered(cursor, page(at: cursor)) }
        }
    }

    /// The waiting commit looks again after a wake, or its timer fires.
    mutating func gatherAgain() {
        guard case .gathering(let cursor, let page, let next, let deadline) = lane else { return }
        if !woken, let deadline, now >= deadline {
            #expect(machine.commitDelayElapsed() == [.wake], "the timer wakes the waiting commit (seed \(seed))")
            woken = true
        }
        guard woken else { return }
        woken = false
        let mustEnd = failedWhileGathering || deadline.map { now >= $0 } ?? true
        let look = machine.lookAgain(now: now)
        #expect(look == .commit || !mustEnd, "a wait outlived its deadline or a failure behind it (seed \(seed))")
        switch look {
        case .commit:
            committing[.older] = nil
            groupAndCommit(cursor, page, next: next)
        case .keepWaiting: break
        case .waitUntil: Issue.record("a second timer for one wait (seed \(seed))")
        }
    }

    /// The store ends the commit under way: whole, part of it, or failed.
    mutating func commitDone() {
        guard case .committing(let cursor, let page, let next, let ahead) = lane else { return }
        let count = chance(0.1) ? 0 : chance(0.15) ? Int.random(in: 1...(ahead.count + 1), using: &rng) : ahead.count + 1
        let outcomes = ([page] + ahead.map(\.page)).prefix(count).enumerated().map { outcome($0.offset, items: $0.element.items.count) }
        absorb(machine.committed(.older, ahead: ahead.map(\.cursor), outcomes: outcomes), step: "committed \(cursor)")
        committing[.older] = nil
        for (taken, outcome) in zip(ahead, outcomes.dropFirst()) { precommitted[taken.cursor] = outcome }
        for committedCursor in ([cursor] + ahead.map(\.cursor)).prefix(count) {
            #expect(committed.insert(committedCursor).inserted, "the page at \(committedCursor) committed twice (seed \(seed))")
        }
        guard count > 0 else {
            lane = .idle(cursor)
            return
        }
        backfill.stored += page.items.count
        if offline {
            // The commit landed, but the request was cancelled: the feed machine goes on once back.
            absorb(machine.handled(.older, continued: false), step: "handled offline")
            lane = .idle(next)
        } else {
            continueAfterCommit(next: next, in: .older)
        }
    }

    mutating func goOffline() {
        guard !offline else { return }
        offline = true
        absorb(machine.requestCancelled(.newer), step: "newer cancelled")
        absorb(machine.requestCancelled(.older), step: "older cancelled")
        #expect(machine.cursors.isEmpty, "going offline cancels the run (seed \(seed))")
        switch lane {
        case .waiting(let cursor, let answer):
            // The request is cancelled: a fetch it took fails with it, and the request ends
            // unanswered (one answered from a commit ahead never started).
            if case .fetchedAhead(let id) = answer, let fetch = taken, !fetch.finished {
                absorb(fail(id, retryAfter: nil, now: now), step: "taken cancelled")
            }
            if case .committed = answer {} else { machine.requestEnded(older: cursor) }
            taken = nil
            lane = .idle(cursor)
        case .gathering(let cursor, _, _, _):
            #expect(woken, "going offline wakes the waiting commit (seed \(seed))")
            woken = false
            #expect(machine.lookAgain(now: now) == .commit)
            committing[.older] = nil
            lane = .idle(cursor)
        case .idle, .committing: break
        }
    }

    /// Back online, or a retry's backoff ended: the older lane asks again where it stopped.
    mutating func comeBack() {
        offline = false
        guard case .idle(let cursor?) = lane else { return }
        guard backfill.readAheadCursor(after: cursor, pendingItems: 0) != nil else {
            lane = .idle(nil)
            return
        }
        ask(cursor)
    }

    /// A newer page is committed meanwhile: it must not disturb the older run.
    mutating func commitNewer() {
        guard !offline else { return }
        let newer = pageAt(500, items: 2)
        let before = machine.cursors
        absorb(machine.received(newer, in: .newer, next: nil), step: "received newer")
        let (ahead, actions) = machine.group(after: newer, next: nil, in: .newer, backfill: backfill, now: now)
        #expect(ahead.isEmpty)
        absorb(actions, step: "group newer")
        absorb(machine.committed(.newer, ahead: [], outcomes: [outcome(0)]), step: "committed newer")
        absorb(machine.handled(.newer, continued: false), step: "handled newer")
        #expect(machine.cursors == before, "a newer commit leaves the older run (seed \(seed))")
    }

    /// A cancelled fetch reports its cancellation.
    mutating func reportCancelled() {
        guard let (id, cursor) = cancelledUnreported.first else { return }
        cancelledUnreported[id] = nil
        let actions = fail(id, retryAfter: nil, now: now)
        #expect(actions.allSatisfy { $0 == .wake }, "a cancelled fetch's end changes no fetch (seed \(seed), \(cursor))")
        absorb(actions, step: "cancelled \(cursor) failed")
    }

    mutating func stop() {
        absorb(machine.stop(), step: "stop")
        stopped = true
        if case .gathering = lane {
            #expect(woken, "stop wakes the waiting commit (seed \(seed))")
            #expect(machine.lookAgain(now: now) == .commit, "a stopped read-ahead commits at once (seed \(seed))")
        }
    }

    /// After stop, whatever the fetches still report starts nothing and wakes nothing.
    mutating func reportAfterStop() {
        var reports = Array(cancelledUnreported)
        if let taken { reports.append((taken.id, taken.cursor)) }
        for (id, cursor) in reports {
            let page = page(at: cursor)
            #expect(machine.known(page.olderCursor, of: cursor, backfill: backfill, now: now).isEmpty, "told after stop (seed \(seed))")
            let actions = chance(0.5)
                ? machine.arrived(page, cursor: cursor, id: id, backfill: backfill, now: now)
                : machine.failed(id, retryAfter: .seconds(1), now: now)
            #expect(actions.isEmpty, "a report after stop (seed \(seed))")
        }
    }

    // MARK: The feed machine's side

    /// The feed machine sends its older request at `cursor`.
    mutating func ask(_ cursor: String) {
        let (answer, actions) = machine.request(older: cursor, backfill: backfill, now: now)
        switch answer {
        case .committed(let outcome):
            #expect(precommitted[cursor] == outcome, "only what was committed ahead for \(cursor) answers it (seed \(seed))")
        case .fetchedAhead(let id):
            #expect(run.first?.id == id && run.first?.cursor == cursor, "only the run's head answers \(cursor) (seed \(seed))")
            taken = run.removeFirst()
        case .request(let ids):
            #expect(Set(ids) == Set(draining.keys), "the request waits for exactly what was left to finish (seed \(seed))")
        }
        // Asking for anything but what was committed ahead means the backfill went elsewhere.
        if case .committed = answer {} else { precommitted = [:] }
        absorb(actions, step: "request \(cursor)")
        lane = .waiting(cursor: cursor, answer: answer)
    }

    mutating func requestFailed(_ cursor: String) {
        machine.requestEnded(older: cursor)
        taken = nil
        let expected = run.filter(\.finished).map { Machine.Action.forget($0.id) }
        let actions = machine.loadFailed(.older)
        #expect(actions == expected, "a failed load lets go of exactly the fetches that ended (seed \(seed))")
        for fetch in run where !fetch.finished { draining[fetch.id] = fetch }
        run = []
        absorb(actions, step: "load failed \(cursor)", dropped: true)
        lane = .idle(cursor)
    }

    mutating func requestAnswered(_ cursor: String, _ page: FeedPage) {
        machine.requestEnded(older: cursor)
        taken = nil
        let next = backfill.readAheadCursor(after: page.olderCursor, pendingItems: page.items.count).flatMap { $0 == cursor ? nil : $0 }
        absorb(machine.received(page, in: .older, next: next), step: "received \(cursor)")
        guard let next else {
            groupAndCommit(cursor, page, next: nil)
            return
        }
        switch machine.gather(after: next, committing: page, backfill: backfill, now: now) {
        case .commit:
            groupAndCommit(cursor, page, next: next)
        case .waitUntil(let deadline):
            committing[.older] = page.items.count
            woken = false
            failedWhileGathering = false
            lane = .gathering(cursor: cursor, page: page, next: next, deadline: deadline)
        case .keepWaiting:
            Issue.record("a wait that never armed its timer (seed \(seed))")
        }
    }

    mutating func groupAndCommit(_ cursor: String, _ page: FeedPage, next: String?) {
        let (ahead, actions) = machine.group(after: page, next: next, in: .older, backfill: backfill, now: now)
        var expected = next
        for taken in ahead {
            #expect(taken.cursor == expected, "pages grouped out of cursor order (seed \(seed))")
            #expect(!committed.contains(taken.cursor), "the page at \(taken.cursor) grouped after it was committed (seed \(seed))")
            #expect(taken.page == self.page(at: taken.cursor))
            expected = taken.page.olderCursor
        }
        committing[.older] = ahead.reduce(page.items.count) { $0 + $1.page.items.count }
        absorb(actions, step: "group \(cursor)")
        lane = .committing(cursor: cursor, page: page, next: next, ahead: ahead)
    }

    mutating func continueAfterCommit(next: String?, in direction: Direction) {
        if let next, backfill.readAheadCursor(after: next, pendingItems: 0) != nil {
            ask(next)
            absorb(machine.handled(direction, continued: true), step: "handled")
        } else {
            absorb(machine.handled(direction, continued: false), step: "handled, ended")
            lane = .idle(nil)
        }
    }

    // MARK: The driver and the model

    /// Takes in what the machine asked for, checking each against the handles the driver holds.
    mutating func absorb(_ actions: [Machine.Action], step: String, dropped: Bool = false) {
        for action in actions {
            switch action {
            case .fetch(let id, let cursor):
                #expect(!stopped, "a fetch after stop (seed \(seed), \(step))")
                #expect(id.value > lastID, "fetch ids are fresh (seed \(seed))")
                #expect(!run.contains { $0.cursor == cursor }, "\(cursor) fetched twice in one run (seed \(seed), \(step))")
                lastID = id.value
                run.append(Fetch(id: id, cursor: cursor))
            case .cancel(let id):
                if let index = run.firstIndex(where: { $0.id == id }) {
                    if !run[index].finished { cancelledUnreported[id] = run[index].cursor }
                    run.remove(at: index)
                } else if let fetch = draining.removeValue(forKey: id) {
                    if !fetch.finished { cancelledUnreported[id] = fetch.cursor }
                } else {
                    Issue.record("\(id) cancelled but not held (seed \(seed), \(step))")
                }
            case .forget(let id):
                if let fetch = draining.removeValue(forKey: id) {
                    #expect(fetch.finished, "\(id) let go of before it ended (seed \(seed), \(step))")
                } else if let index = run.firstIndex(where: { $0.id == id }) {
                    // Taken into a commit (group) or ended before a failed load (loadFailed).
                    #expect(run[index].page != nil || dropped, "\(id) let go of unused (seed \(seed), \(step))")
                    run.remove(at: index)
                } else if !dropped {
                    Issue.record("\(id) let go of but not held (seed \(seed), \(step))")
                }
            case .wake:
                #expect(machine.isGathering || !stopped, "a wake with nothing waiting (seed \(seed), \(step))")
                woken = true
            }
        }
        if actions.contains(where: { if case .fetch = $0 { true } else { false } }), !step.hasPrefix("received") {
            // Fetched ahead by the run's own rule: within its bytes, and short of the depth once
            // the page just asked for is counted as the largest.
            #expect(machine.arrivedBytes < backfill.configuration.readAheadBytes, "fetched past the bytes (seed \(seed), \(step))")
            #expect(backfill.stored + machine.pendingItems - largest < backfill.depth, "fetched past the depth (seed \(seed), \(step))")
        }
    }

    /// The invariants after every step.
    func check(after step: Int) {
        let modelRun = run.map(\.cursor)
        #expect(machine.cursors == modelRun, "the run drifted from the model (seed \(seed), step \(step))")
        #expect(machine.cursors.count <= backfill.configuration.readAheadPages, "fetched past the pages (seed \(seed), step \(step))")
        #expect(machine.fetches == Set(run.map(\.id)).union(draining.keys), "the fetches held drifted (seed \(seed), step \(step))")
        let arrived = run.compactMap(\.page) + (taken?.page.map { [$0] } ?? [])
        let pending = committing.values.reduce(0, +) + arrived.reduce(0) { $0 + $1.items.count }
            + run.filter { $0.page == nil }.count * largest + precommitted.values.reduce(0) { $0 + $1.pageItemCount }
        #expect(machine.pendingItems == pending, "the pending items drifted from the model (seed \(seed), step \(step))")
        let bytes = arrived.reduce(0) { $0 + $1.items.reduce(0) { $0 + $1.payload.count } }
        #expect(machine.arrivedBytes == bytes, "the arrived bytes drifted from the model (seed \(seed), step \(step))")
    }
}

@Suite struct ReadAheadMachinePropertyTests {
    /// Random sequences of arrivals, failures, headers, commits (whole, partial, failed), newer
    /// commits, going offline and back, time, and finally stop, never make the read-ahead drift
    /// from its model, commit a page twice or out of order, fetch past its bounds, or keep a
    /// fetch past stop.
    @Test(arguments: 0..<1000)
    func randomEventSequencesKeepTheInvariants(seed: Int) {
        var world = World(seed: UInt64(seed) &* 2_654_435_761)
        world.begin()
        world.check(after: 0)
        for step in 1...120 {
            world.step()
            world.check(after: step)
        }
        world.stop()
        #expect(world.machine.fetches.isEmpty, "stop cancels every fetch (seed \(seed))")
        #expect(world.run.isEmpty && world.draining.isEmpty, "stop cancels every fetch the driver holds (seed \(seed))")
        world.reportAfterStop()
        #expect(world.machine.fetches.isEmpty, "nothing starts after stop (seed \(seed))")
    }
}
