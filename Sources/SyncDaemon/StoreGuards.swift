import CMalloc
import EventLoopClock
import Logging
import ServiceLifecycle
import SyncCoordinator
import SyncCore
import SyncStore

/// Ends the daemon when the store is found damaged, deleted or replaced while running: syncd
/// stops with a status the unit restarts on, and the next start opens the path anew (moving a
/// damaged store aside) and loads the feeds again.
struct StoreFaultWatch: Service {
    let faults: AsyncStream<StoreFault>
    let notifier: SystemdNotifier
    let logger: Logger

    /// Watches `store` from now on.
    init(store: SQLiteFeedStore, notifier: SystemdNotifier, logger: Logger) {
        let (faults, found) = AsyncStream<StoreFault>.makeStream(bufferingPolicy: .bufferingNewest(1))
        store.whenUnusable { found.yield($0) }
        self.faults = faults
        self.notifier = notifier
        self.logger = logger
    }

    /// Returns at graceful shutdown; throws the first fault found before it.
    func run() async throws {
        let (faults, notifier, logger) = (faults, notifier, logger)
        // Not `cancelOnGracefulShutdown()` (see ``InternetVerdicts``).
        try await cancelWhenGracefulShutdown {
            for await fault in faults {
                let next = fault.kind == .damaged ? "moves the store aside and loads the feeds again" : "opens \(fault.path) anew"
                logger.critical("\(fault), found while running: syncd stops; its next start \(next)")
                notifier.notify("STATUS=store \(fault.kind.rawValue): \(fault.path)")
                throw fault
            }
        }
    }
}

/// Gives back what a sync left behind once the feeds have been still for ``quiet``: SQLite's
/// page caches and idle readers, the allocator's free pages, then the code pages that start-up
/// and the sync mapped (``CodePages``). Between refreshes minutes apart the daemon only needs
/// its working set; the next sync allocates and faults in what it needs again.
///
/// The code goes with the rest, after the same second: paging it out later left the HTTP pool's
/// close of its idle connection (a minute after the last request) to fault in code just evicted.
struct MemoryRelease: Service {
    /// How long the feeds must have been still before memory is released.
    static let quiet = Duration.seconds(1)

    let store: SQLiteFeedStore
    let activity: AsyncStream<FeedState>
    let clock: EventLoopClock

    func run() async {
        let store = store
        let release = QuietRelease(quiet: Self.quiet, clock: clock) {
            await store.releaseMemory()
            // Freed blocks stay in glibc's arenas until trimmed: return whole free pages to the kernel.
            malloc_trim(0)
            CodePages.pageOut()
        }
        await cancelWhenGracefulShutdown { await release.run(following: activity) }
    }
}

/// Pings systemd's watchdog only while the coordinator answers and no write of the store has run
/// past the stall limit, so that systemd restarts a wedged daemon or one whose store hangs (a
/// frozen filesystem, a disk that stopped answering).
struct Watchdog: Service {
    let interval: Duration
    let stallLimit: Duration
    let coordinator: SyncCoordinator<EventLoopClock>
    let store: SQLiteFeedStore
    let notifier: SystemdNotifier
    let clock: EventLoopClock
    let logger: Logger

    func run() async {
        await cancelWhenGracefulShutdown { await watch() }
    }

    private func watch() async {
        var stalled = false
        while !Task.isCancelled {
            _ = await coordinator.feedIDs
            if let running = store.writeRunningFor, running > stallLimit {
                if !stalled {
                    stalled = true
                    logger.critical("the store \(store.path) has not finished a write for \(running) (its filesystem may be frozen or its disk not answering): syncd stops answering systemd's watchdog, which restarts it")
                    notifier.notify("STATUS=store stalled (\(store.path)): a write has run past \(stallLimit)")
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
