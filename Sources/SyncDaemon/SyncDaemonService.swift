import AsyncBroadcast
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
        // A failure before the group runs releases the monitor, whose thread then ends on its own.
        let store = try await opened

        let client = HTTPFeedClient(options: .init(connectTimeout: configuration.connectTimeout, idleTimeout: configuration.idleConnectionTimeout))
        let checker = configuration.connectivityCheck.map { check in
            ConnectivityChecker(
                configuration: .init(url: check.url, expectedStatus: check.status, expectedBody: check.body, interval: check.interval, timeout: check.timeout),
                logger: logger
            )
        }
        // Shared clients, not parts: their connections close once every part has stopped.
        func closeClients() async {
            try? await client.shutdown()
            try? await checker?.shutdown()
        }
        do {
            try await runParts(store: store, monitor: monitor, client: client, checker: checker)
        } catch {
            await closeClients()
            throw error
        }
        await closeClients()
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
        let internet = InternetVerdicts(monitor: monitor, settle: configuration.settle, clock: clock)
        let follower = InternetFollower(
            changes: internet.broadcast.subscribe(), resolver: resolver, checker: checker, reachabilities: reachabilities, clock: clock, logger: logger)
        let reporter = StatusReporter(
            coordinator: coordinator, store: store, broadcaster: broadcaster, notifier: notifier,
            sources: sources, staleAfter: configuration.feeds.reduce(into: [:]) { $0[$1.name] = $1.staleAfter },
            budgets: configuration.feeds.reduce(into: [:]) { $0[$1.name] = $1.sync.meteredBudget }, contentRows: contentRows,
            connectivity: internet.broadcast.subscribe(),
            clock: clock, logger: logger
        )
        try prepareSocketDirectory()

        var parts: [ServiceGroupConfiguration.ServiceConfiguration] = [
            .init(service: monitor, serviceName: "netlink monitor"),
            .init(service: linkCosts, serviceName: "link costs"),
            .init(service: resolver, serviceName: "name resolver"),
            .init(service: internet, serviceName: "internet verdict"),
        ]
        for (index, reachability) in reachabilities.enumerated() {
            parts.append(.init(service: reachability, serviceName: "reachability \(index)"))
        }
        parts += [
            .init(service: follower, serviceName: "internet follower"),
            .init(
                service: ReportingFailure(
                    base: server, message: "control socket failed", metadata: ["socket": "\(configuration.controlSocketPath)"], logger: logger),
                serviceName: "control server"
            ),
            .init(service: reporter, serviceName: "status reporter"),
            .init(
                service: FeedsLifetime(
                    coordinator: coordinator, server: server, endpoint: endpoint, reporter: reporter, broadcaster: broadcaster, monitor: monitor,
                    linkCosts: linkCosts, networkManager: networkManager, notifier: notifier, clock: clock,
                    feedCount: configuration.feeds.count, socketPath: configuration.controlSocketPath, logger: logger),
                serviceName: "coordinator"
            ),
        ]
        if let networkManager {
            parts.append(.init(service: networkManager, serviceName: "NetworkManager watcher"))
        }
        if let endpoint {
            parts.append(.init(service: ReportingFailure(base: endpoint, message: "metrics endpoint failed", logger: logger), serviceName: "metrics endpoint"))
        }
        if let textfile = configuration.metricsTextfile {
            parts.append(.init(
                service: MetricsTextfile(configuration: textfile, changes: await coordinator.updates(), clock: clock, logger: logger) {
                    await exposition.exposition(.prometheusText)
                },
                serviceName: "metrics textfile"))
        }
        parts.append(.init(service: StoreFaultWatch(store: store, notifier: notifier, logger: logger), serviceName: "store damage"))
        parts.append(.init(service: MemoryRelease(store: store, activity: await coordinator.updates(), clock: clock), serviceName: "memory release"))
        if let interval = SystemdNotifier.watchdogInterval() {
            parts.append(.init(
                service: Watchdog(
                    interval: interval, stallLimit: configuration.storeStallLimit, coordinator: coordinator, store: store, notifier: notifier, clock: clock,
                    logger: logger),
                serviceName: "watchdog"))
        }
        // Nested in the caller's group: its graceful shutdown (SIGTERM) reaches every part here.
        let group = ServiceGroup(configuration: .init(services: parts, logger: logger))
        try await group.run()
    }

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
}
