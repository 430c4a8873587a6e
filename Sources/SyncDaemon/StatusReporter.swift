import AsyncBroadcast
import ConnectivityPolicy
import EventLoopClock
import Foundation
import Logging
import ServiceLifecycle
import SyncControl
import SyncCoordinator
import SyncCore
import SyncStore

/// Keeps the control interface's status and systemd's STATUS= line current: rebuilds the
/// status whenever a feed's state or the connectivity verdict changes.
actor StatusReporter: Service {
    private let coordinator: SyncCoordinator<EventLoopClock>
    private let store: SQLiteFeedStore
    private let broadcaster: Broadcast<ControlStatus>
    private let notifier: SystemdNotifier
    private let sources: [String: String]
    /// Each feed's `stale_after`, where configured.
    private let staleAfter: [String: Duration]
    private let budgets: [String: MeteredBudget]
    /// When the daemon started, as the status reports it.
    private let started = Date()
    private let contentRows: Int
    private let logger: Logger
    private let verdicts: AsyncStream<Verdict>
    /// Spaces rebuilds ``minimumInterval`` apart: the daemon's clock.
    private let clock: EventLoopClock
    /// The internet at large (a route to a public address): shown, but no feed depends on it.
    private var connectivity: Verdict?
    private var connectivitySince: Date?
    private(set) var statusLine = "starting"
    /// The shortest time between two rebuilds of the status.
    static let minimumInterval = Duration.milliseconds(100)
    /// The content rows last shown, per feed, by item id. A stored item never changes, so its
    /// row (a JSON parse and a summary) is made once while it stays among the top rows.
    private var rowCache: [String: [String: ControlRow]] = [:]

    init(
        coordinator: SyncCoordinator<EventLoopClock>, store: SQLiteFeedStore, broadcaster: Broadcast<ControlStatus>,
        notifier: SystemdNotifier, sources: [String: String], staleAfter: [String: Duration] = [:], budgets: [String: MeteredBudget] = [:], contentRows: Int,
        connectivity verdicts: AsyncStream<Verdict>, clock: EventLoopClock, logger: Logger
    ) {
        self.clock = clock
        self.verdicts = verdicts
        self.coordinator = coordinator
        self.store = store
        self.broadcaster = broadcaster
        self.notifier = notifier
        self.sources = sources
        self.staleAfter = staleAfter
        self.budgets = budgets
        self.contentRows = contentRows
        self.logger = logger
    }

    /// Follows feed states and the connectivity verdicts until graceful shutdown or cancellation.
    ///
    /// A refresh reads every feed's state afresh, so changes that arrive while one is being
    /// built, or within ``minimumInterval`` after it, coalesce into the next: a lone change is
    /// shown at once, and a backfill that commits a page every millisecond rebuilds the status
    /// (a store read per feed, a publication to every watcher) ten times a second, not a
    /// thousand.
    func run() async {
        await cancelWhenGracefulShutdown { await self.follow() }
    }

    private func follow() async {
        let verdicts = self.verdicts
        let (pending, signal) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        await withDiscardingTaskGroup { group in
            group.addTask {
                for await verdict in verdicts {
                    await self.connectivityChanged(verdict)
                    signal.yield()
                }
            }
            group.addTask {
                for await _ in await self.coordinator.updates() { signal.yield() }
            }
            let clock = self.clock
            group.addTask {
                for await _ in pending {
                    await self.refresh()
                    do { try await clock.sleep(for: Self.minimumInterval) } catch { return }
                }
            }
        }
    }

    /// Records a connectivity verdict (from the stream, or the monitor's current one at start).
    func connectivityChanged(_ verdict: Verdict) {
        if verdict != connectivity {
            logger.notice("internet: \(verdict)")
            connectivity = verdict
            connectivitySince = Date()
        }
    }

    /// Rebuilds and publishes the status from the current state.
    func refresh() async {
        let states = await coordinator.states()
        var feeds: [ControlFeed] = []
        for state in states {
            let items = (try? await store.items(feed: state.feed, offset: 0, limit: contentRows)) ?? []
            feeds.append(StatusMapping.feed(
                state, source: sources[state.feed], rows: rows(for: items, feed: state.feed), staleAfter: staleAfter[state.feed],
                budget: budgets[state.feed]))
        }
        // The summary and banner come from each feed's own verdict; the internet verdict is
        // shown beside them, for information only.
        let internet = connectivity.map { ControlConnectivity($0, since: connectivitySince) }
        let storeFault = store.lastWriteFault
        let status = ControlStatus(
            version: SyncDaemonService.version, internet: internet, feeds: feeds, started: started, store: storeFault.map(StatusMapping.storeProblem))
        broadcaster.publishIfChanged(status)
        let line = StatusMapping.statusLine(feeds: states, connectivity: status.connectivity, store: storeFault)
        if line != statusLine {
            statusLine = line
            notifier.notify("STATUS=\(line)")
        }
    }

    private func rows(for items: [FeedItem], feed: String) -> [ControlRow] {
        let cached = rowCache[feed] ?? [:]
        var current: [String: ControlRow] = [:]
        let rows = items.map { item in
            let row = cached[item.id] ?? ControlRow(item)
            current[item.id] = row
            return row
        }
        rowCache[feed] = current
        return rows
    }
}
