import AsyncBroadcast
import CMalloc
import ConnectivityCheck
import ConnectivityPolicy
import EventLoopClock
import Foundation
import HTTPFeedSource
import LinkCost
import Logging
import NameResolution
import NetlinkMonitor
import Reachability
import ServiceLifecycle
import SyncControl
import SyncCoordinator
import SyncCore
import SyncMetrics
import SyncStore

/// syncd as a swift-service-lifecycle `Service`: the netlink monitor feeds one verdict stream
/// per feed host into the coordinator, which syncs each feed from its HTTP source into the
/// SQLite store; the Varlink control server answers from the same state, and systemd hears
/// READY=1, STATUS=, WATCHDOG=1 and STOPPING=1.
public struct SyncDaemonService: Service {
    /// syncd's version, as `GetInfo`, `syncctl status` and `--version` report it.
    public static let version = SyncdInterface.version

    /// What the daemon runs on.
    public let configuration: DaemonConfiguration
    let logger: Logger
    let notifier: SystemdNotifier
    /// Stored items shown as content rows in each feed's presentation.
    let contentRows: Int
    /// Every timer of the daemon (retries, refreshes, settle, checks, the watchdog): event-loop
    /// timers, so an idle daemon has no periodic wakeup of libdispatch's.
    let clock = EventLoopClock()

    /// A daemon for `configuration`; `notifier` reaches systemd, `contentRows` is how many stored
    /// items each feed's status shows.
    public init(configuration: DaemonConfiguration, logger: Logger, notifier: SystemdNotifier = SystemdNotifier(), contentRows: Int = 10) {
        self.configuration = configuration
        self.logger = logger
        self.notifier = notifier
        self.contentRows = contentRows
    }

    /// Opens the store, starts the monitor and wires every part, then runs them as one
    /// `ServiceGroup` until graceful shutdown (SIGTERM through the parent group) or a part fails.
    ///
    /// Parts start in this order and stop in the reverse one: the monitor, the resolver and the
    /// per-host ladders, the control server, the status reporter, then the coordinator (started
    /// only once the socket listens, so a second instance that cannot bind never syncs).
    public func run() async throws {
        notifier.notify("STATUS=starting")
        // The store opens on its thread while the monitor takes its first dumps.
        async let opened = openStore()
        let monitor = NetlinkMonitor(
            configuration: .init(networkNamespacePath: configuration.networkNamespacePath, receiveBufferSize: configuration.receiveBufferSize),
            logger: logger
        )
        do {
            try await monitor.start()
        } catch {
            logger.critical("cannot watch the network", metadata: ["error": "\(error)"])
            throw error
        }
        let store: SQLiteFeedStore
        do {
            store = try await opened
        } catch {
            await monitor.stop()
            throw error
        }

        let client = HTTPFeedClient(options: .init(connectTimeout: configuration.connectTimeout, idleTimeout: configuration.idleConnectionTimeout))
        let checker = configuration.connectivityCheck.map { check in
            ConnectivityChecker(
                configuration: .init(url: check.url, expectedStatus: check.status, expectedBody: check.body, interval: check.interval, timeout: check.timeout),
                logger: logger
            )
        }
        do {
            try await runParts(store: store, monitor: monitor, client: client, checker: checker)
        } catch {
            await monitor.stop()
            try? await client.shutdown()
            try? await checker?.shutdown()
            throw error
        }
        await monitor.stop()
        try? await client.shutdown()
        try? await checker?.shutdown()
    }

