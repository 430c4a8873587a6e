/// What a ``ReadAheadMachine`` asks of the feed's own machine: the feed's configuration, and
/// whether the backfill would go on to a cursor. The feed's machine decides what loads; the
/// read-ahead only fetches what it would.
@_spi(StateMachine) public protocol BackfillDecision {
    /// The feed's configuration: the read-ahead's bounds and its commits' grouping.
    var configuration: SyncConfiguration { get }
    /// `olderCursor` when the backfill would go on to load it with `pendingItems` fetched and not
    /// yet counted; `nil` when it would stop there (see ``FeedMachine/readAheadCursor(after:pendingItems:)``).
    func readAheadCursor(after olderCursor: String?, pendingItems: Int) -> String?
}

extension FeedMachine: BackfillDecision {}

/// Names one page fetched ahead: the driver keeps that fetch's task under it and reports its
/// outcome with it. Ids are handed out in increasing order and never reused.
@_spi(StateMachine) public struct ReadAheadID: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// The id's number.
    public let value: Int

    /// The id `value`.
    public init(_ value: Int) {
        self.value = value
    }

    /// Ordered by when the machine handed them out.
    public static func < (lhs: ReadAheadID, rhs: ReadAheadID) -> Bool { lhs.value < rhs.value }

    /// `#` and the number.
    public var description: String { "#\(value)" }
}

/// The backfill's read-ahead: a pure reducer from what happens to its pages to what the driver
/// does about them.
///
/// Older pages are fetched ahead of the backfill, oldest last: each one's cursor is the older
/// cursor of the page before it, and each is asked for as soon as that cursor is known (from the
/// headers, with an HTTP source). While the store commits one page the next ones are already on
/// their way, so the network and the store each work at their own pace; those that arrived
/// meanwhile go into the next commit's transaction. The head of the run answers the feed
/// machine's next older request when it asks for that cursor; anything else cancels the run.
///
/// It holds no tasks and reads no clock: it hands out a ``ReadAheadID`` per fetch (``Action/fetch(_:cursor:)``),
/// the driver keeps the task under it and reports its outcome, and every instant comes in with
/// the event. Rules it keeps:
/// - nothing is fetched past ``SyncConfiguration/readAheadPages`` pages,
///   ``SyncConfiguration/readAheadBytes`` of arrived pages, a server's Retry-After, or where the
///   feed's machine would stop (``BackfillDecision``), counting every item not yet in the
///   machine's count once: being committed, arrived, on its way (as the largest page so far), or
///   committed ahead;
/// - pages are grouped into a commit only in cursor order, each at most once;
/// - a commit ends the run only in the direction whose commit started it (a newer page
///   committed meanwhile does not cancel an older page's successors);
/// - a failed older load leaves what is on its way to finish (``Answer/request(afterDraining:)``):
///   the server has those requests, and an answer may carry a Retry-After the retry must hear;
/// - after ``stop()``, every fetch is cancelled and nothing more starts.
@_spi(StateMachine) public struct ReadAheadMachine<Instant: InstantProtocol>: Sendable where Instant.Duration == Duration {
    /// What the driver does with the fetches it holds.
    public enum Action: Sendable, Hashable {
        /// Start fetching the older page at `cursor`, reporting its older cursor (``known(_:of:backfill:now:)``)
        /// and its outcome (``arrived(_:cursor:id:backfill:now:)``, ``failed(_:retryAfter:now:)``) under the id.
        case fetch(ReadAheadID, cursor: String)
        /// Cancel that fetch and let go of it: nothing it brings is used.
        case cancel(ReadAheadID)
        /// Let go of that fetch without cancelling it: it is done, or its page was taken into a commit.
        case forget(ReadAheadID)
        /// Wake the commit that waits for the pages behind it: it looks again (``lookAgain(now:)``).
        case wake
    }

    /// How the feed machine's older request is answered.
    public enum Answer: Sendable, Hashable {
        /// With this outcome: its page was committed with the one before it. No request, no commit.
        case committed(CommitOutcome)
        /// With this fetch's answer, the page fetched ahead at the request's cursor; the driver
        /// takes its task and lets go of the id.
        case fetchedAhead(ReadAheadID)
        /// By a request of its own, sent once these fetches (left to finish after a failure) have
        /// answered, and not before ``olderNotBefore``, read after them.
        case request(afterDraining: [ReadAheadID])
    }

