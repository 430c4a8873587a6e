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
    var machine: FeedMachine
    let source: any FeedSource
    /// The source's executor, which this actor runs on: see ``FeedSource/executor``.
    let sourceExecutor: (any SerialExecutor)?
    /// Lends its executor when the source has none: the coordinator is then an ordinary actor.
    private let ownExecutor = ExecutorHost()
    let store: any FeedStore
    let time: TimeBase<C>
    private var random: AnyRandomSource
    let logger: Logger

    var requests: [Direction: (token: FetchToken, task: Task<Void, Never>)] = [:]
    private var timers: [Direction: (token: FetchToken, task: Task<Void, Never>)] = [:]
    var background: [Task<Void, Never>] = []
    /// The backfill's read-ahead: which older pages to fetch ahead of the store, which to group
    /// into a commit, which to cancel. This actor only performs what it decides
    /// (``carryOut(_:)``), holding each fetch's task under the id it handed out.
    var readAhead = ReadAheadMachine<C.Instant>()
    /// The read-ahead's fetches: its run's, and those left to finish after a failure.
    var fetchesAhead: [ReadAheadID: Task<FeedPage, any Error>] = [:]
    /// Set while a read-ahead fetch runs its first, synchronous part (see ``fetchAhead(_:id:)``).
    var startingFetch = false
    /// A backfill commit waiting for the pages right behind it (``gatherBackfill(after:committing:)``).
    var arrivalWaiter: CheckedContinuation<Void, Never>?
    private var started = false
    var stopped = false
    /// What the source had received when last charged to the budget (``chargeMeteredBytes()``).
    var bytesCharged: Int64
    /// The last write of the metered usage to the store; each waits for the one before.
    var usageWrite: Task<Void, Never>?
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
        for (_, task) in fetchesAhead { task.cancel() }
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
        carryOut(readAhead.stop())
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

    func apply(_ event: FeedEvent) {
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

    func perform(_ effect: FeedEffect) {
        switch effect {
        case .fetch(let request):
            logger.debug("fetch", metadata: ["direction": "\(request.direction)", "cursor": "\(request.cursor ?? "-")"])
            var early: Task<FeedPage, any Error>?
            var drain: [Task<FeedPage, any Error>] = []
            if request.direction == .older {
                let (answer, actions) = readAhead.request(older: request.cursor, backfill: machine, now: time.clock.now)
                carryOut(actions)
                switch answer {
                case .committed(let outcome):
                    // A task, not a call: the machine is in the middle of handling an event.
                    let task = Task { [weak self] in
                        guard let self else { return }
                        await self.answer(request, committed: outcome)
                    }
                    requests[request.direction] = (request.token, task)
                    return
                case .fetchedAhead(let id):
                    early = fetchesAhead.removeValue(forKey: id)
                case .request(let draining):
                    // An older request goes only once the pages fetched ahead of a failure have
                    // answered, and not before a Retry-After one of them brought.
                    drain = draining.compactMap { fetchesAhead[$0] }
                }
            }
            if let window = request.revalidate {
                startRevalidation(request, window: window)
                return
            }
            let source = self.source
            let clock = time.clock
            let task = Task { [weak self, early, drain] in
                let result: Result<FeedPage, any Error>
                if let early {
                    result = await withTaskCancellationHandler { await early.result } onCancel: { early.cancel() }
                } else {
                    do {
                        for task in drain { _ = await task.result }
                        if request.direction == .older, let notBefore = await self?.readAhead.olderNotBefore {
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
            carryOut(readAhead.requestCancelled(direction))
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

    func finish(_ request: FetchRequest, _ result: Result<FeedPage, any Error>) async {
        // Before the answer is handled: what it decides next is decided on today's bytes.
        chargeMeteredBytes()
        let direction = request.direction
        if requests[direction]?.token == request.token { requests[direction] = nil }
        if direction == .older, let cursor = request.cursor { readAhead.requestEnded(older: cursor) }
        // Checked synchronously on the actor right before the commit: an answer to a request
        // that going offline (or stop) cancelled is never stored.
        guard isWanted(request) else { return }
        switch result {
        case .success(let page):
            let next = machine.backfillCursor(afterCommitting: page, answering: request.token, in: direction)
            // Fetched ahead already when this page arrived early; otherwise started here.
            carryOut(readAhead.received(page, in: direction, next: next))
            if direction == .older, let next {
                await gatherBackfill(after: next, committing: page)
                // Checked again after the wait, for the same reason as above.
                guard isWanted(request) else { return }
            }
            // Older pages that arrived while the last commit ran go into this one's transaction.
            let (ahead, actions) = readAhead.group(after: page, next: next, in: direction, backfill: machine, now: time.clock.now)
            carryOut(actions)
            let outcomes: [CommitOutcome]
            do {
                if ahead.isEmpty {
                    outcomes = [try await store.commit(feed: feed, direction: direction, page: page, at: time.now)]
                } else {
                    outcomes = try await store.commit(feed: feed, direction: direction, pages: [page] + ahead.map(\.page), at: time.now)
                }
            } catch {
                carryOut(readAhead.committed(direction, ahead: ahead.map(\.cursor), outcomes: []))
                commitFailed(request, error)
                return
            }
            carryOut(readAhead.committed(direction, ahead: ahead.map(\.cursor), outcomes: outcomes))
            guard let outcome = outcomes.first else {
                apply(.failed(direction, request.token, FeedError(.other, "store: a commit of \(ahead.count + 1) pages reported none committed")))
                return
            }
            apply(.committed(direction, request.token, outcome))
            // Not asked for (the backfill depth was reached, or the cursor moved): never used.
            carryOut(readAhead.handled(direction, continued: next != nil && requests[.older] != nil))
        case .failure(let error):
            let feedError = FeedError(wrapping: error)
            logger.info("load failed", metadata: ["direction": "\(direction)", "error": "\(feedError)"])
            // A retry comes after a backoff, with this page's cursor: nothing fetched ahead of it
            // is asked for before then. What is on its way already is heard out, not cut off.
            carryOut(readAhead.loadFailed(direction))
            apply(.failed(direction, request.token, feedError))
        }
    }

    /// A store that refused the answer to `request`: logged, and the load failed with the store's words.
    func commitFailed(_ request: FetchRequest, _ error: any Error) {
        logger.error("store commit failed", metadata: ["error": "\(error)"])
        apply(.failed(request.direction, request.token, FeedError(.other, "store: \(error)")))
    }

    /// Whether the machine still waits for this request's answer; an answer it no longer waits
    /// for (going offline or stopping cancelled the request) is dropped, never stored.
    func isWanted(_ request: FetchRequest) -> Bool {
        guard !stopped, machine.isRunning(request.token, in: request.direction) else {
            logger.debug("dropped answer of a cancelled request", metadata: ["direction": "\(request.direction)"])
            droppedAnswers += 1
            return false
        }
        return true
    }

    private func timerFired(_ direction: Direction, _ token: FetchToken) {
        if timers[direction]?.token == token { timers[direction] = nil }
        apply(.timerFired(direction, token))
    }
}

/// An actor that only lends its executor: a ``FeedCoordinator`` whose source has none runs on
/// it, as an ordinary (default) actor.
private actor ExecutorHost {}