    private func runParts(store: SQLiteFeedStore, monitor: NetlinkMonitor, client: HTTPFeedClient, checker: ConnectivityChecker?) async throws {
        let coordinator = SyncCoordinator(store: store, clock: clock, logger: logger)
        let resolver = NameResolver(configuration: .init(refreshInterval: configuration.resolveInterval), logger: logger)
        let metrics = SyncdMetrics(version: Self.version)
        var reachabilities: [HostReachability<EventLoopClock>] = []
        let networkManager = configuration.followsNetworkManager
            ? NetworkManagerWatcher(logger: logger) : nil
        let linkCosts = LinkCostTracker(monitor: monitor, networkManager: networkManager, configuration: configuration.linkCost, logger: logger)
        // Before any feed's first verdict: a feed whose link is metered by configuration, lease
        // or link type must not start a backfill as if it were not.
        linkCosts.decideNow()
        var sources: [String: String] = [:]
        var httpSources: [String: HTTPFeedSource] = [:]
        var hostsCounted = Set<String>()
        for feed in configuration.feeds {
            let http = try HTTPFeedSource(configuration: feed.http, client: client, logger: logger)
            httpSources[feed.name] = http
            // The configured URL is the authority: cursors stored for another URL would keep
            // reading the old source.
            if case .changed(let previous) = try await store.adopt(source: feed.http.url.absoluteString, feed: feed.name) {
                logger.notice("feed url changed: a new source, stored cursors reset, items kept", metadata: [
                    "feed": "\(feed.name)",
                    "previous": "\(URL(string: previous)?.redactedForLog ?? "<unparseable URL>")",
                    "url": "\(feed.http.url.redactedForLog)",
                ])
            }
            let reachability = feedReachability(feed, monitor: monitor, resolver: resolver)
            reachabilities.append(reachability)
            logger.info("feed", metadata: ["feed": "\(feed.name)", "url": "\(feed.http.url.redactedForLog)", "reachability": "\(reachability.destination)"])
            let host = feed.http.url.host ?? "the server"
            let source = MetricsRecordingSource(
                base: EvidenceRecordingSource(base: http, reachability: reachability, host: host), feed: feed.name, metrics: metrics)
            // Feeds of one host have a ladder each, with the same verdicts: one counts the host's changes.
            let counted = hostsCounted.insert(host).inserted
            let verdicts = reachability.verdicts().map { @Sendable verdict in
                if counted { metrics.verdict(verdict, host: host) }
                return verdict
            }
            let coordinated = try await coordinator.addFeed(feed.name, source: source, configuration: feed.sync, verdicts: verdicts)
            // The stream delivers the verdict too, but asynchronously: handing one over now means
            // a feed that starts offline never sends its first request before it knows. A name
            // not yet resolved is judged by the internet at large until it is.
            let addresses = reachability.destination.addresses
            if !addresses.isEmpty { await monitor.track(addresses) }
            await coordinated.connectivityChanged(ConnectivityPolicy.evaluate(monitor.snapshot, for: addresses.isEmpty ? .internet : .addresses(addresses)))
            sources[feed.name] = feed.http.url.redactedForLog
        }

        let broadcaster = Broadcast<ControlStatus>(bufferingNewest: 1)
        let lateServer = Late<SyncControlServer>()
        let exposition = DaemonMetrics(
            metrics: metrics, coordinator: coordinator, sources: httpSources, storePath: configuration.storePath, server: lateServer)
        let handler = DaemonControlHandler(
            coordinator: coordinator, store: store, broadcaster: broadcaster, feedNames: configuration.feeds.map(\.name), metrics: exposition)
        let server = SyncControlServer(
            handler: handler,
            configuration: .init(socketPath: configuration.controlSocketPath, controlGroup: configuration.controlGroup, version: Self.version),
            logger: logger
        )
        lateServer.set(server)
        let endpoint = configuration.metricsEndpoint.map { endpoint in
            MetricsEndpoint(configuration: endpoint, logger: self.logger) { await exposition.exposition($0) }
        }
        // One internet verdict, judged once and fanned out: the status reporter shows it, and the
        // follower re-resolves names and re-runs the check on reconnects.
        let internet = Broadcast<Verdict>(bufferingNewest: 16)
        let internetVerdicts = ConnectivityMonitor.verdicts(from: monitor, for: .internet, settle: configuration.settle, clock: clock)
        let internetChanges = internet.subscribe()
        let reporter = StatusReporter(
            coordinator: coordinator, store: store, broadcaster: broadcaster, notifier: notifier,
            sources: sources, staleAfter: configuration.feeds.reduce(into: [:]) { $0[$1.name] = $1.staleAfter },
            budgets: configuration.feeds.reduce(into: [:]) { $0[$1.name] = $1.sync.meteredBudget }, contentRows: contentRows,
            connectivity: internet.subscribe(),
            clock: clock, logger: logger
        )
        try prepareSocketDirectory()

        let hosts = reachabilities
        let logger = self.logger
        let socketPath = configuration.controlSocketPath
        var parts: [ServiceGroupConfiguration.ServiceConfiguration] = [
            .init(service: monitor, serviceName: "netlink monitor"),
            .init(service: linkCosts, serviceName: "link costs"),
            .init(service: UntilShutdown { try await resolver.run() }, serviceName: "name resolver"),
            .init(
                service: UntilShutdown {
                    for await verdict in internetVerdicts { internet.publish(verdict) }
                    internet.finish()
                },
                serviceName: "internet verdict"
            ),
        ]
        for (index, reachability) in hosts.enumerated() {
            parts.append(.init(service: UntilShutdown { await reachability.run() }, serviceName: "reachability \(index)"))
        }
        parts += [
            .init(
                service: UntilShutdown { await self.followInternet(internetChanges, resolver: resolver, checker: checker, reachabilities: hosts) },
                serviceName: "internet follower"
            ),
            .init(
                service: Self.reportingFailure("control socket failed", metadata: ["socket": "\(socketPath)"], logger: logger) { try await server.run() },
                serviceName: "control server"
            ),
            .init(service: reporter, serviceName: "status reporter"),
            .init(
                service: ClosureService {
                    try await self.sync(
                        coordinator: coordinator, server: server, endpoint: endpoint, reporter: reporter, broadcaster: broadcaster, monitor: monitor,
                        costs: (linkCosts, networkManager))
                },
                serviceName: "coordinator"
            ),
        ]
        if let networkManager {
            parts.append(.init(service: networkManager, serviceName: "NetworkManager watcher"))
        }
        if let endpoint {
            parts.append(.init(
                service: Self.reportingFailure("metrics endpoint failed", logger: logger) { try await endpoint.run() },
                serviceName: "metrics endpoint"))
        }
        if let textfile = configuration.metricsTextfile {
            parts.append(.init(
                service: MetricsTextfile(configuration: textfile, changes: await coordinator.updates(), clock: clock, logger: logger) {
                    await exposition.exposition(.prometheusText)
                },
                serviceName: "metrics textfile"))
        }
        let store = store
        // A store found damaged, deleted or replaced while running stays so: syncd stops with a
        // status the unit restarts on, and the next start opens the path anew (moving a damaged
        // store aside) and loads the feeds again.
        let (damage, damaged) = AsyncStream<StoreFault>.makeStream(bufferingPolicy: .bufferingNewest(1))
        store.whenUnusable { damaged.yield($0) }
        let notifier = notifier
        parts.append(.init(
            service: UntilShutdown {
                for await fault in damage {
                    let next = fault.kind == .damaged ? "moves the store aside and loads the feeds again" : "opens \(fault.path) anew"
                    logger.critical("\(fault), found while running: syncd stops; its next start \(next)")
                    notifier.notify("STATUS=store \(fault.kind.rawValue): \(fault.path)")
                    throw fault
                }
            },
            serviceName: "store damage"
        ))
        parts.append(.init(
            service: UntilShutdown {
                await QuietRelease(quiet: Self.releaseAfter, clock: clock) { await Self.releaseMemory(store) }
                    .run(following: await coordinator.updates())
            },
            serviceName: "memory release"
        ))
        if let interval = SystemdNotifier.watchdogInterval() {
            parts.append(.init(service: UntilShutdown { await self.watchdog(every: interval, coordinator: coordinator, store: store) }, serviceName: "watchdog"))
        }
        // Nested in the caller's group: its graceful shutdown (SIGTERM) reaches every part here.
        let group = ServiceGroup(configuration: .init(services: parts, logger: logger))
        try await group.run()
    }

