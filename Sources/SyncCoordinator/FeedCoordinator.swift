import AsyncBroadcast
import ConnectivityPolicy
import Foundation
import Logging
@_spi(StateMachine) import SyncCore

/// Keeps one feed in sync: drives its ``FeedMachine`` with a ``FeedSource``, a ``FeedStore``,
/// connectivity verdicts, triggers and timers.
///
/// Each feed is its own actor, so a slow or failing feed never blocks another. Requests run in
/// child tasks off the actor; going offline cancels them (the source sees `CancellationError`)
/// and an answer that arrives after its request was cancelled is dropped, never committed.
///
/// Time comes from the injected clock (a `TestClock` in tests) and jitter from the injected
/// ``RandomSource``: nothing here reads the real time.
public actor FeedCoordinator<C: Clock> where C.Duration == Duration {
    /// The feed's identifier.
    public nonisolated let feed: String
    private var machine: FeedMachine
    private let source: any FeedSource
    /// The source's executor, which this actor runs on: see ``FeedSource/executor``.
    private let sourceExecutor: (any SerialExecutor)?
    /// Lends its executor when the source has none: the coordinator is then an ordinary actor.
    private let ownExecutor = ExecutorHost()
    private let store: any FeedStore
    private let time: TimeBase<C>
    private var random: AnyRandomSource
    private let logger: Logger

    private var requests: [Direction: (token: FetchToken, task: Task<Void, Never>)] = [:]
    private var timers: [Direction: (token: FetchToken, task: Task<Void, Never>)] = [:]
    private var background: [Task<Void, Never>] = []
    /// Older pages fetched ahead of the backfill, oldest last: each one's cursor is the older
    /// cursor of the page before it, and each is asked for as soon as that cursor is known (from
    /// the headers, with an HTTP source). While the store commits one page, the next ones are
    /// already on their way, so the network and the store each work at their own pace; those that
    /// arrived meanwhile go into the next commit's transaction. The head goes to the machine's next
    /// older fetch when it asks for that cursor; the whole run is cancelled otherwise.
    private var readAhead = ReadAheadRun()
    /// The direction whose commits the read-ahead continues: only that direction's failure or
    /// change of course cancels it.
    private var readAheadOrigin: Direction?
    /// The cursor of the newest page fetched ahead (taken by the machine or not): only its older
    /// cursor, once known, may extend the run.
    private var readAheadTail: String?
    /// The older cursor of that page once it is known (from its headers, or once it has arrived):
    /// where the run goes on when there is room.
    private var readAheadNext: String??
    /// The most items a page of this feed has had: what a page on its way is counted as.
    private var largestPage = 0
    /// Items of the pages being committed, by direction (an older and a newer page may be at once).
    private var committingItems: [Direction: Int] = [:]
    /// Pages fetched ahead that arrived and are not committed yet, by cursor: with
    /// ``committingItems`` and ``precommitted``, what the backfill holds beyond the machine's count.
    private var arrived = ArrivedPages()
    /// Older pages committed in the transaction of the page before them, by the cursor they were
    /// fetched with, until the machine asks for that cursor: the answer is then this outcome, with
    /// no request and no commit.
    private var precommitted: [ExactID: CommitOutcome] = [:]

    private struct ReadAhead {
        let id: Int
        let cursor: String
        let task: Task<FeedPage, any Error>
        /// Its page is in ``arrived``.
        var hasArrived = false
    }

    /// The pages fetched ahead, oldest last, with what the read-ahead asks of them every time it
    /// grows kept at hand: whether a cursor is among them, and how many have not arrived.
    private struct ReadAheadRun: Sequence {
        private var entries: [ReadAhead] = []
        private var cursors: [ExactID: Int] = [:]
        /// Entries whose page has not arrived.
        private(set) var waiting = 0

        var first: ReadAhead? { entries.first }
        var count: Int { entries.count }

        func contains(cursor: String) -> Bool { cursors[ExactID(cursor)] != nil }

        mutating func append(_ entry: ReadAhead) {
            entries.append(entry)
            cursors[ExactID(entry.cursor), default: 0] += 1
            if !entry.hasArrived { waiting += 1 }
        }

        @discardableResult
        mutating func removeFirst() -> ReadAhead {
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

        /// Marks the entry `id` arrived; whether it is in the run.
        mutating func markArrived(id: Int) -> Bool {
            guard let index = entries.firstIndex(where: { $0.id == id }) else { return false }
            if !entries[index].hasArrived {
                entries[index].hasArrived = true
                waiting -= 1
            }
            return true
        }

        func makeIterator() -> IndexingIterator<[ReadAhead]> { entries.makeIterator() }
    }

    /// Pages fetched ahead that arrived, by cursor, with their items and payload bytes kept as
    /// running totals: the read-ahead weighs both every time it grows, which happens as each
    /// page's headers are read, on the way to the next request. Summed there, over up to 64 pages
    /// of 100 items, they took a sixth of that way.
    private struct ArrivedPages {
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
    private var nextReadAheadID = 0
    /// Set while a read-ahead fetch runs its first, synchronous part (see ``fetchAhead(_:)``).
    private var startingFetch = false
    /// Pages fetched ahead of a page that then failed, left to finish rather than cancelled: the
    /// server has them already, and its answer may ask the client to wait (a 429's Retry-After),
    /// which the next older request must hear before it goes.
    private var draining: [Int: Task<FeedPage, any Error>] = [:]
    /// The server asked for no older request before this (a Retry-After on a page fetched ahead).
    private var olderNotBefore: C.Instant?
    /// A backfill commit waiting for the pages right behind it (``gatherBackfill(after:)``).
    private var arrivalWaiter: CheckedContinuation<Void, Never>?
    /// A page fetched ahead failed since that wait began: the pages behind it will not come.
    private var aheadFailedDuringWait = false
    private var started = false
    private var stopped = false
    /// What the source had received when last charged to the budget (``chargeMeteredBytes()``).
    private var bytesCharged: Int64
    /// The last write of the metered usage to the store; each waits for the one before.
    private var usageWrite: Task<Void, Never>?
    /// Answers that arrived after their request was cancelled and were dropped uncommitted.
    public private(set) var droppedAnswers = 0
    private var published: FeedState
    private let broadcast = Broadcast<FeedState>(bufferingNewest: 256)
    private let parentBroadcast: Broadcast<FeedState>?

    /// Opens a feed: reads what the store holds for it. Call ``start()`` to begin syncing.
    ///
    /// - Parameters:
    ///   - clock: schedules retries, reconnect spread and periodic refresh.
    ///   - random: jitter for backoff and reconnect spread.
    ///   - wallOrigin: the wall-clock date of the clock's current instant, for the dates in
    ///     ``FeedState`` (offline since, next retry, last sync).
    public init(
        feed: String,
        source: any FeedSource,
        store: any FeedStore,
        configuration: SyncConfiguration = .default,
        clock: C,
        random: any RandomSource = SystemRandomSource(),
        wallOrigin: Date = Date(),
        logger: Logger = Logger(label: "syncd.feed")
    ) async throws {
        let persisted = try await store.load(feed: feed)
        let usage = configuration.meteredBudget != nil ? try await store.meteredUsage(feed: feed) : nil
        self.init(
            feed: feed, source: source, store: store, persisted: persisted, meteredUsage: usage, configuration: configuration,
            time: TimeBase(clock: clock, wallOrigin: wallOrigin), random: random, logger: logger, parent: nil
        )
    }

    init(
        feed: String,
        source: any FeedSource,
        store: any FeedStore,
        persisted: PersistedFeed,
        meteredUsage: MeteredUsage?,
        configuration: SyncConfiguration,
        time: TimeBase<C>,
        random: any RandomSource,
        logger: Logger,
        parent: Broadcast<FeedState>?
    ) {
        self.feed = feed
        self.source = source
        self.sourceExecutor = source.executor
        self.store = store
        self.time = time
        self.random = AnyRandomSource(random)
        var logger = logger
        logger[metadataKey: "feed"] = "\(feed)"
        self.logger = logger
        self.parentBroadcast = parent
        var configuration = configuration
        configuration.listsOldestFirst = configuration.listsOldestFirst || source.listsOldestFirst
        self.machine = FeedMachine(feed: feed, persisted: persisted, configuration: configuration, meteredUsage: meteredUsage)
        self.bytesCharged = source.bytesReceived
        self.published = machine.state
    }

    /// The source's executor when it has one, so its callbacks enter in place; otherwise an
    /// ordinary actor's.
    public nonisolated var unownedExecutor: UnownedSerialExecutor {
        sourceExecutor?.asUnownedSerialExecutor() ?? ownExecutor.unownedExecutor
    }

    deinit {
        // Released without stop(): its requests, timers and followers end with it, and its
        // streams finish, rather than outliving their owner.
        for entry in readAhead { entry.task.cancel() }
        for (_, task) in draining { task.cancel() }
        for (_, entry) in requests { entry.task.cancel() }
        for (_, entry) in timers { entry.task.cancel() }
        for task in background { task.cancel() }
        broadcast.finish()
    }

    // MARK: Reading

    /// The feed's current state.
    public var state: FeedState { machine.state }

    /// The feed's configuration.
    public var configuration: SyncConfiguration { machine.configuration }

    /// The current state, then every change, until ``stop()``.
    public func states() -> AsyncStream<FeedState> {
        broadcast.subscribe(replaying: [machine.state])
    }

    /// Stored items, newest first.
    public func items(offset: Int = 0, limit: Int = 50) async throws -> [FeedItem] {
        try await store.items(feed: feed, offset: offset, limit: limit)
    }

    /// The newest `limit` stored items now, then again whenever they change (a page landed,
    /// retention dropped some), until ``stop()``: what a list UI shows. A slow consumer gets the
    /// latest list, not every one in between; a store read that fails ends the stream.
    public func itemUpdates(limit: Int = 50) -> AsyncStream<[FeedItem]> {
        let (stream, continuation) = AsyncStream.makeStream(of: [FeedItem].self, bufferingPolicy: .bufferingNewest(1))
        let states = self.states()
        let store = self.store, feed = self.feed
        // Owned by the stream: it ends with the states (at stop) or when the consumer goes.
        let follower = Task {
            var last: [FeedItem]?
            var lastState: FeedState?
            for await state in states {
                // Only a commit or a retention pass changes what is stored.
                guard state.itemCount != lastState?.itemCount || state.lastSyncAt != lastState?.lastSyncAt || last == nil else { continue }
                lastState = state
                guard let items = try? await store.items(feed: feed, offset: 0, limit: limit) else { break }
                if items != last {
                    last = items
                    continuation.yield(items)
                }
            }
            continuation.finish()
        }
        continuation.onTermination = { _ in follower.cancel() }
        return stream
    }

    // MARK: Control

    /// Begins syncing: the first load, or for a feed loaded in an earlier run, a refresh from the
    /// stored cursors (and backfill). Feed a connectivity verdict first when one is known: an
    /// unknown connectivity counts as online, as in TanStack Query.
    public func start() {
        guard !started, !stopped else { return }
        started = true
        startPeriodicRefresh()
        startBudgetDays()
        apply(.start)
    }

    /// Stops syncing: cancels requests, timers and verdict following, and ends state streams.
    public func stop() {
        guard !stopped else { return }
        stopped = true
        cancelPrefetch()
        for (_, task) in draining { task.cancel() }
        draining = [:]
        for (_, entry) in requests { entry.task.cancel() }
        for (_, entry) in timers { entry.task.cancel() }
        for task in background { task.cancel() }
        requests = [:]
        timers = [:]
        background = []
        broadcast.finish()
    }

    /// Loads newer items (pull to refresh); before a first successful load, retries it.
    public func refresh() { apply(.refresh) }

    /// Loads the next older page, unless the end is reached or one is loading.
    public func loadOlder() { apply(.loadOlder) }

    /// Retries what failed: the first load if it failed, otherwise failed older and newer loads.
    /// Permanent errors are retried too: a manual retry is the only way they are.
    public func retry() { apply(.retry) }

    /// The user has seen the newest items: the new-items count (``FeedState/newItems``, the
    /// presentation's notice) starts again at zero.
    public func markSeen() { apply(.seen) }

    /// Applies a connectivity verdict for the feed's host.
    public func connectivityChanged(_ verdict: Verdict) {
        logger.debug("connectivity", metadata: ["verdict": "\(verdict)"])
        apply(FeedEvent(verdict))
    }

    /// Follows a stream of connectivity verdicts for the feed's host until it ends or ``stop()``.
    public func follow<S: AsyncSequence & Sendable>(_ verdicts: S) where S.Element == Verdict, S.Failure == Never {
        guard !stopped else { return }
        background.append(Task { [weak self] in
            for await verdict in verdicts {
                guard let self else { return }
                await self.connectivityChanged(verdict)
            }
        })
    }

    // MARK: Driving the machine

    private func apply(_ event: FeedEvent) {
        guard !stopped else { return }
        let effects = machine.handle(event, now: time.now, random: &random)
        for effect in effects { perform(effect) }
        let state = machine.state
        if state != published {
            published = state
            broadcast.publish(state)
            parentBroadcast?.publish(state)
        }
    }

    private func perform(_ effect: FeedEffect) {
        switch effect {
        case .fetch(let request):
            logger.debug("fetch", metadata: ["direction": "\(request.direction)", "cursor": "\(request.cursor ?? "-")"])
            if let outcome = takePrecommitted(for: request) {
                // A task, not a call: the machine is in the middle of handling an event.
                let task = Task { [weak self] in
                    guard let self else { return }
                    await self.answer(request, committed: outcome)
                }
                requests[request.direction] = (request.token, task)
                return
            }
            if let window = request.revalidate {
                startRevalidation(request, window: window)
                return
            }
            let source = self.source
            let early = takePrefetch(for: request)
            // An older request goes only once the pages fetched ahead of a failure have answered,
            // and not before a Retry-After one of them brought.
            let drain = request.direction == .older ? Array(draining.values) : []
            let clock = time.clock
            let task = Task { [weak self] in
                let result: Result<FeedPage, any Error>
                if let early {
                    result = await withTaskCancellationHandler { await early.result } onCancel: { early.cancel() }
                } else {
                    do {
                        for task in drain { _ = await task.result }
                        if request.direction == .older, let notBefore = await self?.olderNotBefore {
                            try await clock.sleep(until: notBefore, tolerance: nil)
                        }
                        result = .success(try await Self.fetch(request, from: source))
                    } catch {
                        result = .failure(error)
                    }
                }
                await self?.finish(request, result)
            }
            requests[request.direction] = (request.token, task)
        case .cancelFetch(let direction, let token):
            // Offline while a page was being committed: its successor must not load either.
            if direction == .older || direction == readAheadOrigin { cancelPrefetch() }
            if let entry = requests[direction], entry.token == token {
                entry.task.cancel()
                requests[direction] = nil
            }
        case .schedule(let direction, let delay, let token):
            // The deadline is fixed now, not when the task first runs, so the timer fires at the
            // same instant however the tasks interleave (which keeps test clocks deterministic).
            let deadline = time.clock.now.advanced(by: delay)
            let clock = time.clock
            let task = Task { [weak self] in
                if delay > .zero {
                    do { try await clock.sleep(until: deadline, tolerance: nil) } catch { return }
                }
                await self?.timerFired(direction, token)
            }
            timers[direction] = (token, task)
        case .cancelTimer(let direction, let token):
            if let entry = timers[direction], entry.token == token {
                entry.task.cancel()
                timers[direction] = nil
            }
        }
    }

    private static func fetch(_ request: FetchRequest, from source: any FeedSource) async throws -> FeedPage {
        switch (request.direction, request.cursor) {
        case (.older, let cursor?):
            return try await source.fetchOlder(cursor: cursor)
        case (.newer, let cursor?):
            return try await source.fetchNewer(cursor: cursor)
        default:
            // The first load, or newer items of a feed whose server never gave a newer cursor.
            return try await source.fetchInitial()
        }
    }

    private func finish(_ request: FetchRequest, _ result: Result<FeedPage, any Error>) async {
        // Before the answer is handled: what it decides next is decided on today's bytes.
        chargeMeteredBytes()
        let direction = request.direction
        if requests[direction]?.token == request.token { requests[direction] = nil }
        if direction == .older, let cursor = request.cursor { arrived[cursor] = nil }
        // Checked synchronously on the actor right before the commit: an answer to a request
        // that going offline (or stop) cancelled is never stored.
        guard isWanted(request) else { return }
        switch result {
        case .success(let page):
            largestPage = max(largestPage, page.items.count)
            let next = machine.backfillCursor(afterCommitting: page, answering: request.token, in: direction)
            if let next {
                // Fetched ahead already when this page arrived early; otherwise start here.
                if !(readAhead.first?.cursor.isExactly(next) ?? false) {
                    cancelPrefetch()
                    fetchAhead(next)
                }
                readAheadOrigin = direction
            }
            if direction == .older, let next {
                committingItems[direction] = page.items.count
                await gatherBackfill(after: next)
                committingItems[direction] = nil
                // Checked again after the wait, for the same reason as above.
                guard isWanted(request) else { return }
            }
            // Older pages that arrived while the last commit ran go into this one's transaction.
            let ahead = direction == .older ? takeArrived(after: page, next: next) : []
            committingItems[direction] = ([page] + ahead.map(\.page)).reduce(0) { $0 + $1.items.count }
            if !ahead.isEmpty { extendReadAhead() }
            let outcomes: [CommitOutcome]
            do {
                defer { committingItems[direction] = nil }
                if ahead.isEmpty {
                    outcomes = [try await store.commit(feed: feed, direction: direction, page: page, at: time.now)]
                } else {
                    outcomes = try await store.commit(feed: feed, direction: direction, pages: [page] + ahead.map(\.page), at: time.now)
                }
            } catch {
                cancelPrefetch(from: direction)
                commitFailed(request, error)
                return
            }
            guard let outcome = outcomes.first else {
                cancelPrefetch(from: direction)
                apply(.failed(direction, request.token, FeedError(.other, "store: a commit of \(ahead.count + 1) pages reported none committed")))
                return
            }
            // A store that stopped part-way committed the first pages only: the rest are fetched again.
            for (entry, outcome) in zip(ahead, outcomes.dropFirst()) { precommitted[ExactID(entry.cursor)] = outcome }
            if outcomes.count < ahead.count + 1 { cancelPrefetch(from: direction) }
            apply(.committed(direction, request.token, outcome))
            // Not asked for (the backfill depth was reached, or the cursor moved): never used.
            if next == nil || requests[.older] == nil { cancelPrefetch(from: direction) }
        case .failure(let error):
            let feedError = FeedError(wrapping: error)
            logger.info("load failed", metadata: ["direction": "\(direction)", "error": "\(feedError)"])
            // A retry comes after a backoff, with this page's cursor: nothing fetched ahead of it
            // is asked for before then. What is on its way already is heard out, not cut off.
            if direction == .older { abandonPrefetch() }
            apply(.failed(direction, request.token, feedError))
        }
    }

    /// Runs a revalidation walk for a newer request; a walk that meets no stored item gives way
    /// to the plain newer request.
    private func startRevalidation(_ request: FetchRequest, window: RevalidationWindow) {
        let source = self.source, store = self.store, feed = self.feed
        let task = Task { [weak self] in
            let walked: Result<RevalidationResult?, any Error>
            do {
                walked = .success(try await Self.walk(window, feed: feed, store: store, source: source))
            } catch {
                walked = .failure(error)
            }
            await self?.finishRevalidation(request, window: window, walked)
        }
        requests[request.direction] = (request.token, task)
    }

    /// Reads `window` of the feed from its head down, as ``RevalidationWalk`` asks; `nil` when
    /// the walk met no stored item.
    private static func walk(
        _ window: RevalidationWindow, feed: String, store: any FeedStore, source: any FeedSource
    ) async throws -> RevalidationResult? {
        // The window and as much below it: an item read below the window confirms its last ones.
        let limit: Int = switch window {
        case .items(let count): count * 2 + 100
        case .all: Int.max
        }
        let stored = try await store.items(feed: feed, offset: 0, limit: limit).map(\.id)
        var walk = RevalidationWalk(window: window, stored: stored)
        var step = walk.start()
        while true {
            switch step {
            case .fetch(.head): step = walk.received(try await source.fetchInitial())
            case .fetch(.older(let cursor)): step = walk.received(try await source.fetchOlder(cursor: cursor))
            case .finished(let result): return result
            case .abandoned: return nil
            }
        }
    }

    private func finishRevalidation(_ request: FetchRequest, window: RevalidationWindow, _ walked: Result<RevalidationResult?, any Error>) async {
        chargeMeteredBytes()
        if requests[.newer]?.token == request.token { requests[.newer] = nil }
        guard isWanted(request) else { return }
        switch walked {
        case .failure(let error):
            await finish(request, .failure(error))
        case .success(nil):
            logger.info("revalidation met no stored item: refreshing instead", metadata: ["window": "\(window)"])
            var plain = request
            plain.revalidate = nil
            perform(.fetch(plain))
        case .success(let result?):
            let outcome: CommitOutcome
            do {
                outcome = try await store.revalidate(feed: feed, walk: result, at: time.now)
            } catch {
                commitFailed(request, error)
                return
            }
            logger.info("revalidated", metadata: [
                "window": "\(window)", "requests": "\(result.requests)", "read": "\(result.items.count)",
                "inserted": "\(outcome.inserted)", "updated": "\(outcome.updated)", "deleted": "\(outcome.deleted)",
            ])
            apply(.committed(.newer, request.token, outcome))
        }
    }

    /// A store that refused the answer to `request`: logged, and the load failed with the store's words.
    private func commitFailed(_ request: FetchRequest, _ error: any Error) {
        logger.error("store commit failed", metadata: ["error": "\(error)"])
        apply(.failed(request.direction, request.token, FeedError(.other, "store: \(error)")))
    }

    /// Whether the machine still waits for this request's answer; an answer it no longer waits
    /// for (going offline or stopping cancelled the request) is dropped, never stored.
    private func isWanted(_ request: FetchRequest) -> Bool {
        guard !stopped, machine.isRunning(request.token, in: request.direction) else {
            logger.debug("dropped answer of a cancelled request", metadata: ["direction": "\(request.direction)"])
            droppedAnswers += 1
            return false
        }
        return true
    }

    /// Waits, at most ``SyncConfiguration/backfillCommitDelay``, for the pages fetched ahead right
    /// behind the older page about to be committed (whose older cursor is `next`), so that one
    /// transaction stores up to ``SyncConfiguration/backfillCommitPages`` of them.
    ///
    /// Much of a commit's cost is per transaction, not per row: SQLite's write-ahead log takes
    /// the B-trees' partly filled edge pages again at every commit. A backfill on loopback used
    /// to commit most pages alone, and its store wrote a third more and used a quarter more CPU
    /// (BENCHMARKS.md). The wait never holds the network back: it takes at most half the
    /// read-ahead, and it ends as soon as no further page is on its way or one fails. One timer
    /// covers the whole wait: a timer per arrival cost the event loop as much as the grouping
    /// saved.
    private func gatherBackfill(after next: String) async {
        let configuration = machine.configuration
        let wanted = min(configuration.backfillCommitPages, max(1, configuration.readAheadPages / 2)) - 1
        guard wanted > 0, configuration.backfillCommitDelay > .zero else { return }
        let deadline = time.clock.now.advanced(by: configuration.backfillCommitDelay)
        var timer: Task<Void, Never>?
        defer { timer?.cancel() }
        aheadFailedDuringWait = false
        while !stopped, !aheadFailedDuringWait, readAhead.first?.cursor.isExactly(next) ?? false {
            let ready = readAhead.prefix { arrived[$0.cursor] != nil }.count
            guard ready < wanted, ready < readAhead.count, time.clock.now < deadline else { return }
            if timer == nil {
                let clock = time.clock
                timer = Task { [weak self] in
                    guard (try? await clock.sleep(until: deadline, tolerance: nil)) != nil else { return }
                    await self?.wakeArrivalWaiter()
                }
            }
            // Woken when a page fetched ahead arrives or fails, the read-ahead is dropped, or the
            // deadline passes: the loop looks again after any of them.
            await withCheckedContinuation { arrivalWaiter = $0 }
        }
    }

    private func wakeArrivalWaiter() {
        arrivalWaiter?.resume()
        arrivalWaiter = nil
    }

    /// The pages fetched ahead that follow `page` one after another and have all arrived, taken
    /// off the read-ahead, as far as the backfill would go on loading them.
    private func takeArrived(after page: FeedPage, next: String?) -> [(cursor: String, page: FeedPage)] {
        var taken: [(cursor: String, page: FeedPage)] = []
        var cursor = next
        // Counted as extendReadAhead counts, with this page and the ones taken (no longer arrived).
        let pending = pendingItems + page.items.count
        while let wanted = cursor, let head = readAhead.first, head.cursor.isExactly(wanted), let arrival = arrived[head.cursor],
              machine.readAheadCursor(after: wanted, pendingItems: pending) != nil {
            readAhead.removeFirst()
            arrived[head.cursor] = nil
            taken.append((head.cursor, arrival))
            cursor = arrival.olderCursor
        }
        return taken
    }

    /// The outcome committed ahead for this older request's cursor, if any. Asking for any other
    /// older cursor means the backfill went past or elsewhere: what was committed ahead is then
    /// only in the store, which the machine reads again through later commits.
    private func takePrecommitted(for request: FetchRequest) -> CommitOutcome? {
        guard request.direction == .older, !precommitted.isEmpty else { return nil }
        guard let cursor = request.cursor, let outcome = precommitted[ExactID(cursor)] else {
            precommitted = [:]
            return nil
        }
        return outcome
    }

    /// Answers an older request whose page was committed with the one before it.
    private func answer(_ request: FetchRequest, committed outcome: CommitOutcome) {
        if requests[.older]?.token == request.token { requests[.older] = nil }
        // Cancelled meanwhile (offline, stop): the outcome stays for the request that asks again.
        guard !stopped, machine.isRunning(request.token, in: .older), let cursor = request.cursor else { return }
        precommitted[ExactID(cursor)] = nil
        apply(.committed(.older, request.token, outcome))
        if requests[.older] == nil { cancelPrefetch(from: .older) }
    }

    private func takePrefetch(for request: FetchRequest) -> Task<FeedPage, any Error>? {
        guard request.direction == .older, let head = readAhead.first else { return nil }
        guard let cursor = request.cursor, head.cursor.isExactly(cursor) else {
            // The machine went another way: nothing fetched ahead will be asked for.
            cancelPrefetch()
            return nil
        }
        readAhead.removeFirst()
        extendReadAhead()
        return head.task
    }

    /// Starts fetching the page at `cursor` ahead of the backfill.
    private func fetchAhead(_ cursor: String) {
        let source = self.source
        readAheadTail = cursor
        readAheadNext = nil
        // Known from the headers while the body is still on its way: the next request need not
        // wait for this page to arrive and be parsed. The callback and the next fetch run at
        // once on the thread that read the headers, until the next request is on its way:
        // enqueued, each hand-over waited behind this page's body and parse on the same event
        // loop, in a chain in which every page waits for the one before (BENCHMARKS.md).
        let inPlace = sourceExecutor != nil
        let known: @Sendable (String?) -> Void = { [weak self] older in
            guard let self else { return }
            // On this actor's executor, as the source promises: no hop, so the next request is
            // queued on the connection before this response's body is read. Told while this
            // actor is still starting that fetch (a source that answers before it first
            // suspends), it waits its turn like any other instead of reordering the run under it.
            let entered = inPlace && self.assumeIsolated { coordinator in
                guard !coordinator.startingFetch else { return false }
                coordinator.knownAhead(older, of: cursor)
                return true
            }
            if !entered { Task.immediate { await self.knownAhead(older, of: cursor) } }
        }
        let id = nextReadAheadID
        nextReadAheadID += 1
        // Not isolated to this actor: the fetch then runs in place up to the request, also when
        // the actor is on the source's executor (leaving that would be a queued hop).
        let fetch: @Sendable () async throws -> FeedPage = { [weak self] in
            do {
                let page = try await source.fetchOlder(cursor: cursor, olderCursorKnown: known)
                await self?.arrivedAhead(page, cursor: cursor, id: id)
                return page
            } catch {
                await self?.failedAhead(error, id: id)
                throw error
            }
        }
        startingFetch = true
        let task = Task.immediate(operation: fetch)
        startingFetch = false
        readAhead.append(ReadAhead(id: id, cursor: cursor, task: task))
    }

    /// A page fetched ahead failed: a Retry-After in its answer holds back the older requests.
    private func failedAhead(_ error: any Error, id: Int) {
        draining[id] = nil
        aheadFailedDuringWait = true
        wakeArrivalWaiter()
        guard let wait = (error as? FeedError)?.retryAfter else { return }
        let until = time.clock.now.advanced(by: wait)
        if olderNotBefore.map({ $0 < until }) ?? true { olderNotBefore = until }
        // The machine learns it too, so the retry it shows is the one that will happen.
        apply(.serverAskedToWait(.older, wait))
    }

    /// The older cursor of the page fetched ahead at `cursor` is known: go on from it if there is room.
    private func knownAhead(_ older: String?, of cursor: String) {
        guard !stopped, readAheadTail?.isExactly(cursor) ?? false, readAheadNext == nil else { return }
        readAheadNext = .some(older)
        extendReadAhead()
    }

    /// A page fetched ahead arrived: keep it for its commit; if it is the newest one, go on from
    /// it if there is room.
    private func arrivedAhead(_ page: FeedPage, cursor: String, id: Int) {
        draining[id] = nil
        defer { wakeArrivalWaiter() }
        let isTail = readAheadTail?.isExactly(cursor) ?? false
        guard !stopped else { return }
        guard readAhead.markArrived(id: id) || isTail else { return }
        arrived[cursor] = page
        largestPage = max(largestPage, page.items.count)
        guard isTail else { return }
        readAheadNext = .some(page.olderCursor)
        extendReadAhead()
    }

    /// Items the backfill holds beyond the machine's count: being committed, fetched ahead (a
    /// page still on its way counted as the largest page so far), or committed ahead and not yet
    /// handed to the machine.
    private var pendingItems: Int {
        committingItems.values.reduce(0, +) + arrived.items
            + readAhead.waiting * largestPage + precommitted.values.reduce(0) { $0 + $1.pageItemCount }
    }

    /// Fetches the page after the newest one fetched ahead, once that one's older cursor is known,
    /// while the run is shorter than the configured read-ahead (in pages, and in the bytes of the
    /// pages that arrived) and the machine would go on loading.
    private func extendReadAhead() {
        let configuration = machine.configuration
        guard readAhead.count < configuration.readAheadPages, let tail = readAheadTail, case .some(let older) = readAheadNext else { return }
        guard arrived.bytes < configuration.readAheadBytes else { return }
        if let notBefore = olderNotBefore, time.clock.now < notBefore { return }
        guard let next = machine.readAheadCursor(after: older, pendingItems: pendingItems),
              !next.isExactly(tail), !readAhead.contains(cursor: next)
        else { return }
        fetchAhead(next)
    }

    private func cancelPrefetch() {
        for entry in readAhead { entry.task.cancel() }
        dropPrefetch()
    }

    /// Ends the read-ahead without cancelling what is on its way: those requests finish in
    /// ``draining``, and their answers are only heard for a Retry-After.
    private func abandonPrefetch() {
        for entry in readAhead { draining[entry.id] = entry.task }
        dropPrefetch()
    }

    private func dropPrefetch() {
        wakeArrivalWaiter()
        for entry in readAhead { arrived[entry.cursor] = nil }
        readAhead.removeAll()
        readAheadOrigin = nil
        readAheadTail = nil
        readAheadNext = nil
    }

    /// Cancels the pages fetched ahead only if this direction's commits continue them: a newer
    /// page committed meanwhile must not cancel the successors of an older one.
    private func cancelPrefetch(from direction: Direction) {
        if readAheadOrigin == direction { cancelPrefetch() }
    }

    private func timerFired(_ direction: Direction, _ token: FetchToken) {
        if timers[direction]?.token == token { timers[direction] = nil }
        apply(.timerFired(direction, token))
    }

    private func startPeriodicRefresh() {
        guard let interval = machine.configuration.refreshInterval, interval > .zero else { return }
        let clock = time.clock
        let origin = clock.now
        background.append(Task { [weak self] in
            // Deadlines on a fixed grid: a slow refresh does not push later ones back.
            var tick = 1
            while !Task.isCancelled {
                do { try await clock.sleep(until: origin.advanced(by: interval * tick), tolerance: nil) } catch { return }
                guard let self else { return }
                await self.periodicRefresh()
                tick += 1
            }
        })
    }

    private func periodicRefresh() { apply(.periodicRefresh) }

    // MARK: The metered budget

    /// Charges what the source received since the last charge to today's usage while the host
    /// is reached over a metered link, tells the machine, and records it in the store.
    private func chargeMeteredBytes() {
        let total = source.bytesReceived
        let grown = total - bytesCharged
        bytesCharged = total
        guard grown > 0, let budget = machine.configuration.meteredBudget, machine.isOnMeteredLink else { return }
        let usage = (machine.meteredUsage ?? MeteredUsage(day: budget.day(of: time.now), bytes: 0)).adding(grown, at: time.now, budget: budget)
        apply(.meteredUsage(usage))
        let store = self.store, feed = self.feed, logger = self.logger, previous = usageWrite
        usageWrite = Task {
            await previous?.value
            do {
                try await store.recordMeteredUsage(feed: feed, usage)
            } catch {
                logger.warning("metered usage not recorded: a restart counts today's bytes from the last recorded", metadata: ["error": "\(error)"])
            }
        }
    }

    /// With a budget: at each local midnight, tells the machine that a new day began, so loads
    /// the spent budget held back resume.
    private func startBudgetDays() {
        guard let budget = machine.configuration.meteredBudget else { return }
        let clock = time.clock
        background.append(Task { [weak self] in
            while !Task.isCancelled {
                guard let now = await self?.time.now else { return }
                let wait = Duration.seconds(budget.nextDay(after: now).timeIntervalSince(now))
                do { try await clock.sleep(until: clock.now.advanced(by: max(wait, .milliseconds(1))), tolerance: nil) } catch { return }
                guard let self else { return }
                await self.newBudgetDay(budget)
            }
        })
    }

    private func newBudgetDay(_ budget: MeteredBudget) {
        let today = budget.day(of: time.now)
        guard machine.meteredUsage?.day != today else { return }
        logger.info("metered budget renewed", metadata: ["day": "\(today)", "previous": "\(machine.meteredUsage.map { ByteCount.describe($0.bytes) } ?? "0 B")"])
        apply(.meteredUsage(MeteredUsage(day: today, bytes: 0)))
    }
}

/// An actor that only lends its executor: a ``FeedCoordinator`` whose source has none runs on
/// it, as an ordinary (default) actor.
private actor ExecutorHost {}
