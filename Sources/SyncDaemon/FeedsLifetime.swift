import AsyncBroadcast
import ConnectivityPolicy
import EventLoopClock
import LinkCost
import Logging
import NetlinkMonitor
import ServiceLifecycle
import SyncControl
import SyncCoordinator
import SyncCore
import SyncMetrics

/// The feeds' lifetime in the daemon: they start once clients can connect, and stop on shutdown.
///
/// READY=1 means clients can connect and see a verdict: only once the socket is bound (a second
/// instance fails there and never reports ready), the metrics endpoint listens when one is
/// configured, and the status carries the connectivity the monitor already knows, not
/// "unknown". STOPPING=1 goes out as shutdown begins.
struct FeedsLifetime: Service {
    /// How long the feeds wait, at most, for NetworkManager's link costs at start.
    static let networkManagerWait = Duration.seconds(2)

    let coordinator: SyncCoordinator<EventLoopClock>
    let server: SyncControlServer
    let endpoint: MetricsEndpoint?
    let reporter: StatusReporter
    let broadcaster: Broadcast<ControlStatus>
    let monitor: NetlinkMonitor
    let linkCosts: LinkCostTracker
    let networkManager: NetworkManagerWatcher?
    let notifier: SystemdNotifier
    let clock: EventLoopClock
    let feedCount: Int
    let socketPath: String
    let logger: Logger

    func run() async throws {
        defer { broadcaster.finish() }
        // The server's or the endpoint's own failure ends the group and says why.
        guard await server.waitUntilListening() else {
            try? await gracefulShutdown()
            return
        }
        if let endpoint, await endpoint.waitUntilListening() == nil {
            try? await gracefulShutdown()
            return
        }
        await settleLinkCosts()
        let (notifier, logger) = (notifier, logger)
        try await withGracefulShutdownHandler {
            // In-flight requests are cancelled at shutdown; a page is committed in one
            // transaction, so a commit either finished or never happened.
            try await coordinator.run { await ready() }
        } onGracefulShutdown: {
            notifier.notify("STOPPING=1", "STATUS=stopping")
            logger.info("syncd stopping")
        }
    }

    private func ready() async {
        await reporter.connectivityChanged(ConnectivityPolicy.evaluate(monitor.snapshot, for: .internet))
        await reporter.refresh()
        notifier.notify("READY=1", "STATUS=\(await reporter.statusLine)")
        logger.info("syncd ready", metadata: ["feeds": "\(feedCount)", "socket": "\(socketPath)"])
    }

    /// Before the feeds start: lets NetworkManager have its say on what each link costs (its first
    /// reading, at most ``networkManagerWait``), and waits, as long again at most, until every feed
    /// reachable over a link carries the cost decided for it. A feed behind a link NetworkManager
    /// calls metered then never begins a backfill as if it were not. The configuration's, the
    /// leases' and the hardware's costs were decided before the feeds took their first verdict.
    private func settleLinkCosts() async {
        guard let networkManager else { return }
        let wait = Self.networkManagerWait, clock = clock
        // Timed on the event loops' clock: a Task.sleep would wake an idle syncd every second
        // from then on (libdispatch's timer thread).
        if await !networkManager.firstReading(within: wait, clock: clock) {
            logger.info("NetworkManager has not answered yet: the feeds start without its link costs, which apply when it answers", metadata: ["waited": "\(wait)"])
            return
        }
        linkCosts.decideNow()
        let costs = linkCosts.costs
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
}

/// Runs `base` and, when it fails, logs `message` (critical, with the error) before the failure
/// ends the group: the journal then says which part ended syncd and why.
struct ReportingFailure<Base: Service>: Service {
    let base: Base
    let message: Logger.Message
    var metadata: Logger.Metadata = [:]
    let logger: Logger

    func run() async throws {
        do {
            try await base.run()
        } catch {
            logger.critical(message, metadata: metadata.merging(["error": "\(error)"]) { $1 })
            throw error
        }
    }
}