    /// A part that runs `body` and, when it fails, logs `message` (critical, with the error) before
    /// the failure ends the group: the journal then says which part ended syncd and why.
    private static func reportingFailure(
        _ message: Logger.Message, metadata: Logger.Metadata = [:], logger: Logger, _ body: @escaping @Sendable () async throws -> Void
    ) -> ClosureService {
        ClosureService {
            do {
                try await body()
            } catch {
                logger.critical(message, metadata: metadata.merging(["error": "\(error)"]) { $1 })
                throw error
            }
        }
    }

    /// How long the feeds must have been still before ``releaseMemory(_:)`` runs.
    static let releaseAfter = Duration.seconds(1)

    /// Gives back what a sync left behind: SQLite's page caches and idle readers, the
    /// allocator's free pages, then the code pages that start-up and the sync mapped
    /// (``CodePages``). Between refreshes minutes apart the daemon only needs its working set;
    /// the next sync allocates and faults in what it needs again.
    ///
    /// The code goes with the rest, after the same second: paging it out 30 s later instead left
    /// the HTTP pool's close of its idle connection (60 s after the last request) to fault in
    /// code just evicted, 11–12 context switches instead of 3–5 (BENCHMARKS.md, "Idle cost").
    private static func releaseMemory(_ store: SQLiteFeedStore) async {
        await store.releaseMemory()
        // Freed blocks stay in glibc's arenas until trimmed: return whole free pages to the kernel.
        malloc_trim(0)
        CodePages.pageOut()
    }