    /// What a backfill commit does while it waits for the pages close behind it.
    public enum Gathering: Sendable, Hashable {
        /// Commit now, with what arrived (``group(after:next:in:backfill:now:)``).
        case commit
        /// Wait, and call ``commitDelayElapsed()`` at this instant: the one timer of this wait.
        case waitUntil(Instant)
        /// Go on waiting (the timer is armed already).
        case keepWaiting
    }

    /// A page fetched ahead and taken into a commit, with the cursor it was fetched with.
    public struct Taken: Sendable, Hashable {
        /// The cursor the page was fetched with.
        public let cursor: String
        /// The page.
        public let page: FeedPage
    }

    /// No older request before this instant: a page fetched ahead was answered with a Retry-After.
    public private(set) var olderNotBefore: Instant?

    private var run = ReadAheadRun()
    /// The direction whose commits the run continues: only its failure or change of course cancels it.
    private var origin: Direction?
    /// The cursor of the newest page fetched ahead (taken by a request or not): only its older
    /// cursor, once known, may extend the run.
    private var tail: String?
    /// That page's older cursor once known (from its headers, or once it arrived): where the run
    /// goes on when there is room.
    private var next: String??
    /// The most items a page of this feed has had: what a page on its way is counted as.
    private var largestPage = 0
    /// Items of the pages being committed, by direction (an older and a newer page may be at once).
    private var committingItems: [Direction: Int] = [:]
    /// Pages fetched ahead that arrived and are not committed yet, by cursor.
    private var arrived = ArrivedPages()
    /// Older pages committed in the transaction of the page before them, by the cursor they were
    /// fetched with, until the feed machine asks for that cursor.
    private var precommitted: [ExactID: CommitOutcome] = [:]
    /// Fetches of a run a failure ended, left to finish for their Retry-After.
    private var draining: Set<ReadAheadID> = []
    private var nextID = 0
    private var gathering: Gather?
    private var stopped = false

    /// A commit's wait for the pages behind it.
    private struct Gather: Sendable {
        /// The older cursor of the page waiting: the run must start there.
        let next: String
        /// Pages behind it worth waiting for.
        let wanted: Int
        let deadline: Instant
        /// A page fetched ahead failed since the wait began: those behind it will not come.
        var failed = false
    }

    /// A read-ahead with nothing fetched.
    public init() {}

    // MARK: Reading

    /// Items held beyond the feed machine's count: being committed, fetched ahead (a page still
    /// on its way counted as the largest page so far), or committed ahead and not yet handed to
    /// the feed machine.
    public var pendingItems: Int {
        committingItems.values.reduce(0, +) + arrived.items
            + run.waiting * largestPage + precommitted.values.reduce(0) { $0 + $1.pageItemCount }
    }

    /// The cursors of the run, oldest last.
    public var cursors: [String] { run.entries.map(\.cursor) }

    /// The fetches the driver holds: the run's and those left to finish.
    public var fetches: Set<ReadAheadID> { draining.union(run.entries.map(\.id)) }

    /// The item bytes of the pages fetched ahead that arrived and are not committed.
    public var arrivedBytes: Int { arrived.bytes }

    /// Whether a commit waits for the pages behind it.
    public var isGathering: Bool { gathering != nil }

    // MARK: The feed machine's requests

    /// The feed machine asks for the older page at `cursor`: answered by what was committed
    /// ahead, by the run's head, or by a request of its own. Asking for any other cursor means
    /// the backfill went elsewhere: the run is cancelled, and what was committed ahead is only
    /// in the store, which the feed machine reads again through later commits.
    public mutating func request(
        older cursor: String?, backfill: some BackfillDecision, now: Instant
    ) -> (answer: Answer, actions: [Action]) {
        if !precommitted.isEmpty {
            if let cursor, let outcome = precommitted[ExactID(cursor)] { return (.committed(outcome), []) }
            precommitted = [:]
        }
        var actions: [Action] = []
        guard let head = run.first else { return (.request(afterDraining: draining.sorted()), actions) }
        guard let cursor, head.cursor.isExactly(cursor) else {
            cancelRun(into: &actions)
            return (.request(afterDraining: draining.sorted()), actions)
        }
        run.removeFirst()
        extend(into: &actions, backfill: backfill, now: now)
        return (.fetchedAhead(head.id), actions)
    }

