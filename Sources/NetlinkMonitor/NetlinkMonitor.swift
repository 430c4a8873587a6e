import CNetlink
import CThread
import ConnectivityPolicy
import AsyncBroadcast
import Foundation
import Logging
import ServiceLifecycle
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Watches the kernel's links, addresses and routes (IPv4 and IPv6) through libnl and publishes
/// a ``NetworkSnapshot`` whenever they change.
///
/// Links and addresses are kept in libnl's cache manager. Routes are received on a libnl socket
/// of their own, parsed with `rtnl_route_parse` and kept in a table keyed by the kernel's route
/// identity, because libnl's route cache does not scale to large tables: its fixed-size hash
/// costs far more per route than reading the messages directly (measured: BENCHMARKS.md, route
/// storm).
///
/// The monitor runs one thread that sleeps in `poll(2)` on the netlink sockets: it never polls
/// on a timer. It keeps its snapshot equal to the kernel's tables, including what the kernel does
/// not announce: when a link loses or regains `IFF_UP`/`IFF_LOWER_UP`, IPv4 routes are flushed or
/// their linkdown flag flips without a notification, so the route table is re-dumped (as
/// NetworkManager does). When notifications overflow the socket buffer (`ENOBUFS`, reported by
/// libnl as `NLE_NOMEM`), every table is re-dumped.
///
/// Lifecycle: ``start()`` opens the sockets and returns with the first snapshot; ``stop()`` ends
/// the thread (waiting without blocking) and finishes every stream. As a swift-service-lifecycle
/// `Service`, ``run()`` starts the monitor if it is not running and stops it on graceful shutdown
/// or cancellation. A monitor released while running stops its thread on its own. It can be
/// started again after a stop.
///
/// ```swift
/// let monitor = NetlinkMonitor()
/// try await monitor.start()
/// for await snapshot in monitor.snapshots() {
///     print(ConnectivityPolicy.evaluate(snapshot))
/// }
/// ```
public final class NetlinkMonitor: Sendable, Service {
    /// How the monitor connects to the kernel.
    public struct Configuration: Sendable {
        /// Watch another network namespace (a path such as `/var/run/netns/NAME` or
        /// `/proc/PID/ns/net`); `nil` watches the caller's own.
        public var networkNamespacePath: String?
        /// Receive buffer for notifications. libnl's 32 KiB default overflows after about 80
        /// unread messages; NetworkManager uses 8 MiB. Above `net.core.rmem_max` it needs
        /// CAP_NET_ADMIN (`SO_RCVBUFFORCE`), otherwise the kernel caps it.
        public var receiveBufferSize: Int

        /// - Parameters:
        ///   - networkNamespacePath: the namespace to watch; `nil` for the caller's own.
        ///   - receiveBufferSize: the notification socket's receive buffer, in bytes.
        public init(networkNamespacePath: String? = nil, receiveBufferSize: Int = 8 << 20) {
            self.networkNamespacePath = networkNamespacePath
            self.receiveBufferSize = receiveBufferSize
        }
    }

    /// Counters that show how the monitor kept up.
    public struct Statistics: Sendable, Hashable, Codable {
        /// Wake-ups that found notifications to read.
        public var batches: Int = 0
        /// Times the kernel dropped notifications (`ENOBUFS`).
        public var overflows: Int = 0
        /// Route table re-dumps after a link lost or regained carrier or admin state.
        public var routeResyncs: Int = 0
        /// Re-dumps of every table after an overflow.
        public var fullResyncs: Int = 0
        /// Snapshots published (only changes are published).
        public var snapshotsPublished: Int = 0
        /// Route lookups asked of the kernel (`RTM_GETROUTE` for one tracked address).
        public var routeLookups: Int = 0
        /// Rule, nexthop and netconf notifications: changes that only the kernel's lookups see.
        public var policyChanges: Int = 0
        /// Route lifetimes that ended (the kernel stopped using the route without a notification),
        /// each followed by a re-dump and fresh lookups.
        public var routeExpiries: Int = 0
        /// Carrier losses published from the raw notification, before libnl had parsed it.
        public var lossesPublishedAhead: Int = 0
        /// Snapshots whose route lookups were not all answered (the request or the read of its
        /// answer failed); each is followed by fresh lookups, sooner or later as they keep failing.
        public var lookupFailures: Int = 0
        /// The receive buffer the kernel granted, in bytes.
        public var receiveBufferBytes: Int = 0
    }

