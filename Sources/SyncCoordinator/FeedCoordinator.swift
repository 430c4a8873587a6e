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
    private let store: any FeedStore
    private let time: TimeBase<C>
    private var random: AnyRandomSource
    private let logger: Logger

    private var requests: [Direction: (token: FetchToken, task: Task<Void, Never>)] = [:]
    private var timers: [Direction: (token: FetchToken, task: Task<Void, Never>)] = [:]
    private var background: [Task<Void, Never>] = []
    /// Older pages fetched ahead of the backfill, oldest last: each one's cursor is the older
    /// cursor of the page before it. While the store commits one page, the next ones are already
    /// on their way, so the network and the store each work at their own pace. The head goes to
    /// the machine's next older fetch when it asks for that cursor; the whole run is cancelled
    /// otherwise.
    private var readAhead: [ReadAhead] = []
    /// The direction whose commits the read-ahead continues: only that direction's failure or
    /// change of course cancels it.
    private var readAheadOrigin: Direction?
    /// The cursor of the newest page fetched ahead (taken by the machine or not): only its
    /// arrival may extend the run.
    private var readAheadTail: String?
    /// The older cursor of that page once it has arrived: where the run goes on when there is room.
    private var readAheadNext: String??
    /// Items of the pages being committed, by direction (an older and a newer page may be at once).
    private var committingItems: [Direction: Int] = [:]
    /// Items of the pages fetched ahead that arrived and are not committed yet, by cursor: with
    /// ``committingItems``, what the backfill holds beyond the store.
    private var arrivedItems: [String: Int] = [:]

    /// How many pages the backfill fetches ahead of its commits.
    static var readAheadDepth: Int { 4 }

    private struct ReadAhead {
        let cursor: String
        let task: Task<FeedPage, any Error>
    }
    private var started = false
    private var stopped = false
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
        self.init(
            feed: feed, source: source, store: store, persisted: persisted, configuration: configuration,
            time: TimeBase(clock: clock, wallOrigin: wallOrigin), random: random, logger: logger, parent: nil
        )
    }

    init(
        feed: String,
        source: any FeedSource,
        store: any FeedStore,
        persisted: PersistedFeed,
        configuration: SyncConfiguration,
        time: TimeBase<C>,
        random: any RandomSource,
        logger: Logger,
        parent: Broadcast<FeedState>?
    ) {
        self.feed = feed
        self.source = source
        self.store = store
        self.time = time
        self.random = AnyRandomSource(random)
        var logger = logger
        logger[metadataKey: "feed"] = "\(feed)"
        self.logger = logger
        self.parentBroadcast = parent
        self.machine = FeedMachine(feed: feed, persisted: persisted, configuration: configuration)
        self.published = machine.state
    }

    deinit {
        // Released without stop(): its requests, timers and followers end with it, and its
        // streams finish, rather than outliving their owner.
        for entry in readAhead { entry.task.cancel() }
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
        apply(.start)
    }

    /// Stops syncing: cancels requests, timers and verdict following, and ends state streams.
    public func stop() {
        guard !stopped else { return }
        stopped = true
        cancelPrefetch()
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
            let source = self.source
            let early = takePrefetch(for: request)
            let task = Task { [weak self] in
                let result: Result<FeedPage, any Error>
                if let early {
                    result = await withTaskCancellationHandler { await early.result } onCancel: { early.cancel() }
                } else {
                    do {
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
        let direction = request.direction
        if requests[direction]?.token == request.token { requests[direction] = nil }
        if direction == .older, let cursor = request.cursor { arrivedItems[cursor] = nil }
        // Checked synchronously on the actor right before the commit: an answer to a request
        // that going offline (or stop) cancelled is never stored.
        guard !stopped, machine.isRunning(request.token, in: direction) else {
            logger.debug("dropped answer of a cancelled request", metadata: ["direction": "\(direction)"])
            droppedAnswers += 1
            return
        }
        switch result {
        case .success(let page):
            let next = machine.backfillCursor(afterCommitting: page, answering: request.token, in: direction)
            if let next {
                // Fetched ahead already when this page arrived early; otherwise start here.
                if !(readAhead.first?.cursor.isExactly(next) ?? false) {
                    cancelPrefetch()
                    fetchAhead(next)
                }
                readAheadOrigin = direction
            }
            committingItems[direction] = page.items.count
            let outcome: CommitOutcome
            do {
                defer { committingItems[direction] = nil }
                outcome = try await store.commit(feed: feed, direction: direction, page: page, at: time.now)
            } catch {
                cancelPrefetch(from: direction)
                logger.error("store commit failed", metadata: ["error": "\(error)"])
                apply(.failed(direction, request.token, FeedError(.other, "store: \(error)")))
                return
            }
            apply(.committed(direction, request.token, outcome))
            // Not asked for (the backfill depth was reached, or the cursor moved): never used.
            if next.map({ readAhead.first?.cursor.isExactly($0) ?? false }) ?? true { cancelPrefetch(from: direction) }
        case .failure(let error):
            let feedError = FeedError(wrapping: error)
            logger.info("load failed", metadata: ["direction": "\(direction)", "error": "\(feedError)"])
            // A retry comes after a backoff, with this page's cursor: nothing fetched ahead of it
            // is asked for before then.
            if direction == .older { cancelPrefetch() }
            apply(.failed(direction, request.token, feedError))
        }
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
        readAhead.append(ReadAhead(cursor: cursor, task: Task { [weak self] in
            let page = try await source.fetchOlder(cursor: cursor)
            await self?.arrivedAhead(page, cursor: cursor)
            return page
        }))
    }

    /// A page fetched ahead arrived: note where it goes on, and go on if there is room.
    private func arrivedAhead(_ page: FeedPage, cursor: String) {
        guard !stopped, readAheadTail?.isExactly(cursor) ?? false else { return }
        arrivedItems[cursor] = page.items.count
        readAheadNext = .some(page.olderCursor)
        extendReadAhead()
    }

    /// Fetches the page after the newest one fetched ahead, once that one has arrived, while the
    /// run is shorter than ``readAheadDepth`` and the machine would go on loading.
    private func extendReadAhead() {
        guard readAhead.count < Self.readAheadDepth, let tail = readAheadTail, case .some(let older) = readAheadNext else { return }
        let pending = committingItems.values.reduce(0, +) + arrivedItems.values.reduce(0, +)
        guard let next = machine.readAheadCursor(after: older, pendingItems: pending),
              !next.isExactly(tail), !readAhead.contains(where: { $0.cursor.isExactly(next) })
        else { return }
        fetchAhead(next)
    }

    private func cancelPrefetch() {
        for entry in readAhead {
            entry.task.cancel()
            arrivedItems[entry.cursor] = nil
        }
        readAhead = []
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
}