    /// The feed machine took the outcome committed ahead for `cursor` (``Answer/committed(_:)``).
    public mutating func tookCommitted(_ cursor: String) {
        precommitted[ExactID(cursor)] = nil
    }

    /// An older request at `cursor` ended, answered or not: a page of it fetched ahead is no longer held.
    public mutating func requestEnded(older cursor: String) {
        arrived[cursor] = nil
    }

    /// The feed machine's request in `direction` was cancelled (offline): a run it continues is
    /// cancelled, and so is any run while an older one is, since its successor must not load either.
    public mutating func requestCancelled(_ direction: Direction) -> [Action] {
        var actions: [Action] = []
        if direction == .older || direction == origin { cancelRun(into: &actions) }
        return actions
    }

    // MARK: Commits

    /// `page` answered the request in `direction` and is about to be committed; `next` is the
    /// older page the feed machine will load right after (``FeedMachine/backfillCursor(afterCommitting:answering:in:)``),
    /// fetched from here unless the run already starts there.
    public mutating func received(_ page: FeedPage, in direction: Direction, next: String?) -> [Action] {
        largestPage = max(largestPage, page.items.count)
        guard let next, !stopped else { return [] }
        var actions: [Action] = []
        if !(run.first?.cursor.isExactly(next) ?? false) {
            cancelRun(into: &actions)
            startFetch(next, into: &actions)
        }
        origin = direction
        return actions
    }

    /// An older `page`, whose older cursor `next` the run starts at, waits for the pages close
    /// behind it so that one transaction stores up to ``SyncConfiguration/backfillCommitPages``
    /// (at most half the read-ahead, so the network never waits for the store), for at most
    /// ``SyncConfiguration/backfillCommitDelay`` from `now`. A wait ends once enough arrived,
    /// none more is on its way, one failed, the run went elsewhere, or at the deadline.
    public mutating func gather(after next: String, committing page: FeedPage, backfill: some BackfillDecision, now: Instant) -> Gathering {
        let configuration = backfill.configuration
        committingItems[.older] = page.items.count
        let wanted = min(configuration.backfillCommitPages, max(1, configuration.readAheadPages / 2)) - 1
        guard wanted > 0, configuration.backfillCommitDelay > .zero else { return endGathering() }
        let deadline = now.advanced(by: configuration.backfillCommitDelay)
        gathering = Gather(next: next, wanted: wanted, deadline: deadline)
        return lookAgain(now: now) == .commit ? .commit : .waitUntil(deadline)
    }

    /// The waiting commit was woken (``Action/wake``): whether it goes on waiting.
    public mutating func lookAgain(now: Instant) -> Gathering {
        guard let gathering else { return .commit }
        guard !stopped, !gathering.failed, run.first?.cursor.isExactly(gathering.next) ?? false else { return endGathering() }
        let ready = run.entries.prefix { arrived[$0.cursor] != nil }.count
        guard ready < gathering.wanted, ready < run.count, now < gathering.deadline else { return endGathering() }
        return .keepWaiting
    }

    /// The waiting commit's timer fired (``Gathering/waitUntil(_:)``).
    public mutating func commitDelayElapsed() -> [Action] {
        gathering == nil ? [] : [.wake]
    }

    private mutating func endGathering() -> Gathering {
        gathering = nil
        committingItems[.older] = nil
        return .commit
    }

    /// The pages fetched ahead that follow `page` (answering `direction`, with older cursor
    /// `next`) one after another and have all arrived, taken off the run for its commit, as far
    /// as the backfill would go on loading them. Only an older page takes any.
    public mutating func group(
        after page: FeedPage, next: String?, in direction: Direction, backfill: some BackfillDecision, now: Instant
    ) -> (ahead: [Taken], actions: [Action]) {
        var taken: [Taken] = []
        var actions: [Action] = []
        if direction == .older {
            var cursor = next
            // Counted as the run's extension counts, with this page and the ones taken (no longer arrived).
            let pending = pendingItems + page.items.count
            while let wanted = cursor, let head = run.first, head.cursor.isExactly(wanted), let arrival = arrived[head.cursor],
                  backfill.readAheadCursor(after: wanted, pendingItems: pending) != nil {
                run.removeFirst()
                arrived[head.cursor] = nil
                taken.append(Taken(cursor: head.cursor, page: arrival))
                actions.append(.forget(head.id))
                cursor = arrival.olderCursor
            }
        }
        committingItems[direction] = taken.reduce(page.items.count) { $0 + $1.page.items.count }
        if !taken.isEmpty { extend(into: &actions, backfill: backfill, now: now) }
        return (taken, actions)
    }

