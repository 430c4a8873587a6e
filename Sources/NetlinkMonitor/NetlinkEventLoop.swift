import CNetlink
import ConnectivityPolicy
import Logging

#if canImport(Glibc)
import Glibc
#endif

/// The libnl state of one monitor, confined to the monitor's thread (libnl is not thread-safe).
final class NetlinkEventLoop {
    /// When the route table must be re-dumped relative to publishing the next snapshot.
    private enum RouteResync: Comparable {
        case none
        /// A link lost carrier or admin state: publish first (the verdict goes offline from the
        /// link alone, so it must not wait for a dump), then re-dump to drop flushed routes.
        case afterPublish
        /// A link regained carrier or admin state: re-dump first, so routes the kernel flushed
        /// silently can never make the snapshot look online.
        case beforePublish
    }

    private let monitor: NetlinkMonitor
    private let logger: Logger
    private var eventSocket: OpaquePointer?
    private var syncSocket: OpaquePointer?
    private var manager: OpaquePointer?
    private var linkCache: OpaquePointer?
    private var addressCache: OpaquePointer?
    private var routeCache: OpaquePointer?

    /// Last seen carrier-relevant state per link index.
    private var linkStates: [Int32: LinkState] = [:]
    private var routeResync = RouteResync.none
    private var dirty = false
    private var published = NetworkSnapshot()
    /// During storms, snapshots are rebuilt at most this often, in proportion to their cost.
    private var nextBuildAllowed = ContinuousClock.Instant.now
    private let clock = ContinuousClock()

    private struct LinkState: Equatable {
        var flags: LinkFlags
        var operState: OperState

        static let carrierFlags: LinkFlags = [.up, .lowerUp, .running]

        init(_ link: LinkInfo) {
            flags = link.flags.intersection(Self.carrierFlags)
            operState = link.operState
        }
    }

    init(configuration: NetlinkMonitor.Configuration, monitor: NetlinkMonitor) throws(NetlinkError) {
        self.monitor = monitor
        self.logger = monitor.logger
        do {
            if let path = configuration.networkNamespacePath {
                try Self.enterNamespace(path)
            }
            try open(receiveBufferSize: configuration.receiveBufferSize)
        } catch {
            release()
            throw error
        }
        KernelObjects.forEach(linkCache) { object in
            let link = KernelObjects.link(object)
            linkStates[link.index] = LinkState(link)
        }
        published = buildSnapshot()
        monitor.publish(published)
    }

    deinit {
        release()
    }

