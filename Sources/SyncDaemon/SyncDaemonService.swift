import ConnectivityPolicy
import Foundation
import HTTPFeedSource
import Logging
import NetlinkMonitor
import ServiceLifecycle
import SyncControl
import SyncCoordinator
import SyncCore
import SyncStore

/// syncd as a swift-service-lifecycle `Service`: the netlink monitor feeds one verdict stream
/// per feed host into the coordinator, which syncs each feed from its HTTP source into the
/// SQLite store; the Varlink control server answers from the same state, and systemd hears
/// READY=1, STATUS=, WATCHDOG=1 and STOPPING=1.
public struct SyncDaemonService: Service {
    public static let version = SyncdInterface.version

    public let configuration: DaemonConfiguration
    let logger: Logger
    let notifier: SystemdNotifier
    /// Stored items shown as content rows in each feed's presentation.
    let contentRows: Int

    public init(configuration: DaemonConfiguration, logger: Logger, notifier: SystemdNotifier = SystemdNotifier(), contentRows: Int = 10) {
        self.configuration = configuration
        self.logger = logger
        self.notifier = notifier
        self.contentRows = contentRows
    }

    public func run() async throws {
        notifier.notify("STATUS=starting")
        let store = try openStore()
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
        defer { monitor.stop() }

        let client = HTTPFeedClient(options: .init(connectTimeout: configuration.connectTimeout))
        let coordinator = SyncCoordinator(store: store, logger: logger)
        var sources: [String: String] = [:]
        for feed in configuration.feeds {
            let source = try HTTPFeedSource(configuration: feed.http, client: client, logger: logger)
            // The configured URL is the authority: cursors stored for another URL would keep
            // reading the old source.
            if case .changed(let previous) = try await store.adopt(source: feed.http.url.absoluteString, feed: feed.name) {
                logger.notice("feed url changed: a new source, stored cursors reset, items kept", metadata: [
                    "feed": "\(feed.name)",
                    "previous": "\(URL(string: previous)?.redactedForLog ?? "<unparseable URL>")",
                    "url": "\(feed.http.url.redactedForLog)",
                ])
            }
            let destination = HostResolver.destination(for: feed.http.url)
            logger.info("feed", metadata: ["feed": "\(feed.name)", "url": "\(feed.http.url.redactedForLog)", "reachability": "\(destination)"])
            let verdicts = ConnectivityMonitor.verdicts(from: monitor, for: destination, settle: configuration.settle)
            let coordinated = try await coordinator.addFeed(feed.name, source: source, configuration: feed.sync, verdicts: verdicts)
            // The stream delivers this verdict too, but asynchronously: handing it over now means
            // a feed that starts offline never sends its first request before it knows.
            await coordinated.connectivityChanged(ConnectivityPolicy.evaluate(monitor.snapshot, for: destination))
            sources[feed.name] = feed.http.url.redactedForLog
        }

        let broadcaster = StatusBroadcaster()
        let handler = DaemonControlHandler(coordinator: coordinator, store: store, broadcaster: broadcaster, feedNames: configuration.feeds.map(\.name))
        let server = SyncControlServer(
            handler: handler,
            configuration: .init(socketPath: configuration.controlSocketPath, controlGroup: configuration.controlGroup, version: Self.version),
            logger: logger
        )
        let reporter = StatusReporter(
            coordinator: coordinator, store: store, broadcaster: broadcaster, notifier: notifier,
            sources: sources, contentRows: contentRows, logger: logger
        )
        let internet = ConnectivityMonitor.verdicts(from: monitor, for: .internet, settle: configuration.settle)

        try prepareSocketDirectory()
        /// Why the daemon's main loop ended.
        enum Ending: Sendable {
            case shutdownRequested
            case controlServerFailed(any Error)
            case helperEnded
        }
        let ending = await withTaskGroup(of: Ending.self) { group -> Ending in
            group.addTask {
                do {
                    try await server.run()
                    return .helperEnded
                } catch {
                    return .controlServerFailed(error)
                }
            }
            group.addTask {
                await reporter.run(connectivity: internet)
                return .helperEnded
            }
            if let interval = SystemdNotifier.watchdogInterval() {
                group.addTask {
                    await watchdog(every: interval, coordinator: coordinator)
                    return .helperEnded
                }
            }
            group.addTask {
                // Until SIGTERM/SIGINT, or until the group is cancelled.
                try? await gracefulShutdown()
                return .shutdownRequested
            }
            // READY=1 means clients can connect and see a verdict: only once the socket is bound
            // (a second instance fails here and never reports ready) and the status carries the
            // connectivity the monitor already knows, not "unknown".
            let listening = await server.waitUntilListening()
            if listening {
                await coordinator.start()
                await reporter.connectivityChanged(ConnectivityPolicy.evaluate(monitor.snapshot, for: .internet))
                await reporter.refresh()
                notifier.notify("READY=1", "STATUS=\(await reporter.statusLine)")
                logger.info("syncd ready", metadata: ["feeds": "\(configuration.feeds.count)", "socket": "\(configuration.controlSocketPath)"])
            }

            var ending = Ending.helperEnded
            while let next = await group.next() {
                ending = next
                if case .helperEnded = next { continue }
                break
            }
            if listening {
                notifier.notify("STOPPING=1", "STATUS=stopping")
                logger.info("syncd stopping")
            }
            // In-flight requests are cancelled; a page is committed in one transaction, so a
            // commit either finished or never happened.
            await coordinator.stop()
            broadcaster.finish()
            group.cancelAll()
            return ending
        }
        try? await client.shutdown()
        if case .controlServerFailed(let error) = ending {
            logger.critical("control socket failed", metadata: ["socket": "\(configuration.controlSocketPath)", "error": "\(error)"])
            throw error
        }
    }

    /// Under systemd, RuntimeDirectory= makes it; by hand, the daemon does.
    private func prepareSocketDirectory() throws {
        let directory = URL(fileURLWithPath: configuration.controlSocketPath).deletingLastPathComponent()
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
    }

    private func openStore() throws -> SQLiteFeedStore {
        let directory = URL(fileURLWithPath: configuration.storePath).deletingLastPathComponent()
        do {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            // Retention never goes below the rows the presentation shows.
            var retention: [String: SQLiteFeedStore.Retention] = [:]
            for feed in configuration.feeds where feed.keepItems != nil || feed.keepAge != nil {
                retention[feed.name] = .init(keepItems: feed.keepItems, keepAge: feed.keepAge, minimum: contentRows)
            }
            return try SQLiteFeedStore(path: configuration.storePath, retention: retention)
        } catch {
            logger.critical("cannot open the store", metadata: ["path": "\(configuration.storePath)", "error": "\(error)"])
            throw error
        }
    }

    /// Pings the watchdog only while the coordinator answers, so a wedged daemon gets restarted.
    private func watchdog(every interval: Duration, coordinator: SyncCoordinator<ContinuousClock>) async {
        while !Task.isCancelled {
            _ = await coordinator.feedIDs
            notifier.notify("WATCHDOG=1")
            try? await Task.sleep(for: interval)
        }
    }
}