    /// The commit in `direction` of a page and the pages `ahead` of it ended: `outcomes` are
    /// what the store committed, in order, empty when it failed. A store that stopped part-way
    /// committed the first pages only: the run is cancelled, and the rest are fetched again.
    public mutating func committed(_ direction: Direction, ahead: [String], outcomes: [CommitOutcome]) -> [Action] {
        committingItems[direction] = nil
        for (cursor, outcome) in zip(ahead, outcomes.dropFirst()) { precommitted[ExactID(cursor)] = outcome }
        var actions: [Action] = []
        if outcomes.count < ahead.count + 1 { cancelRun(from: direction, into: &actions) }
        return actions
    }

    /// The feed machine took a commit in `direction`; `continued` says whether its backfill asked
    /// for the next older page. If not (the depth was reached, the cursor moved), the run that
    /// commit continues is never used.
    public mutating func handled(_ direction: Direction, continued: Bool) -> [Action] {
        var actions: [Action] = []
        if !continued { cancelRun(from: direction, into: &actions) }
        return actions
    }

    /// The feed machine's request in `direction` failed. An older one is retried after a backoff
    /// with its own cursor: the run ends, and what is on its way is left to finish, not cut off.
    public mutating func loadFailed(_ direction: Direction) -> [Action] {
        guard direction == .older else { return [] }
        var actions: [Action] = []
        for entry in run.entries {
            if entry.finished { actions.append(.forget(entry.id)) } else { draining.insert(entry.id) }
        }
        dropRun(into: &actions)
        return actions
    }

    /// Stops for good: every fetch is cancelled, the waiting commit woken, nothing more starts.
    public mutating func stop() -> [Action] {
        stopped = true
        var actions: [Action] = []
        cancelRun(into: &actions)
        for id in draining.sorted() { actions.append(.cancel(id)) }
        draining = []
        return actions
    }

    // MARK: Fetches' reports

    /// The older cursor of the page fetched ahead at `cursor` is known: the run goes on from it
    /// if that page is still its newest and there is room.
    public mutating func known(_ older: String?, of cursor: String, backfill: some BackfillDecision, now: Instant) -> [Action] {
        guard !stopped, tail?.isExactly(cursor) ?? false, next == nil else { return [] }
        next = .some(older)
        var actions: [Action] = []
        extend(into: &actions, backfill: backfill, now: now)
        return actions
    }

    /// The fetch `id` at `cursor` brought `page`: kept for its commit; if it is the run's newest,
    /// the run goes on from it if there is room.
    public mutating func arrived(_ page: FeedPage, cursor: String, id: ReadAheadID, backfill: some BackfillDecision, now: Instant) -> [Action] {
        var actions: [Action] = []
        if draining.remove(id) != nil { actions.append(.forget(id)) }
        let isTail = tail?.isExactly(cursor) ?? false
        if !stopped, run.markFinished(id, arrived: true) || isTail {
            arrived[cursor] = page
            largestPage = max(largestPage, page.items.count)
            if isTail {
                next = .some(page.olderCursor)
                extend(into: &actions, backfill: backfill, now: now)
            }
        }
        if gathering != nil { actions.append(.wake) }
        return actions
    }

    /// The fetch `id` failed. The pages behind it will not come, so a waiting commit goes
    /// ahead; a Retry-After in its answer holds back older requests until `now` plus that wait
    /// (the driver tells the feed machine too).
    public mutating func failed(_ id: ReadAheadID, retryAfter: Duration?, now: Instant) -> [Action] {
        var actions: [Action] = []
        if draining.remove(id) != nil { actions.append(.forget(id)) }
        _ = run.markFinished(id, arrived: false)
        if gathering != nil {
            gathering?.failed = true
            actions.append(.wake)
        }
        if let retryAfter {
            let until = now.advanced(by: retryAfter)
            if olderNotBefore.map({ $0 < until }) ?? true { olderNotBefore = until }
        }
        return actions
    }

    // MARK: The run