    /// Identifies an observer for ``removeObserver(_:)``.
    public struct ObserverToken: Sendable, Hashable {
        let id: Int
    }

    /// Identifies addresses tracked with ``track(_:)``, for ``untrack(_:)``.
    public struct TrackingToken: Sendable, Hashable {
        let id: Int
    }

    /// How the monitor connects to the kernel.
    public let configuration: Configuration
    /// Everything the monitor's thread uses. The thread holds this, never the monitor, so
    /// releasing the monitor can end the thread.
    let core: MonitorCore

    /// - Parameters:
    ///   - configuration: the namespace to watch and the receive buffer.
    ///   - logger: where overflows, re-dumps and failures are reported.
    public init(configuration: Configuration = .init(), logger: Logger = Logger(label: "syncd.netlink")) {
        self.configuration = configuration
        self.core = MonitorCore(configuration: configuration, logger: logger)
    }

    deinit {
        // Never waits: the thread closes its sockets and finishes the streams on its own.
        core.requestStop()
    }

    /// Opens the netlink sockets, dumps the tables and starts following changes on a thread
    /// named `syncd-netlink`.
    ///
    /// Returns once the first snapshot is available. Throws ``NetlinkError`` with libnl's
    /// message when a socket cannot be opened or a dump fails, or when the monitor is already
    /// running.
    public func start() async throws {
        try await core.start()
    }

    /// Stops following changes and finishes every snapshot stream; returns once the monitor's
    /// thread has closed its sockets and finished the streams (the thread exits right after).
    /// Safe to call more than once, and when the monitor never started.
    public func stop() async {
        core.requestStop()
        await core.waitUntilStopped()
    }

    /// Runs the monitor as a service: starts it unless ``start()`` already did, and returns after
    /// stopping it, on graceful shutdown or cancellation (or when its thread fails).
    public func run() async throws {
        let core = self.core
        if !core.isRunning { try await core.start() }
        await withGracefulShutdownHandler {
            await withTaskCancellationHandler {
                await core.waitUntilStopped()
            } onCancel: {
                core.requestStop()
            }
        } onGracefulShutdown: {
            core.requestStop()
        }
        await stop()
    }

    /// Runs tasks on the monitor's own thread, between its reads of the kernel's notifications.
    ///
    /// A task that prefers this executor (`Task(executorPreference:)`) and consumes
    /// ``ConnectivityMonitor/verdicts(from:for:settle:clock:)`` or ``snapshots()`` is resumed on
    /// the thread that published the value, so no other thread has to wake to deliver it: on a
    /// loaded machine that shortens the tail of the time from the kernel's message to the verdict
    /// (measured: BENCHMARKS.md, "Link change → offline verdict published").
    ///
    /// While such a task runs, the monitor reads no notifications: keep its work brief and never
    /// block in it (hand longer work to another task or actor). When the monitor is not running,
    /// the executor passes jobs to the global concurrent executor, so a task never waits for a
    /// stopped monitor.
    ///
    /// ```swift
    /// let monitor = NetlinkMonitor()
    /// try await monitor.start()
    /// let banner = Task(executorPreference: monitor.taskExecutor) {
    ///     for await verdict in ConnectivityMonitor.verdicts(from: monitor, settle: .zero) {
    ///         print(verdict.isOnline ? "online" : "offline")
    ///     }
    /// }
    /// ```
    public var taskExecutor: any TaskExecutor { core.executor }

    /// The latest snapshot of the kernel's tables.
    public var snapshot: NetworkSnapshot { core.state.withLock { $0.snapshot } }

    /// The kernel's id of the monitor's thread while it runs: tests check that it ends.
    package var threadID: Int32? { core.state.withLock { $0.threadID } }