    /// The coordinator's lifetime: started once clients can connect, stopped on shutdown.
    ///
    /// READY=1 means clients can connect and see a verdict: only once the socket is bound (a
    /// second instance fails there and never reports ready), the metrics endpoint listens when
    /// one is configured, and the status carries the connectivity the monitor already knows,
    /// not "unknown".
    private func sync(
        coordinator: SyncCoordinator<EventLoopClock>, server: SyncControlServer, endpoint: MetricsEndpoint?, reporter: StatusReporter,
        broadcaster: Broadcast<ControlStatus>, monitor: NetlinkMonitor, costs: (tracker: LinkCostTracker, networkManager: NetworkManagerWatcher?)
    ) async throws {
        // The server's or the endpoint's own failure ends the group and says why.
        guard await server.waitUntilListening() else {
            try? await gracefulShutdown()
            return
        }
        if let endpoint, await endpoint.waitUntilListening() == nil {
            try? await gracefulShutdown()
            return
        }
        await settleLinkCosts(costs.tracker, networkManager: costs.networkManager, coordinator: coordinator)
        try await coordinator.start()
        await reporter.connectivityChanged(ConnectivityPolicy.evaluate(monitor.snapshot, for: .internet))
        await reporter.refresh()
        notifier.notify("READY=1", "STATUS=\(await reporter.statusLine)")
        logger.info("syncd ready", metadata: ["feeds": "\(configuration.feeds.count)", "socket": "\(configuration.controlSocketPath)"])
        try? await gracefulShutdown()
        notifier.notify("STOPPING=1", "STATUS=stopping")
        logger.info("syncd stopping")
        // In-flight requests are cancelled; a page is committed in one transaction, so a commit
        // either finished or never happened.
        await coordinator.stop()
        broadcaster.finish()
    }

