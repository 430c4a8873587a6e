import AsyncBroadcast
import ConnectivityPolicy
import Foundation
import Logging
import ServiceLifecycle
import SyncCore

/// Keeps several feeds in sync, each independently (one ``FeedCoordinator`` actor per feed), over
/// one store, clock and configuration. This is what syncd wraps and what in-process clients embed.
///
/// A failing or slow feed never blocks, fails or delays another: feeds share no lock, no request
/// and no retry state; calls that address every feed only hand each one an event.
///
/// Lifecycle: add feeds, then ``start()``; ``stop()`` is final (a stopped coordinator refuses to
/// start or add feeds, with ``SyncCoordinatorError/stopped``). As a swift-service-lifecycle
/// `Service`, ``run()`` starts it and stops it on graceful shutdown or cancellation.
public actor SyncCoordinator<C: Clock>: Service where C.Duration == Duration {
    private let store: any FeedStore
    private let configuration: SyncConfiguration
    private let time: TimeBase<C>
    private var random: any RandomSource
    private let logger: Logger
    private var feeds: [String: FeedCoordinator<C>] = [:]
    private var order: [String] = []
    private var lastVerdict: Verdict?
    private var started = false
    private var stopped = false
    private let broadcast = Broadcast<FeedState>(bufferingNewest: 256)

    /// - Parameters:
    ///   - store: where every feed is stored (feeds are keyed by identifier).
    ///   - configuration: the default for feeds added without their own.
    ///   - clock: schedules retries, reconnect spread and periodic refresh.
    ///   - random: seeds each feed's own jitter source, so feeds do not retry in lockstep; a
    ///     seeded source makes the whole coordinator reproducible.
    ///   - wallOrigin: the wall-clock date of the clock's current instant.
    public init(
        store: any FeedStore,
        configuration: SyncConfiguration = .default,
        clock: C,
        random: any RandomSource = SystemRandomSource(),
        wallOrigin: Date = Date(),
        logger: Logger = Logger(label: "syncd.coordinator")
    ) {
        self.store = store
        self.configuration = configuration
        self.time = TimeBase(clock: clock, wallOrigin: wallOrigin)
        self.random = random
        self.logger = logger
    }

    /// Adds a feed, reading what the store holds for it. It starts syncing with ``start()`` (or
    /// at once when the coordinator is already started). The last connectivity verdict given to
    /// ``connectivityChanged(_:)`` applies to it.
    ///
    /// - Parameter verdicts: connectivity verdicts for this feed's host, when it has its own.
    @discardableResult
    public func addFeed<S: AsyncSequence & Sendable>(
        _ id: String,
        source: any FeedSource,
        configuration: SyncConfiguration? = nil,
        verdicts: S
    ) async throws -> FeedCoordinator<C> where S.Element == Verdict, S.Failure == Never {
        let feed = try await addFeed(id, source: source, configuration: configuration)
        await feed.follow(verdicts)
        return feed
    }

    /// Adds a feed that follows the coordinator-wide ``connectivityChanged(_:)``.
    @discardableResult
    public func addFeed(_ id: String, source: any FeedSource, configuration: SyncConfiguration? = nil) async throws -> FeedCoordinator<C> {
        guard !stopped else { throw SyncCoordinatorError.stopped }
        if let existing = feeds[id] { return existing }
        let persisted = try await store.load(feed: id)
        let feedConfiguration = configuration ?? self.configuration
        let usage = feedConfiguration.meteredBudget != nil ? try await store.meteredUsage(feed: id) : nil
        // The store was read off the actor: the coordinator may have stopped or gained this feed.
        guard !stopped else { throw SyncCoordinatorError.stopped }
        if let existing = feeds[id] { return existing }
        let seed = UInt64(random.nextFraction() * Double(UInt64(1) << 53))
        let feed = FeedCoordinator(
            feed: id, source: source, store: store, persisted: persisted, meteredUsage: usage,
            configuration: feedConfiguration, time: time,
            random: SeededRandomSource(seed: seed ^ UInt64(truncatingIfNeeded: order.count)),
            logger: logger, parent: broadcast
        )
        feeds[id] = feed
        order.append(id)
        broadcast.publish(await feed.state)
        if let lastVerdict { await feed.connectivityChanged(lastVerdict) }
        if started { await feed.start() }
        return feed
    }

    /// A feed by identifier.
    public func feed(_ id: String) -> FeedCoordinator<C>? { feeds[id] }

    /// Identifiers of the feeds, in the order they were added.
    public var feedIDs: [String] { order }

    /// Starts every feed (and feeds added later). Starting twice is harmless; starting after
    /// ``stop()`` throws ``SyncCoordinatorError/stopped``.
    public func start() async throws(SyncCoordinatorError) {
        guard !stopped else { throw .stopped }
        guard !started else { return }
        started = true
        for id in order { await feeds[id]?.start() }
    }

    /// Stops every feed for good: cancels their requests and timers and ends ``updates()``
    /// streams. Later calls do nothing.
    public func stop() async {
        guard !stopped else { return }
        stopped = true
        for id in order { await feeds[id]?.stop() }
        broadcast.finish()
    }

    /// Whether ``stop()`` was called.
    public var isStopped: Bool { stopped }

    /// Runs the coordinator as a service: starts every feed, and stops them on graceful shutdown
    /// or cancellation.
    public func run() async throws {
        try await run(whenStarted: {})
    }

    /// Runs the coordinator as a service, as ``run()`` does, and calls `whenStarted` once every
    /// feed has started (before the coordinator waits for shutdown): a daemon reports itself
    /// ready there.
    ///
    /// - Throws: ``SyncCoordinatorError/stopped`` when the coordinator was stopped before.
    public func run(whenStarted: @Sendable () async -> Void) async throws {
        try await start()
        await whenStarted()
        // Suspends until shutdown is requested; either way, the feeds stop below.
        try? await gracefulShutdown()
        await stop()
    }

    /// The current state of every feed, in the order they were added.
    public func states() async -> [FeedState] {
        var result: [FeedState] = []
        for id in order {
            if let feed = feeds[id] { result.append(await feed.state) }
        }
        return result
    }

    /// The current state of every feed, then every change of any feed.
    public func updates() async -> AsyncStream<FeedState> {
        broadcast.subscribe(replaying: await states())
    }

    /// Applies a connectivity verdict to every feed that has no stream of its own.
    public func connectivityChanged(_ verdict: Verdict) async {
        lastVerdict = verdict
        for id in order { await feeds[id]?.connectivityChanged(verdict) }
    }

    /// Refreshes every feed, or one.
    public func refresh(feed id: String? = nil) async {
        for feed in targets(id) { await feed.refresh() }
    }

    /// Loads older items of every feed, or one.
    public func loadOlder(feed id: String? = nil) async {
        for feed in targets(id) { await feed.loadOlder() }
    }

    /// Retries what failed in every feed, or one.
    public func retry(feed id: String? = nil) async {
        for feed in targets(id) { await feed.retry() }
    }

    /// Marks every feed, or one, as seen: its new-items count starts again at zero.
    public func markSeen(feed id: String? = nil) async {
        for feed in targets(id) { await feed.markSeen() }
    }

    private func targets(_ id: String?) -> [FeedCoordinator<C>] {
        if let id { return feeds[id].map { [$0] } ?? [] }
        return order.compactMap { feeds[$0] }
    }
}

/// Why a ``SyncCoordinator`` refused a call.
public enum SyncCoordinatorError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The coordinator was stopped; make a new one to sync again.
    case stopped

    /// A sentence for logs and error output.
    public var description: String {
        switch self {
        case .stopped: "the sync coordinator was stopped; make a new one to sync again"
        }
    }
}

extension SyncCoordinator where C == ContinuousClock {
    /// A coordinator on the real monotonic clock with system randomness: what syncd uses.
    public init(store: any FeedStore, configuration: SyncConfiguration = .default, logger: Logger = Logger(label: "syncd.coordinator")) {
        self.init(store: store, configuration: configuration, clock: ContinuousClock(), logger: logger)
    }
}