    /// Fetches the page after the run's newest, once that one's older cursor is known, while the
    /// run is shorter than the configured read-ahead (in pages, and in the bytes of the pages
    /// that arrived) and the feed machine would go on loading.
    private mutating func extend(into actions: inout [Action], backfill: some BackfillDecision, now: Instant) {
        let configuration = backfill.configuration
        guard run.count < configuration.readAheadPages, let tail, case .some(let older) = next else { return }
        guard arrived.bytes < configuration.readAheadBytes else { return }
        if let olderNotBefore, now < olderNotBefore { return }
        guard let cursor = backfill.readAheadCursor(after: older, pendingItems: pendingItems),
              !cursor.isExactly(tail), !run.contains(cursor: cursor)
        else { return }
        startFetch(cursor, into: &actions)
    }

    private mutating func startFetch(_ cursor: String, into actions: inout [Action]) {
        let id = ReadAheadID(nextID)
        nextID += 1
        tail = cursor
        next = nil
        run.append(Entry(id: id, cursor: cursor))
        actions.append(.fetch(id, cursor: cursor))
    }

    private mutating func cancelRun(into actions: inout [Action]) {
        for entry in run.entries { actions.append(.cancel(entry.id)) }
        dropRun(into: &actions)
    }

    /// Cancels the run only if this direction's commits continue it: a newer page committed
    /// meanwhile must not cancel the successors of an older one.
    private mutating func cancelRun(from direction: Direction, into actions: inout [Action]) {
        if origin == direction { cancelRun(into: &actions) }
    }

    private mutating func dropRun(into actions: inout [Action]) {
        if gathering != nil { actions.append(.wake) }
        for entry in run.entries { arrived[entry.cursor] = nil }
        run.removeAll()
        origin = nil
        tail = nil
        next = nil
    }
}

/// One page fetched ahead.
private struct Entry: Sendable {
    let id: ReadAheadID
    let cursor: String
    /// Its page is in the arrived pages.
    var hasArrived = false
    /// Its fetch answered, with a page or a failure.
    var finished = false
}

/// The pages fetched ahead, oldest last, with what the read-ahead asks of them every time it
/// grows kept at hand: whether a cursor is among them, and how many have not arrived.
private struct ReadAheadRun: Sendable {
    private(set) var entries: [Entry] = []
    private var cursors: [ExactID: Int] = [:]
    /// Entries whose page has not arrived (a failed one included: it is still counted until the
    /// run ends or its request takes it).
    private(set) var waiting = 0

    var first: Entry? { entries.first }
    var count: Int { entries.count }

    func contains(cursor: String) -> Bool { cursors[ExactID(cursor)] != nil }

    mutating func append(_ entry: Entry) {
        entries.append(entry)
        cursors[ExactID(entry.cursor), default: 0] += 1
        if !entry.hasArrived { waiting += 1 }
    }

    @discardableResult
    mutating func removeFirst() -> Entry {
        let entry = entries.removeFirst()
        let key = ExactID(entry.cursor)
        if let left = cursors[key], left > 1 { cursors[key] = left - 1 } else { cursors[key] = nil }
        if !entry.hasArrived { waiting -= 1 }
        return entry
    }

    mutating func removeAll() {
        entries = []
        cursors = [:]
        waiting = 0
    }

    /// Marks the entry `id` finished, and arrived if it brought its page; whether it is in the run.
    mutating func markFinished(_ id: ReadAheadID, arrived: Bool) -> Bool {
        guard let index = entries.firstIndex(where: { $0.id == id }) else { return false }
        entries[index].finished = true
        if arrived, !entries[index].hasArrived {
            entries[index].hasArrived = true
            waiting -= 1
        }
        return true
    }
}

/// Pages fetched ahead that arrived, by cursor, with their items and payload bytes kept as
/// running totals: the read-ahead weighs both every time it grows, which happens as each page's
/// headers are read, on the way to the next request, where summing a long run each time would
/// hold that request back.
private struct ArrivedPages: Sendable {
    private var pages: [String: FeedPage] = [:]
    private(set) var items = 0
    private(set) var bytes = 0

    subscript(cursor: String) -> FeedPage? {
        get { pages[cursor] }
        set {
            if let old = pages[cursor] {
                items -= old.items.count
                bytes -= Self.bytes(of: old)
            }
            pages[cursor] = newValue
            if let new = newValue {
                items += new.items.count
                bytes += Self.bytes(of: new)
            }
        }
    }

    private static func bytes(of page: FeedPage) -> Int {
        page.items.reduce(0) { $0 + $1.payload.count }
    }
}