    /// Counters since the first start.
    public var statistics: Statistics { core.state.withLock { $0.statistics } }

    /// A stream that yields the current snapshot, then every changed one. A slow consumer sees
    /// the newest snapshot, not a backlog. The stream finishes when the monitor stops.
    public func snapshots() -> AsyncStream<NetworkSnapshot> {
        let (broadcast, finished) = core.state.withLock { ($0.broadcast, $0.finished) }
        if finished {
            return AsyncStream { $0.finish() }
        }
        return broadcast.subscribe()
    }

    /// Calls `onSnapshot` on the monitor's thread with the current snapshot (if running) and
    /// every change, and `onFinish` when the monitor stops. Observers must return quickly: they
    /// run before the next notification is read. ``snapshots()`` is the asynchronous form.
    public func addObserver(
        onSnapshot: @escaping @Sendable (NetworkSnapshot) -> Void,
        onFinish: @escaping @Sendable () -> Void = {}
    ) -> ObserverToken {
        let (id, current, finished) = core.state.withLock { state -> (Int, NetworkSnapshot?, Bool) in
            let id = state.nextID
            state.nextID += 1
            if !state.finished { state.observers[id] = MonitorCore.Observer(onSnapshot: onSnapshot, onFinish: onFinish) }
            return (id, state.phase == .running ? state.snapshot : nil, state.finished)
        }
        if finished {
            onFinish()
        } else if let current {
            onSnapshot(current)
        }
        return ObserverToken(id: id)
    }

    /// Stops calling an observer.
    public func removeObserver(_ token: ObserverToken) {
        _ = core.state.withLock { $0.observers.removeValue(forKey: token.id) }
    }

    /// Asks the kernel for its route to each address now and whenever links, addresses, routes,
    /// policy rules, nexthop objects or netconf settings change; every snapshot carries the
    /// answers in ``NetworkSnapshot/kernelRoutes`` until ``untrack(_:)``. Lookups are coalesced
    /// with snapshots: a route storm costs one lookup per address per snapshot, not per change.
    ///
    /// Returns once a snapshot with these addresses' routes has been published (at once when the
    /// monitor is not running: the first snapshot will carry them).
    @discardableResult
    public func track(_ addresses: [IPAddress]) async -> TrackingToken {
        let (token, generation, running) = startTracking(addresses)
        guard running else { return token }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let resumeNow = core.state.withLock { state -> Bool in
                guard state.phase == .running, state.coveredGeneration < generation else { return true }
                state.trackingWaiters.append((generation, continuation))
                return false
            }
            if resumeNow { continuation.resume() }
        }
        return token
    }

    /// ``track(_:)`` without waiting for the lookups: snapshots carry them shortly. Returns the
    /// tracking generation the lookups will cover and whether the monitor is running.
    package func startTracking(_ addresses: [IPAddress]) -> (token: TrackingToken, generation: Int, running: Bool) {
        let (id, generation, running) = core.state.withLock { state in
            let id = state.nextID
            state.nextID += 1
            state.tracked[id] = addresses
            state.trackingGeneration += 1
            return (id, state.trackingGeneration, state.phase == .running)
        }
        core.wake()
        return (TrackingToken(id: id), generation, running)
    }

    /// Sets what each link costs, by link name: ``snapshot`` carries it when this returns, and
    /// every snapshot published from now on (``NetworkSnapshot/linkCosts``), so verdicts name the
    /// cost of the link they go through. A change publishes a new snapshot; the same costs again
    /// publish nothing.
    public func setLinkCosts(_ costs: [String: LinkCostAssessment]) {
        let changed = core.state.withLock { state -> Bool in
            guard state.linkCosts != costs else { return false }
            state.linkCosts = costs
            // Read at once by whoever judges from the current snapshot (a feed's first verdict);
            // the monitor's thread publishes the same costs to the streams as it wakes.
            state.snapshot.linkCosts = costs
            return true
        }
        if changed { core.wake() }
    }

    /// Stops looking up the addresses of `token` (others may still track the same addresses).
    public func untrack(_ token: TrackingToken) {
        let removed = core.state.withLock { state -> Bool in
            guard state.tracked.removeValue(forKey: token.id) != nil else { return false }
            state.trackingGeneration += 1
            return true
        }
        if removed { core.wake() }
    }
}

