import CNetlink
import ConnectivityPolicy
import Dispatch
import Foundation
import Logging
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Watches the kernel's links, addresses and routes (IPv4 and IPv6) through libnl and publishes
/// a ``NetworkSnapshot`` whenever they change.
///
/// Links and addresses are kept in libnl's cache manager. Routes are received on a libnl socket
/// of their own, parsed with `rtnl_route_parse` and kept in a table keyed by the kernel's route
/// identity, because libnl's route cache does not scale to large tables (its fixed-size hash made
/// a 100,000-route storm cost several times what `ip monitor` spends; see BENCHMARKS.md).
///
/// The monitor runs one thread that sleeps in `poll(2)` on the netlink sockets: it never polls
/// on a timer. It keeps its snapshot equal to the kernel's tables, including what the kernel does
/// not announce: when a link loses or regains `IFF_UP`/`IFF_LOWER_UP`, IPv4 routes are flushed or
/// their linkdown flag flips without a notification, so the route table is re-dumped (as
/// NetworkManager does). When notifications overflow the socket buffer (`ENOBUFS`, reported by
/// libnl as `NLE_NOMEM`), every table is re-dumped.
///
/// ```swift
/// let monitor = NetlinkMonitor()
/// try await monitor.start()
/// for await snapshot in monitor.snapshots() {
///     print(ConnectivityPolicy.evaluate(snapshot))
/// }
/// ```
public final class NetlinkMonitor: Sendable {
    /// How the monitor connects to the kernel.
    public struct Configuration: Sendable {
        /// Watch another network namespace (a path such as `/var/run/netns/NAME` or
        /// `/proc/PID/ns/net`); `nil` watches the caller's own.
        public var networkNamespacePath: String?
        /// Receive buffer for notifications. libnl's 32 KiB default overflows after about 80
        /// unread messages; NetworkManager uses 8 MiB. Above `net.core.rmem_max` it needs
        /// CAP_NET_ADMIN (`SO_RCVBUFFORCE`), otherwise the kernel caps it.
        public var receiveBufferSize: Int

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
        /// The receive buffer the kernel granted, in bytes.
        public var receiveBufferBytes: Int = 0
    }

    struct Observer: Sendable {
        var onSnapshot: @Sendable (NetworkSnapshot) -> Void
        var onFinish: @Sendable () -> Void
    }

    /// Identifies an observer for ``removeObserver(_:)``.
    public struct ObserverToken: Sendable, Hashable {
        let id: Int
    }

    /// Identifies addresses tracked with ``track(_:)``, for ``untrack(_:)``.
    public struct TrackingToken: Sendable, Hashable {
        let id: Int
    }

    private struct State: ~Copyable {
        var snapshot = NetworkSnapshot()
        var statistics = Statistics()
        var subscribers: [Int: AsyncStream<NetworkSnapshot>.Continuation] = [:]
        var observers: [Int: Observer] = [:]
        var nextSubscriber = 0
        var running = false
        var finished = false
        var stopRequested = false
        /// Write end of the pipe that wakes the loop thread (to stop, or to look up new addresses).
        var wakeFD: Int32 = -1
        var stopped: DispatchSemaphore?
        /// Addresses whose kernel route every snapshot carries, by tracking token.
        var tracked: [Int: [IPAddress]] = [:]
        /// Counts changes of `tracked`; the loop reports which one its lookups cover.
        var trackingGeneration = 0
        var coveredGeneration = 0
        var trackingWaiters: [(generation: Int, continuation: CheckedContinuation<Void, Never>)] = []
    }

    public let configuration: Configuration
    let logger: Logger
    private let state = Mutex(State())

    public init(configuration: Configuration = .init(), logger: Logger = Logger(label: "syncd.netlink")) {
        self.configuration = configuration
        self.logger = logger
    }

    deinit {
        stop()
    }

    /// Opens the netlink sockets, dumps the tables and starts following changes.
    ///
    /// Returns once the first snapshot is available. Throws ``NetlinkError`` with libnl's
    /// message when a socket cannot be opened or a dump fails.
    public func start() async throws {
        let (readFD, writeFD) = try Self.makePipe()
        let stopped = DispatchSemaphore(value: 0)
        try state.withLock { state throws(NetlinkError) in
            guard !state.running, !state.finished else { throw NetlinkError("start", errno: EALREADY) }
            state.running = true
            state.stopRequested = false
            state.wakeFD = writeFD
            state.stopped = stopped
        }
        let configuration = self.configuration
        do {
            try await withCheckedThrowingContinuation { (ready: CheckedContinuation<Void, any Error>) in
                let thread = Thread { [self] in
                    defer { stopped.signal() }
                    let loop: NetlinkEventLoop
                    do {
                        loop = try NetlinkEventLoop(configuration: configuration, monitor: self)
                    } catch {
                        close(readFD)
                        ready.resume(throwing: error)
                        return
                    }
                    ready.resume()
                    loop.run(wakeFD: readFD)
                    close(readFD)
                    self.finishSubscribers()
                }
                thread.name = "syncd-netlink"
                thread.start()
            }
        } catch {
            state.withLock { state in
                close(state.wakeFD)
                state.wakeFD = -1
                state.running = false
                state.stopped = nil
            }
            throw error
        }
    }