    /// Before the feeds start: lets NetworkManager have its say on what each link costs (its first
    /// reading, at most ``networkManagerWait``), and waits, as long again at most, until every feed
    /// reachable over a link carries the cost decided for it. A feed behind a link NetworkManager
    /// calls metered then never begins a backfill as if it were not. The configuration's, the
    /// leases' and the hardware's costs were decided before the feeds took their first verdict.
    private func settleLinkCosts(_ tracker: LinkCostTracker, networkManager: NetworkManagerWatcher?, coordinator: SyncCoordinator<EventLoopClock>) async {
        guard let networkManager else { return }
        let wait = Self.networkManagerWait, clock = clock
        // Timed on the event loops' clock: a Task.sleep would wake an idle syncd every second
        // from then on (libdispatch's timer thread).
        if await !networkManager.firstReading(within: wait, clock: clock) {
            logger.info("NetworkManager has not answered yet: the feeds start without its link costs, which apply when it answers", metadata: ["waited": "\(wait)"])
            return
        }
        tracker.decideNow()
        let costs = tracker.costs
        func carried(_ state: FeedState) -> Bool {
            guard case .online(let link?, _, let cost)? = state.connectivity?.status else { return true }
            return cost == (costs[link] ?? .unknown)
        }
        let updates = await coordinator.updates()
        let settled = await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                var latest: [String: FeedState] = [:]
                for await state in updates {
                    latest[state.feed] = state
                    if latest.values.allSatisfy(carried) { return true }
                }
                return false
            }
            group.addTask {
                try? await clock.sleep(for: wait)
                return false
            }
            let first = await group.next() ?? false
            group.cancelAll()
            return first
        }
        if !settled {
            logger.info("the feeds' verdicts have not taken NetworkManager's link costs yet: they apply when they do", metadata: ["waited": "\(wait)"])
        }
    }

    /// How long the feeds wait, at most, for NetworkManager's link costs at start.
    static let networkManagerWait = Duration.seconds(2)

    /// The ladder for one feed's host: its addresses (a literal) or its name, judged by the
    /// kernel's route, the resolver, and the evidence of its requests; an unreachable server is
    /// probed with a TCP connect to the feed's port.
    private func feedReachability(_ feed: DaemonConfiguration.Feed, monitor: NetlinkMonitor, resolver: NameResolver) -> HostReachability<EventLoopClock> {
        let url = feed.http.url
        let port = url.port ?? (url.scheme?.lowercased() == "https" ? 443 : 80)
        let timeout = configuration.connectTimeout
        return HostReachability(
            destination: Destination(urlHost: url.host),
            monitor: monitor,
            resolver: resolver,
            configuration: .init(settle: configuration.settle, unansweredThreshold: configuration.unansweredThreshold),
            clock: clock,
            probe: { address in
                if case .unreachable = await ServerProbe.connect(to: address, port: port, timeout: timeout) { return false }
                return true
            },
            logger: logger
        )
    }

    /// On every change of the internet verdict, names are resolved again (a new network may
    /// have a new resolver and new answers) and, when online, the connectivity check runs; the
    /// check also runs at its interval. Its answer limits every feed (a portal) or clears that.
    private func followInternet(
        _ changes: AsyncStream<Verdict>,
        resolver: NameResolver,
        checker: ConnectivityChecker?,
        reachabilities: [HostReachability<EventLoopClock>]
    ) async {
        let (triggers, trigger) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                var previous: Verdict?
                for await verdict in changes {
                    if previous != nil { resolver.reresolve() }
                    previous = verdict
                    if verdict.isOnline { trigger.yield() }
                }
                trigger.finish()
            }
            if let checker {
                group.addTask {
                    while !Task.isCancelled {
                        do { try await clock.sleep(for: checker.configuration.interval) } catch { break }
                        trigger.yield()
                    }
                }
                group.addTask {
                    for await _ in triggers {
                        let result = await checker.check()
                        logger.debug("connectivity check", metadata: ["result": "\(result)"])
                        let portal: String?
                        switch result {
                        case .portal(let url):
                            logger.warning("captive portal: sign in to the network", metadata: ["portal": "\(url.absoluteString)"])
                            portal = url.absoluteString
                        case .full:
                            portal = nil
                        case .noAnswer(let reason):
                            // The check's own server may be down: each feed's requests judge its server.
                            logger.notice("connectivity check got no answer", metadata: ["reason": "\(reason)"])
                            portal = nil
                        }
                        for reachability in reachabilities { reachability.portalChanged(portal) }
                    }
                }
            }
            await group.next()
            group.cancelAll()
        }
    }

    /// Under systemd, RuntimeDirectory= makes it; by hand, the daemon does.
    private func prepareSocketDirectory() throws {
        let directory = URL(fileURLWithPath: configuration.controlSocketPath).deletingLastPathComponent()
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
    }

    /// Opens the store; a damaged one is moved aside (kept for inspection) and a new one made in
    /// its place, to be filled from the servers again.
    ///
    /// - Throws: ``StoreFault`` when no store can be used there (logged, in words, as critical).
    private func openStore() async throws -> SQLiteFeedStore {
        do {
            return try await openStoreOnce()
        } catch let fault as StoreFault where fault.kind == .damaged {
            let moved: String
            do {
                moved = try SQLiteFeedStore.moveAside(fault.path)
            } catch {
                let stuck = StoreFault(.other, path: fault.path, detail: "it is damaged and cannot be moved aside (\(error)): move it away by hand")
                logger.critical("\(stuck)")
                throw stuck
            }
            logger.error("\(fault): moved to \(moved); a new store is loaded from the servers")
            logger.debug("the damaged store's open failed", metadata: ["sqlite": "\(fault.detail)"])
            notifier.notify("STATUS=store damaged, moved to \(moved); starting anew")
            return try await openStoreOnce()
        }
    }

    /// Opens the store once, on a thread of its own.
    ///
    /// Opening upgrades a store written by an older syncd, which can take seconds (rebuilding the
    /// item table in backfill order: ~3.6 s per million items) and must neither hold an event loop
    /// nor run into systemd's start timeout: while it lasts, systemd hears every second that the
    /// start goes on, and why.
    ///
    /// Opening also checks the store (`quick_check`, about a read of the file) and its item counts.
    private func openStoreOnce() async throws -> SQLiteFeedStore {
        let path = configuration.storePath
        let directory = URL(fileURLWithPath: path).deletingLastPathComponent()
        do {
            do {
                try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            } catch {
                throw StoreFault.classify(error, path: path)
            }
            // Retention never goes below the rows the presentation shows.
            var retention: [String: SQLiteFeedStore.Retention] = [:]
            for feed in configuration.feeds where feed.keepItems != nil || feed.keepAge != nil {
                retention[feed.name] = .init(keepItems: feed.keepItems, keepAge: feed.keepAge, minimum: contentRows)
            }
            let notifier = notifier, clock = clock, limits = retention, removals = configuration.changeLogRemovals
            return try await withThrowingTaskGroup(of: SQLiteFeedStore?.self) { group in
                group.addTask {
                    try await withCheckedThrowingContinuation { continuation in
                        Thread {
                            // Commits yield to the event loops, and to whatever else runs on the machine.
                            continuation.resume(with: Result { try SQLiteFeedStore(path: path, retention: limits, scheduling: .throughput, tombstoneLimit: removals) })
                        }.start()
                    }
                }
                group.addTask {
                    while !Task.isCancelled {
                        try await clock.sleep(for: .seconds(1))
                        notifier.notify("EXTEND_TIMEOUT_USEC=10000000", "STATUS=opening the store (upgrading a store written by an older syncd)")
                    }
                    return nil
                }
                defer { group.cancelAll() }
                // The open is the only child that returns a store; the other ends only when cancelled.
                while let opened = try await group.next() {
                    if let opened {
                        for (feed, count) in opened.recountedFeeds.sorted(by: { $0.key < $1.key }) {
                            logger.warning("the store's count of a feed's items was wrong, and is corrected", metadata: ["feed": "\(feed)", "was": "\(count)"])
                        }
                        return opened
                    }
                }
                throw CancellationError()
            }
        } catch let fault as StoreFault {
            if fault.kind != .damaged {
                logger.critical("\(fault)")
                logger.debug("the store's open failed", metadata: ["sqlite": "\(fault.detail)"])
            }
            throw fault
        } catch {
            logger.critical("cannot open the store", metadata: ["path": "\(configuration.storePath)", "error": "\(error)"])
            throw error
        }
    }

    /// Pings the watchdog only while the coordinator answers and no write of the store has run
    /// past ``DaemonConfiguration/storeStallLimit``, so that systemd restarts a wedged daemon or
    /// one whose store hangs (a frozen filesystem, a disk that stopped answering).
    private func watchdog(every interval: Duration, coordinator: SyncCoordinator<EventLoopClock>, store: SQLiteFeedStore) async {
        let limit = configuration.storeStallLimit
        var stalled = false
        while !Task.isCancelled {
            _ = await coordinator.feedIDs
            if let running = store.writeRunningFor, running > limit {
                if !stalled {
                    stalled = true
                    logger.critical("the store \(store.path) has not finished a write for \(running) (its filesystem may be frozen or its disk not answering): syncd stops answering systemd's watchdog, which restarts it")
                    notifier.notify("STATUS=store stalled (\(store.path)): a write has run past \(limit)")
                }
            } else {
                if stalled {
                    stalled = false
                    logger.notice("the store \(store.path) finished its stalled write: syncd answers the watchdog again")
                    notifier.notify("STATUS=store answering again (\(store.path))")
                }
                notifier.notify("WATCHDOG=1")
            }
            try? await clock.sleep(for: interval)
        }
    }
}

/// A part that runs until cancelled, as a service that also ends on graceful shutdown.
struct UntilShutdown: Service {
    let body: @Sendable () async throws -> Void

    init(_ body: @escaping @Sendable () async throws -> Void) {
        self.body = body
    }

    func run() async throws {
        let body = self.body
        do {
            try await cancelWhenGracefulShutdown { try await body() }
        } catch is CancellationError {
            // Cancelled for shutdown: the ending asked for.
        }
    }
}