/// The monitor's shared state and its thread's side of it: what the loop calls, what the thread
/// holds. One per monitor; it outlives the monitor only until the thread has ended.
final class MonitorCore: Sendable {
    struct Observer: Sendable {
        var onSnapshot: @Sendable (NetworkSnapshot) -> Void
        var onFinish: @Sendable () -> Void
    }

    enum Phase: Equatable {
        case idle
        case starting
        case running
    }

    struct State: ~Copyable {
        var phase = Phase.idle
        var threadID: Int32?
        var snapshot = NetworkSnapshot()
        var statistics = NetlinkMonitor.Statistics()
        /// Snapshot streams of the current run; replaced when a stopped monitor starts again.
        var broadcast = Broadcast<NetworkSnapshot>(bufferingNewest: 1)
        var observers: [Int: Observer] = [:]
        var nextID = 0
        /// Set when a run ended, cleared by the next start: streams asked for meanwhile end at once.
        var finished = false
        var stopRequested = false
        /// Write end of the pipe that wakes the loop thread (to stop, or to look up new addresses).
        var wakeFD: Int32 = -1
        /// Callers of ``NetlinkMonitor/stop()`` waiting for the thread to end.
        var stopWaiters: [CheckedContinuation<Void, Never>] = []
        /// Addresses whose kernel route every snapshot carries, by tracking token.
        var tracked: [Int: [IPAddress]] = [:]
        /// What each link costs, by name (``NetlinkMonitor/setLinkCosts(_:)``).
        var linkCosts: [String: LinkCostAssessment] = [:]
        /// Counts changes of `tracked`; the loop reports which one its lookups cover.
        var trackingGeneration = 0
        var coveredGeneration = 0
        var trackingWaiters: [(generation: Int, continuation: CheckedContinuation<Void, Never>)] = []
    }

    let configuration: NetlinkMonitor.Configuration
    let logger: Logger
    let state = Mutex(State())
    /// Runs tasks on the thread while it runs (``NetlinkMonitor/taskExecutor``).
    let executor = MonitorExecutor()

    init(configuration: NetlinkMonitor.Configuration, logger: Logger) {
        self.configuration = configuration
        self.logger = logger
    }

    var isRunning: Bool { state.withLock { $0.phase != .idle } }

    func start() async throws {
        let (readFD, writeFD) = try Self.makePipe()
        do {
            try state.withLock { state throws(NetlinkError) in
                guard state.phase == .idle else { throw NetlinkError("start: the monitor is already running", errno: EALREADY) }
                state.phase = .starting
                state.stopRequested = false
                state.wakeFD = writeFD
                if state.finished {
                    state.finished = false
                    state.broadcast = Broadcast(bufferingNewest: 1)
                }
            }
        } catch {
            close(readFD)
            close(writeFD)
            throw error
        }
        try await withCheckedThrowingContinuation { (ready: CheckedContinuation<Void, any Error>) in
                // The thread holds the core, not the monitor: releasing the monitor stops it.
                let thread = Thread { [self] in
                    _ = syncd_set_thread_name("syncd-netlink")
                    let tid = syncd_gettid()
                    state.withLock { $0.threadID = tid }
                    // The loop is released inside (its sockets closed, libnl's manager freed)
                    // before the thread's end is announced: stop() returns after both.
                    let failure = runLoop(wakeFD: readFD) { ready.resume() }
                    close(readFD)
                    threadEnded()
                    if let failure { ready.resume(throwing: failure) }
                }
                thread.start()
        }
    }