    /// Stops following changes and finishes every snapshot stream. Safe to call more than once.
    public func stop() {
        let (fd, stopped) = state.withLock { state -> (Int32, DispatchSemaphore?) in
            state.stopRequested = true
            defer {
                state.wakeFD = -1
                state.stopped = nil
                state.running = false
            }
            return (state.wakeFD, state.stopped)
        }
        guard fd >= 0 else { return }
        Self.wake(fd)
        stopped?.wait()
        close(fd)
    }

    /// The latest snapshot of the kernel's tables.
    public var snapshot: NetworkSnapshot { state.withLock { $0.snapshot } }

    /// Counters since start.
    public var statistics: Statistics { state.withLock { $0.statistics } }

    /// A stream that yields the current snapshot, then every changed one. A slow consumer sees
    /// the newest snapshot, not a backlog. The stream finishes when the monitor stops.
    public func snapshots() -> AsyncStream<NetworkSnapshot> {
        let (stream, continuation) = AsyncStream<NetworkSnapshot>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let id: Int? = state.withLock { state in
            if state.finished { return nil }
            let id = state.nextSubscriber
            state.nextSubscriber += 1
            state.subscribers[id] = continuation
            if state.running { continuation.yield(state.snapshot) }
            return id
        }
        guard let id else {
            continuation.finish()
            return stream
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.state.withLock { $0.subscribers.removeValue(forKey: id) }
        }
        return stream
    }

    /// Calls `onSnapshot` on the monitor's thread with the current snapshot (if running) and
    /// every change, and `onFinish` when the monitor stops. Observers must return quickly: they
    /// run before the next notification is read. ``snapshots()`` is the asynchronous form.
    public func addObserver(
        onSnapshot: @escaping @Sendable (NetworkSnapshot) -> Void,
        onFinish: @escaping @Sendable () -> Void = {}
    ) -> ObserverToken {
        let (id, current, finished) = state.withLock { state -> (Int, NetworkSnapshot?, Bool) in
            let id = state.nextSubscriber
            state.nextSubscriber += 1
            if !state.finished { state.observers[id] = Observer(onSnapshot: onSnapshot, onFinish: onFinish) }
            return (id, state.running ? state.snapshot : nil, state.finished)
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
        _ = state.withLock { $0.observers.removeValue(forKey: token.id) }
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
            let resumeNow = state.withLock { state -> Bool in
                guard state.running, state.coveredGeneration < generation else { return true }
                state.trackingWaiters.append((generation, continuation))
                return false
            }
            if resumeNow { continuation.resume() }
        }
        return token
    }

    /// ``track(_:)`` without waiting for the lookups: snapshots carry them shortly.
    public func startTracking(_ addresses: [IPAddress]) -> (token: TrackingToken, generation: Int, running: Bool) {
        let (id, generation, running, fd) = state.withLock { state in
            let id = state.nextSubscriber
            state.nextSubscriber += 1
            state.tracked[id] = addresses
            state.trackingGeneration += 1
            return (id, state.trackingGeneration, state.running, state.wakeFD)
        }
        if fd >= 0 { Self.wake(fd) }
        return (TrackingToken(id: id), generation, running)
    }

    /// Stops looking up the addresses of `token` (others may still track the same addresses).
    public func untrack(_ token: TrackingToken) {
        let fd = state.withLock { state -> Int32 in
            guard state.tracked.removeValue(forKey: token.id) != nil else { return -1 }
            state.trackingGeneration += 1
            return state.wakeFD
        }
        if fd >= 0 { Self.wake(fd) }
    }

    private static func wake(_ fd: Int32) {
        var byte: UInt8 = 1
        _ = write(fd, &byte, 1)
    }

    // MARK: Called from the loop thread

    func publish(_ snapshot: NetworkSnapshot) {
        let observers = state.withLock { state in
            state.snapshot = snapshot
            state.statistics.snapshotsPublished += 1
            for continuation in state.subscribers.values { continuation.yield(snapshot) }
            return Array(state.observers.values)
        }
        for observer in observers { observer.onSnapshot(snapshot) }
    }

    func updateStatistics(_ body: (inout Statistics) -> Void) {
        state.withLock { body(&$0.statistics) }
    }

    /// What the loop was woken for: to stop, and which addresses to look up (with the tracking
    /// generation they belong to).
    func wakeRequest() -> (stop: Bool, addresses: Set<IPAddress>, generation: Int) {
        state.withLock { state in
            (state.stopRequested, Set(state.tracked.values.joined()), state.trackingGeneration)
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

    private func finishSubscribers() {
        let (subscribers, observers, waiters) = state.withLock { state in
            state.finished = true
            defer {
                state.subscribers = [:]
                state.observers = [:]
                state.trackingWaiters = []
            }
            return (Array(state.subscribers.values), Array(state.observers.values), state.trackingWaiters.map(\.continuation))
        }
        for waiter in waiters { waiter.resume() }
        for continuation in subscribers { continuation.finish() }
        for observer in observers { observer.onFinish() }
    }

    private static func makePipe() throws(NetlinkError) -> (Int32, Int32) {
        var fds: [Int32] = [-1, -1]
        guard pipe(&fds) == 0 else { throw NetlinkError("pipe", errno: errno) }
        for fd in fds { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        return (fds[0], fds[1])
    }
}