    /// Moves this thread into the namespace; sockets opened afterwards belong to it for life.
    static func enterNamespace(_ path: String) throws(NetlinkError) {
        let fd = Glibc.open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw NetlinkError("open \(path)", errno: errno) }
        defer { close(fd) }
        guard setns(fd, syncd_clone_newnet()) == 0 else { throw NetlinkError("setns \(path)", errno: errno) }
    }

    private func open(receiveBufferSize: Int) throws(NetlinkError) {
        guard let eventSocket = nl_socket_alloc(), let syncSocket = nl_socket_alloc() else {
            throw NetlinkError("nl_socket_alloc", errno: ENOMEM)
        }
        self.eventSocket = eventSocket
        self.syncSocket = syncSocket
        try check("connect netlink socket", nl_connect(syncSocket, NETLINK_ROUTE))

        var manager: OpaquePointer?
        try check("allocate cache manager", nl_cache_mngr_alloc(eventSocket, NETLINK_ROUTE, 0, &manager))
        self.manager = manager
        try setReceiveBuffer(nl_socket_get_fd(eventSocket), bytes: receiveBufferSize)

        let context = Unmanaged.passUnretained(self).toOpaque()
        var cache: OpaquePointer?
        try check("watch links", nl_cache_mngr_add(manager, "route/link", NetlinkEventLoop.linkChanged, context, &cache))
        linkCache = cache
        try check("watch addresses", nl_cache_mngr_add(manager, "route/addr", NetlinkEventLoop.addressChanged, context, &cache))
        addressCache = cache
        try check("watch routes", nl_cache_mngr_add(manager, "route/route", NetlinkEventLoop.tableChanged, context, &cache))
        routeCache = cache
    }

    private func setReceiveBuffer(_ fd: Int32, bytes: Int) throws(NetlinkError) {
        var size = Int32(clamping: bytes)
        let length = socklen_t(MemoryLayout<Int32>.size)
        // SO_RCVBUFFORCE passes net.core.rmem_max with CAP_NET_ADMIN; without it fall back to the capped size.
        if setsockopt(fd, SOL_SOCKET, syncd_so_rcvbufforce(), &size, length) != 0,
           setsockopt(fd, SOL_SOCKET, syncd_so_rcvbuf(), &size, length) != 0 {
            throw NetlinkError("set receive buffer", errno: errno)
        }
        var granted: Int32 = 0
        var grantedLength = length
        getsockopt(fd, SOL_SOCKET, syncd_so_rcvbuf(), &granted, &grantedLength)
        monitor.updateStatistics { $0.receiveBufferBytes = Int(granted) }
        logger.debug("netlink receive buffer", metadata: ["requested": "\(bytes)", "granted": "\(granted)"])
    }

    private func release() {
        // The manager owns its caches and the event socket.
        if let manager { nl_cache_mngr_free(manager) } else if let eventSocket { nl_socket_free(eventSocket) }
        if let syncSocket { nl_socket_free(syncSocket) }
        manager = nil
        eventSocket = nil
        syncSocket = nil
        linkCache = nil
        addressCache = nil
        routeCache = nil
    }

    // MARK: Loop

    /// Runs until a byte arrives on `wakeFD`.
    func run(wakeFD: Int32) {
        let netlinkFD = nl_cache_mngr_get_fd(manager)
        var fds = [pollfd(fd: netlinkFD, events: Int16(POLLIN), revents: 0), pollfd(fd: wakeFD, events: Int16(POLLIN), revents: 0)]
        while true {
            let timeout = dirty ? max(1, Int32(clamping: clock.now.duration(to: nextBuildAllowed).milliseconds)) : -1
            let ready = poll(&fds, 2, timeout)
            if ready < 0 {
                if errno == EINTR { continue }
                logger.error("netlink poll failed", metadata: ["error": "\(String(cString: strerror(errno)))"])
                return
            }
            if fds[1].revents != 0 { return }
            if fds[0].revents & Int16(POLLIN) != 0 {
                monitor.updateStatistics { $0.batches += 1 }
                receive()
            }
            settle()
        }
    }

    /// Reads until the socket is empty, then re-dumps every table if anything was dropped.
    ///
    /// The kernel reports ENOBUFS once and stays silent about further drops until the queue has
    /// been drained, so a re-dump taken before draining could miss later losses.
    private func receive() {
        var overflowed = false
        while true {
            let result = nl_cache_mngr_data_ready(manager)
            if result >= 0 { break }
            let error = NetlinkError("receive notifications", libnl: result)
            if error.isOverflow {
                if !overflowed { monitor.updateStatistics { $0.overflows += 1 } }
                overflowed = true
            } else if result == -Int32(NLE_AGAIN) {
                break
            } else {
                logger.error("netlink receive failed; re-reading every table", metadata: ["error": "\(error)"])
                overflowed = true
                break
            }
        }
        if overflowed {
            logger.warning("netlink notifications overflowed the receive buffer; re-reading every table")
            resyncAll()
        }
    }

    /// Re-dumps and publishes as the pending flags require.
    private func settle() {
        if routeResync == .beforePublish { resyncRoutes() }
        publishIfDue()
        if routeResync == .afterPublish {
            resyncRoutes()
            publishIfDue(force: true)
        }
    }

    private func publishIfDue(force: Bool = false) {
        guard dirty else { return }
        let start = clock.now
        guard force || start >= nextBuildAllowed else { return }
        let snapshot = buildSnapshot()
        let end = clock.now
        // Keep rebuilding to at most ~10% of the time: free for small tables, throttled in a storm.
        nextBuildAllowed = end + (end - start) * 9
        dirty = false
        guard snapshot != published else { return }
        published = snapshot
        monitor.publish(snapshot)
    }

    private func buildSnapshot() -> NetworkSnapshot {
        KernelObjects.snapshot(links: linkCache, addresses: addressCache, routes: routeCache)
    }

    private func resyncRoutes() {
        routeResync = .none
        monitor.updateStatistics { $0.routeResyncs += 1 }
        refillRoutes()
        dirty = true
    }

    private func resyncAll() {
        monitor.updateStatistics { $0.fullResyncs += 1 }
        resync(linkCache, "links", callback: NetlinkEventLoop.linkChanged)
        resync(addressCache, "addresses", callback: NetlinkEventLoop.addressChanged)
        routeResync = .none
        refillRoutes()
        dirty = true
    }

    /// Re-reads the route table from scratch (clear, then dump), like the first fill.
    ///
    /// Not `nl_cache_resync`: it marks every cached route, merges each dumped route into its
    /// cached twin, then deletes whatever is still marked. For an IPv6 route with a gateway libnl
    /// merges (its `route_update`, meant for per-nexthop ECMP notifications) and leaves the twin
    /// marked, so every resync dropped all IPv6 gateway routes, the IPv6 default route included
    /// (found by ResilienceTests). Callers mark the snapshot dirty; no per-route callback is needed.
    private func refillRoutes() {
        let result = nl_cache_refill(syncSocket, routeCache)
        if result < 0 {
            logger.error("re-reading routes failed", metadata: ["error": "\(NetlinkError("refill routes", libnl: result))"])
        }
    }

    private func resync(_ cache: OpaquePointer?, _ name: String, callback: change_func_t) {
        let context = Unmanaged.passUnretained(self).toOpaque()
        let result = nl_cache_resync(syncSocket, cache, callback, context)
        if result < 0 {
            logger.error("re-reading \(name) failed", metadata: ["error": "\(NetlinkError("resync \(name)", libnl: result))"])
        }
    }

    // MARK: Callbacks (run inside nl_cache_mngr_data / nl_cache_resync on this thread)

    private static let linkChanged: change_func_t = { _, object, action, context in
        guard let context, let object else { return }
        Unmanaged<NetlinkEventLoop>.fromOpaque(context).takeUnretainedValue().linkChanged(object, action: action)
    }

    private static let tableChanged: change_func_t = { _, _, _, context in
        guard let context else { return }
        Unmanaged<NetlinkEventLoop>.fromOpaque(context).takeUnretainedValue().dirty = true
    }

    /// Removing a link's last IPv4 address makes the kernel flush its routes without RTM_DELROUTE.
    private static let addressChanged: change_func_t = { _, _, action, context in
        guard let context else { return }
        let loop = Unmanaged<NetlinkEventLoop>.fromOpaque(context).takeUnretainedValue()
        loop.dirty = true
        if action == syncd_nl_act_del() { loop.routeResync = max(loop.routeResync, .afterPublish) }
    }

    private func linkChanged(_ object: OpaquePointer, action: Int32) {
        dirty = true
        let link = KernelObjects.link(object)
        let old = linkStates[link.index]
        if action == syncd_nl_act_del() {
            linkStates[link.index] = nil
            routeResync = max(routeResync, .afterPublish)
            return
        }
        let new = LinkState(link)
        linkStates[link.index] = new
        guard let old, old != new else { return }
        let lost = !old.flags.subtracting(new.flags).isEmpty || (old.operState == .up && new.operState != .up)
        let gained = !new.flags.subtracting(old.flags).isEmpty || (new.operState == .up && old.operState != .up)
        if gained {
            routeResync = .beforePublish
        } else if lost {
            routeResync = max(routeResync, .afterPublish)
        }
    }
}

extension Duration {
    var milliseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1000 + attoseconds / 1_000_000_000_000_000
    }
}