    /// Runs the event loop on the calling thread until it is asked to stop, calling `running`
    /// once it runs; returns why it could not start, if it could not. The loop is released on
    /// return.
    private func runLoop(wakeFD: Int32, running: () -> Void) -> (any Error)? {
        let loop: NetlinkEventLoop
        let jobFD: Int32
        do {
            loop = try NetlinkEventLoop(configuration: configuration, monitor: self)
            jobFD = try executor.attach()
        } catch {
            return error
        }
        state.withLock { $0.phase = .running }
        running()
        loop.run(wakeFD: wakeFD, jobFD: jobFD)
        return nil
    }

    /// Asks the thread to end; does not wait.
    func requestStop() {
        state.withLock { state in
            state.stopRequested = true
            Self.wake(state.wakeFD)
        }
    }

    /// Returns once no thread runs (at once when none does).
    func waitUntilStopped() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = state.withLock { state -> Bool in
                guard state.phase != .idle else { return true }
                state.stopWaiters.append(continuation)
                return false
            }
            if now { continuation.resume() }
        }
    }

    /// Wakes the loop to look at the tracked addresses again.
    func wake() {
        state.withLock { Self.wake($0.wakeFD) }
    }

    /// Writes a byte to a wake-up pipe (this core's, or its executor's). Called under the lock
    /// that guards the descriptor, which is what keeps it from being closed (and its number
    /// reused) in between; the pipe is non-blocking, and a full pipe already wakes.
    static func wake(_ fd: Int32) {
        guard fd >= 0 else { return }
        var byte: UInt8 = 1
        _ = write(fd, &byte, 1)
    }

    // MARK: Called from the loop thread

    func publish(_ snapshot: NetworkSnapshot) {
        let observers = state.withLock { state in
            state.snapshot = snapshot
            state.statistics.snapshotsPublished += 1
            state.broadcast.publish(snapshot)
            return Array(state.observers.values)
        }
        for observer in observers { observer.onSnapshot(snapshot) }
    }

    func updateStatistics(_ body: (inout NetlinkMonitor.Statistics) -> Void) {
        state.withLock { body(&$0.statistics) }
    }

    /// What the loop was woken for: to stop, which addresses to look up (with the tracking
    /// generation they belong to), and what links cost.
    func wakeRequest() -> (stop: Bool, addresses: Set<IPAddress>, generation: Int, linkCosts: [String: LinkCostAssessment]) {
        state.withLock { state in
            (state.stopRequested, Set(state.tracked.values.joined()), state.trackingGeneration, state.linkCosts)
        }
    }

    /// The loop published (or found unchanged) a snapshot whose lookups cover `generation`.
    func lookupsCovered(_ generation: Int) {
        let ready = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.coveredGeneration = max(state.coveredGeneration, generation)
            let covered = state.coveredGeneration
            let ready = state.trackingWaiters.filter { $0.generation <= covered }.map(\.continuation)
            state.trackingWaiters.removeAll { $0.generation <= covered }
            return ready
        }
        for continuation in ready { continuation.resume() }
    }

    /// The thread's last act: the wake pipe closes, streams and observers finish, waiters resume.
    private func threadEnded() {
        // First, so that whatever the ending wakes below resumes on another thread.
        executor.detach()
        let (broadcast, observers, waiters, stopWaiters) = state.withLock { state in
            if state.wakeFD >= 0 { close(state.wakeFD) }
            state.wakeFD = -1
            state.phase = .idle
            state.threadID = nil
            state.finished = true
            defer {
                state.observers = [:]
                state.trackingWaiters = []
                state.stopWaiters = []
            }
            return (state.broadcast, Array(state.observers.values), state.trackingWaiters.map(\.continuation), state.stopWaiters)
        }
        for waiter in waiters { waiter.resume() }
        broadcast.finish()
        for observer in observers { observer.onFinish() }
        for waiter in stopWaiters { waiter.resume() }
    }

    static func makePipe() throws(NetlinkError) -> (Int32, Int32) {
        var fds: [Int32] = [-1, -1]
        guard pipe2(&fds, O_CLOEXEC | O_NONBLOCK) == 0 else { throw NetlinkError("pipe", errno: errno) }
        return (fds[0], fds[1])
    }
}
