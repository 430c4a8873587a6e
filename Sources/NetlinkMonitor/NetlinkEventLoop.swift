import CNetlink
import ConnectivityPolicy
import Logging

#if canImport(Glibc)
import Glibc
#endif

/// The libnl state of one monitor, confined to the monitor's thread (libnl is not thread-safe).
///
/// Links and addresses live in libnl's cache manager. Routes do not: libnl's route cache has a
/// fixed-size hash table, so its cost per route grows with the table and a large route storm
/// costs it far more than `ip monitor` spends on it (measured: BENCHMARKS.md, route storm). Route
/// notifications arrive on a socket of their own, are parsed with libnl (`rtnl_route_parse`) and
/// kept in a ``RouteTable``.
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

    /// Route datagrams read per wake-up before links are looked at and a snapshot is considered
    /// again, so a route storm cannot hold back a link change.
    private static let routeBatchLimit = 2048
    /// How long the re-dump after a loss waits, unless something else is to be published first.
    private static let resyncDelay = Duration.milliseconds(2)
    /// A wake-up that finds this many route datagrams means a storm: see ``run(wakeFD:jobFD:)``.
    private static let stormDatagrams = 8
    private static let stormNapMilliseconds: Int32 = 1
    /// How long the loop leaves the core to consumers after publishing a loss ahead of libnl.
    private static let lossNapMilliseconds: Int32 = 1
    /// How long after a route's announced end of life the kernel is asked again: `rta_expires`
    /// is rounded to 10 ms, and the kernel's own clock ticks up to 10 ms apart (HZ=100).
    private static let expiryMargin = Duration.milliseconds(30)
    /// Receive buffer for one route datagram (and for the peek at a link datagram in
    /// ``publishLossAhead()``); notifications are single messages far below this.
    private static let routeBufferSize = 64 << 10

    private let monitor: MonitorCore
    private let logger: Logger
    private var eventSocket: OpaquePointer?
    private var syncSocket: OpaquePointer?
    private var routeSocket: OpaquePointer?
    private var manager: OpaquePointer?
    private var linkCache: OpaquePointer?
    private var addressCache: OpaquePointer?
    private var routes = RouteTable()
    private var expiries = RouteExpiries<ContinuousClock.Instant>()
    /// The kernel's own route lookups for the addresses the monitor tracks.
    private var lookup: KernelRouteLookup?
    private var trackedAddresses: Set<IPAddress> = []
    /// What each link costs, by name, as the monitor was last told.
    private var linkCosts: [String: LinkCostAssessment] = [:]
    /// The tracking generation `trackedAddresses` came from.
    private var trackedGeneration = 0
    /// The route list of the last snapshot built, in canonical order (see ``RouteTable``).
    private var sortedRoutes: [RouteInfo] = []
    private let routeBuffer = UnsafeMutableRawPointer.allocate(byteCount: NetlinkEventLoop.routeBufferSize, alignment: 8)

    /// Links libnl keeps under another family than AF_UNSPEC (a bridge, whose kind names one),
    /// as the kernel last described them. libnl merges a later message about such a link into
    /// its cached object without taking the new flags or operstate, so the cache keeps a bridge
    /// up after it lost carrier; each change is read back from the kernel instead.
    private var refreshedLinks: [Int32: LinkInfo] = [:]
    /// Last seen carrier-relevant state per link index.
    private var linkStates: [Int32: LinkState] = [:]
    private var routeResync = RouteResync.none
    /// When the re-dump that follows a loss falls due (see ``settle()``).
    private var resyncDue: ContinuousClock.Instant?
    private var dirty = false
    /// When the lookups are asked again after one got no answer.
    private var lookupRetry = LookupRetry()
    /// A link or an address changed: publish without waiting for the storm throttle, so a
    /// carrier loss is never delayed by the cost of a large route table.
    private var urgent = false
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

    init(configuration: NetlinkMonitor.Configuration, monitor: MonitorCore) throws(NetlinkError) {
        self.monitor = monitor
        self.logger = monitor.logger
        do {
            if let path = configuration.networkNamespacePath {
                try Self.enterNamespace(path)
            }
            try open(receiveBufferSize: configuration.receiveBufferSize)
            // The route socket already listens: what changes during the dump is read afterwards.
            try refillRoutes()
        } catch {
            release()
            throw error
        }
        let request = monitor.wakeRequest()
        trackedAddresses = request.addresses
        trackedGeneration = request.generation
        linkCosts = request.linkCosts
        published = buildSnapshot()
        for link in published.links { linkStates[link.index] = LinkState(link) }
        monitor.publish(published)
        monitor.lookupsCovered(trackedGeneration)
    }

    deinit {
        release()
        routeBuffer.deallocate()
    }

    /// Moves this thread into the namespace; sockets opened afterwards belong to it for life.
    static func enterNamespace(_ path: String) throws(NetlinkError) {
        let fd = Glibc.open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw NetlinkError("open \(path)", errno: errno) }
        defer { close(fd) }
        guard setns(fd, syncd_clone_newnet()) == 0 else { throw NetlinkError("setns \(path)", errno: errno) }
    }

    private func open(receiveBufferSize: Int) throws(NetlinkError) {
        guard let eventSocket = nl_socket_alloc() else { throw NetlinkError("nl_socket_alloc", errno: ENOMEM) }
        self.eventSocket = eventSocket
        guard let syncSocket = nl_socket_alloc() else { throw NetlinkError("nl_socket_alloc", errno: ENOMEM) }
        self.syncSocket = syncSocket
        guard let routeSocket = nl_socket_alloc() else { throw NetlinkError("nl_socket_alloc", errno: ENOMEM) }
        self.routeSocket = routeSocket
        try check("connect netlink socket", nl_connect(syncSocket, NETLINK_ROUTE))

        // Notifications only: no requests are sent on it, so no sequence numbers to check.
        nl_socket_disable_seq_check(routeSocket)
        try check("connect route socket", nl_connect(routeSocket, NETLINK_ROUTE))
        try check("make route socket non-blocking", nl_socket_set_nonblocking(routeSocket))
        try check("watch IPv4 routes", syncd_nl_socket_add_membership(routeSocket, Int32(RTNLGRP_IPV4_ROUTE.rawValue)))
        try check("watch IPv6 routes", syncd_nl_socket_add_membership(routeSocket, Int32(RTNLGRP_IPV6_ROUTE.rawValue)))
        // Changes the route tables do not show but the kernel's lookups do: policy rules (WireGuard,
        // Tailscale, VRFs), nexthop objects, and netconf (ignore_routes_with_linkdown).
        try check("watch IPv4 rules", syncd_nl_socket_add_membership(routeSocket, Int32(RTNLGRP_IPV4_RULE.rawValue)))
        try check("watch IPv6 rules", syncd_nl_socket_add_membership(routeSocket, Int32(RTNLGRP_IPV6_RULE.rawValue)))
        try check("watch IPv4 netconf", syncd_nl_socket_add_membership(routeSocket, Int32(RTNLGRP_IPV4_NETCONF.rawValue)))
        try check("watch IPv6 netconf", syncd_nl_socket_add_membership(routeSocket, Int32(RTNLGRP_IPV6_NETCONF.rawValue)))
        // Nexthop objects need Linux 5.3; older kernels refuse the group and have none to watch.
        if syncd_nl_socket_add_membership(routeSocket, Int32(RTNLGRP_NEXTHOP.rawValue)) < 0 {
            logger.debug("nexthop notifications unavailable")
        }
        lookup = try KernelRouteLookup()
        try setReceiveBuffer(nl_socket_get_fd(routeSocket), bytes: receiveBufferSize)

        var manager: OpaquePointer?
        ProcessExitGate.arm()
        try check("allocate cache manager", nl_cache_mngr_alloc(eventSocket, NETLINK_ROUTE, 0, &manager))
        self.manager = manager
        try setReceiveBuffer(nl_socket_get_fd(eventSocket), bytes: receiveBufferSize)

        let context = Unmanaged.passUnretained(self).toOpaque()
        var cache: OpaquePointer?
        try check("watch links", nl_cache_mngr_add(manager, "route/link", NetlinkEventLoop.linkChanged, context, &cache))
        linkCache = cache
        try check("watch addresses", nl_cache_mngr_add(manager, "route/addr", NetlinkEventLoop.addressChanged, context, &cache))
        addressCache = cache
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
        if let manager {
            ProcessExitGate.unlessExiting { nl_cache_mngr_free(manager) }
        } else if let eventSocket {
            nl_socket_free(eventSocket)
        }
        if let syncSocket { nl_socket_free(syncSocket) }
        if let routeSocket { nl_socket_free(routeSocket) }
        manager = nil
        eventSocket = nil
        syncSocket = nil
        routeSocket = nil
        lookup = nil
        linkCache = nil
        addressCache = nil
    }

    // MARK: Loop

    /// Runs until the monitor asks it to stop through `wakeFD`; between reads, runs the jobs of
    /// the monitor's executor, which `jobFD` announces when they come from other threads.
    func run(wakeFD: Int32, jobFD: Int32) {
        _ = fcntl(wakeFD, F_SETFL, fcntl(wakeFD, F_GETFL) | O_NONBLOCK)
        var fds = [
            pollfd(fd: nl_cache_mngr_get_fd(manager), events: Int16(POLLIN), revents: 0),
            pollfd(fd: nl_socket_get_fd(routeSocket), events: Int16(POLLIN), revents: 0),
            pollfd(fd: wakeFD, events: Int16(POLLIN), revents: 0),
            pollfd(fd: jobFD, events: Int16(POLLIN), revents: 0),
        ]
        let executor = monitor.executor
        var jobsWaiting = executor.runJobs()
        while true {
            let timeout = jobsWaiting ? 0 : pollTimeout()
            let ready = poll(&fds, 4, timeout)
            if ready < 0 {
                if errno == EINTR { continue }
                logger.error("netlink poll failed", metadata: ["error": "\(String(cString: strerror(errno)))"])
                return
            }
            if fds[3].revents != 0 { Self.drain(jobFD) }
            if fds[2].revents != 0, !handleWake(wakeFD) { return }
            var routeDatagrams = 0
            if (fds[0].revents | fds[1].revents) & Int16(POLLIN) != 0 {
                if fds[0].revents & Int16(POLLIN) != 0, publishLossAhead() {
                    // The offline snapshot is out. Consumers on this thread take it now; then
                    // leave the core to those on others for a moment before libnl's parse, the
                    // route reads and the next snapshot take it.
                    executor.runJobs()
                    var wake = pollfd(fd: wakeFD, events: Int16(POLLIN), revents: 0)
                    _ = poll(&wake, 1, Self.lossNapMilliseconds)
                }
                monitor.updateStatistics { $0.batches += 1 }
                routeDatagrams = receive()
            }
            settle()
            jobsWaiting = executor.runJobs()
            if routeDatagrams >= Self.stormDatagrams {
                // Routes are streaming in (a storm): let them gather for a moment instead of
                // waking for every few. Waking costs more than reading (a context switch and a
                // poll per wake-up, for a few messages each). This runs after the snapshot was
                // settled, so only route changes wait, by at most `stormNap`.
                var wake = pollfd(fd: wakeFD, events: Int16(POLLIN), revents: 0)
                _ = poll(&wake, 1, Self.stormNapMilliseconds)
            }
        }
    }

    /// Empties a non-blocking wake-up pipe.
    private static func drain(_ fd: Int32) {
        var bytes = (UInt64(0), UInt64(0))
        while read(fd, &bytes, MemoryLayout.size(ofValue: bytes)) > 0 {}
    }

    /// Drains the wake pipe and takes the monitor's request; returns `false` to stop.
    private func handleWake(_ fd: Int32) -> Bool {
        Self.drain(fd)
        let request = monitor.wakeRequest()
        if request.stop { return false }
        if request.linkCosts != linkCosts {
            linkCosts = request.linkCosts
            dirty = true
            urgent = true
        }
        if request.addresses != trackedAddresses {
            trackedAddresses = request.addresses
            trackedGeneration = request.generation
            dirty = true
            urgent = true
        } else {
            // The same addresses: the published snapshot already carries their routes.
            trackedGeneration = request.generation
            if !dirty { monitor.lookupsCovered(request.generation) }
        }
        return true
    }

    /// Reads links and addresses until their socket is empty, then a bounded batch of routes;
    /// re-dumps every table if anything was dropped.
    ///
    /// Links go first: a route notification the kernel sent before a link change is then always
    /// read before the re-dump that link change causes (``settle()`` empties the route socket
    /// before any dump), so it cannot be replayed on top of the fresh table.
    /// Returns how many route datagrams were read.
    private func receive() -> Int {
        var overflowed = receiveLinksAndAddresses()
        var datagrams = 0
        if !overflowed {
            overflowed = receiveRoutes(limit: Self.routeBatchLimit, read: &datagrams)
        }
        if overflowed {
            logger.warning("netlink notifications overflowed the receive buffer; re-reading every table")
            resyncAll()
        }
        return datagrams
    }

    /// Returns whether notifications were lost.
    ///
    /// The kernel reports ENOBUFS once and stays silent about further drops until the queue has
    /// been drained, so a re-dump taken before draining could miss later losses.
    private func receiveLinksAndAddresses() -> Bool {
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
                return true
            }
        }
        return overflowed
    }

    /// Reads up to `limit` route datagrams (`nil`: until the socket is empty) and applies them,
    /// or only empties the socket when `discard` is set (a dump follows and supersedes them).
    /// Returns whether notifications were lost; after a loss it reads on until the socket is
    /// empty, for the same reason as ``receiveLinksAndAddresses()``.
    ///
    /// Reads the libnl socket's descriptor directly into one reused buffer: libnl's own receive
    /// path allocates a buffer and copies every message, which is most of the cost per route.
    private func receiveRoutes(limit: Int?, discard: Bool = false, countOverflow: Bool = true) -> Bool {
        var read = 0
        return receiveRoutes(limit: limit, discard: discard, countOverflow: countOverflow, read: &read)
    }

    private func receiveRoutes(limit: Int?, discard: Bool = false, countOverflow: Bool = true, read: inout Int) -> Bool {
        let fd = nl_socket_get_fd(routeSocket)
        var overflowed = false
        var discard = discard
        while overflowed || limit.map({ read < $0 }) ?? true {
            var sender = sockaddr_nl()
            var senderLength = socklen_t(MemoryLayout<sockaddr_nl>.size)
            let count = withUnsafeMutablePointer(to: &sender) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    recvfrom(fd, routeBuffer, Self.routeBufferSize, Int32(MSG_DONTWAIT) | Int32(MSG_TRUNC), $0, &senderLength)
                }
            }
            if count < 0 {
                switch errno {
                case EINTR: continue
                case EAGAIN, EWOULDBLOCK: return overflowed
                case ENOBUFS:
                    if !overflowed && countOverflow { monitor.updateStatistics { $0.overflows += 1 } }
                    overflowed = true
                    discard = true
                    continue
                default:
                    logger.error("route socket receive failed; re-reading every table", metadata: ["error": "\(String(cString: strerror(errno)))"])
                    return true
                }
            }
            read += 1
            if discard || sender.nl_pid != 0 { continue }
            guard count <= Self.routeBufferSize else {
                logger.error("route notification larger than \(Self.routeBufferSize) bytes; re-reading every table")
                overflowed = true
                discard = true
                continue
            }
            apply(routeBuffer, count: count)
        }
        return overflowed
    }

    private static let policyMessages: Set<Int32> = [
        Int32(RTM_NEWRULE), Int32(RTM_DELRULE), Int32(RTM_NEWNEXTHOP), Int32(RTM_DELNEXTHOP),
        Int32(RTM_NEWNETCONF), Int32(RTM_DELNETCONF),
    ]

    /// Applies every route message of one datagram.
    private func apply(_ buffer: UnsafeMutableRawPointer, count: Int) {
        NetlinkWire.forEachMessage(in: UnsafeRawBufferPointer(start: buffer, count: count)) { header, offset, _ in
            if let message = RouteMessage((buffer + offset).assumingMemoryBound(to: nlmsghdr.self)) {
                if routes.apply(message) { dirty = true }
                recordLifetime(of: message)
            } else if Self.policyMessages.contains(Int32(header.nlmsg_type)) {
                // Nothing in the snapshot's tables changed, but the kernel's answer may have.
                monitor.updateStatistics { $0.policyChanges += 1 }
                dirty = true
                let type = Int32(header.nlmsg_type)
                if type == Int32(RTM_NEWNEXTHOP) || type == Int32(RTM_DELNEXTHOP) {
                    // Deleting a nexthop object removes the routes that use it, and replacing it
                    // moves them, without a route notification: re-read the table first.
                    routeResync = .beforePublish
                }
            }
            return true
        }
    }

    /// Re-dumps and publishes as the pending flags require.
    ///
    /// After a loss the snapshot goes out first and the re-dump that drops the routes the kernel
    /// flushed silently waits ``resyncDelay``: on a machine with few cores it would otherwise
    /// take the core the consumers of that snapshot need to act on it, and delay the verdict's
    /// arrival at an async consumer (measured: BENCHMARKS.md, "The offline path made shorter").
    /// A route change meanwhile is published after the re-dump, so it cannot bring flushed routes
    /// back; another link or address change goes out first, as the loss did, with the re-dump
    /// still due.
    private func settle() {
        if expiries.isDue(at: clock.now) {
            // A route's lifetime ended: the kernel no longer uses it, but keeps it (and says
            // nothing) until its garbage collection. Re-read the table, which also brings lifetimes
            // a router advertisement extended silently, and ask the kernel again.
            monitor.updateStatistics { $0.routeExpiries += 1 }
            routeResync = .beforePublish
            dirty = true
            urgent = true
        }
        if lookupRetry.isDue(at: clock.now) {
            lookupRetry.taken()
            dirty = true
            urgent = true
        }
        if routeResync == .beforePublish || (routeResync == .afterPublish && resyncDue != nil && dirty && !urgent) {
            resyncRoutes()
        }
        publishIfDue()
        guard routeResync == .afterPublish else { return }
        let now = clock.now
        guard let due = resyncDue else {
            resyncDue = now + Self.resyncDelay
            return
        }
        if now >= due {
            resyncRoutes()
            publishIfDue(force: true)
        }
    }

    /// Milliseconds until the loop has work of its own (a throttled snapshot, a deferred
    /// re-dump), or -1 to wait for the kernel alone.
    private func pollTimeout() -> Int32 {
        var deadline: ContinuousClock.Instant?
        if dirty { deadline = nextBuildAllowed }
        if let resyncDue { deadline = min(deadline ?? resyncDue, resyncDue) }
        if let expiry = expiries.next { deadline = min(deadline ?? expiry, expiry) }
        if let retry = lookupRetry.due { deadline = min(deadline ?? retry, retry) }
        guard let deadline else { return -1 }
        // Rounded up: a deadline less than a millisecond away must not turn into a busy loop.
        let milliseconds = (clock.now.duration(to: deadline) / .milliseconds(1)).rounded(.up)
        return Int32(min(max(1, milliseconds), Double(Int32.max)))
    }

    private func publishIfDue(force: Bool = false) {
        guard dirty else { return }
        let start = clock.now
        guard force || urgent || start >= nextBuildAllowed else { return }
        let routeOnly = !urgent && !force
        let snapshot = buildSnapshot()
        let end = clock.now
        // Keep rebuilding to at most ~10% of the time (~5% while only routes change, as in a
        // route storm): free for small tables, throttled in a storm. Link and address changes
        // are published at once whatever the throttle says.
        nextBuildAllowed = end + (end - start) * (routeOnly ? 19 : 9)
        dirty = false
        urgent = false
        if snapshot != published {
            published = snapshot
            monitor.publish(snapshot)
        }
        monitor.lookupsCovered(trackedGeneration)
    }

    private func buildSnapshot() -> NetworkSnapshot {
        sortedRoutes = routes.takeSortedRoutes(previous: sortedRoutes)
        var snapshot = KernelObjects.snapshot(links: linkCache, addresses: addressCache, refreshed: refreshedLinks, canonicalRoutes: sortedRoutes)
        snapshot.linkCosts = linkCosts
        lookUpTrackedAddresses(into: &snapshot)
        return snapshot
    }

    private func lookUpTrackedAddresses(into snapshot: inout NetworkSnapshot) {
        guard let lookup, !trackedAddresses.isEmpty else { return }
        let (routes, failure) = lookup.lookup(trackedAddresses)
        snapshot.kernelRoutes = routes
        monitor.updateStatistics { $0.routeLookups += trackedAddresses.count }
        guard let failure else {
            lookupRetry.succeeded()
            return
        }
        // No notification may follow to ask again: the snapshot would keep the unanswered
        // lookup for as long as the tables stay still.
        let delay = lookupRetry.failed(at: clock.now)
        monitor.updateStatistics { $0.lookupFailures += 1 }
        logger.warning("the kernel's route lookup got no answer; asking again", metadata: [
            "address": "\(failure.address)", "error": "\(String(cString: strerror(failure.errno)))", "in": "\(delay)",
        ])
    }

    /// Publishes the snapshot of a carrier loss found at the head of the link socket, before
    /// libnl reads it (``LinkChange``): the last snapshot with the link's new state and fresh
    /// kernel lookups, unless no link but loopback keeps a carrier. Its routes may still hold
    /// ones the kernel has just flushed, as the first snapshot after a loss always could; the
    /// re-dump that follows drops them. Returns whether it published.
    private func publishLossAhead() -> Bool {
        // MSG_PEEK leaves the datagram for libnl, which reads and applies it right after.
        let count = recv(nl_cache_mngr_get_fd(manager), routeBuffer, Self.routeBufferSize, Int32(MSG_PEEK) | Int32(MSG_DONTWAIT))
        guard count > 0 else { return false }
        let changes = LinkChange.parse(UnsafeRawBufferPointer(start: routeBuffer, count: count))
        guard !changes.isEmpty else { return false }
        let (links, lost) = LinkChange.apply(changes, to: published.links)
        guard lost else { return false }
        var snapshot = NetworkSnapshot(links: links, addresses: published.addresses, canonicalRoutes: published.routes)
        snapshot.linkCosts = published.linkCosts
        if ConnectivityPolicy.consultsKernelRoutes(links: links) {
            lookUpTrackedAddresses(into: &snapshot)
        } else {
            // The only uplink went: the verdict is "no carrier" whatever the kernel answers, so
            // the last answers are carried over and the kernel is asked in the full snapshot
            // that follows, off this path.
            snapshot.kernelRoutes = published.kernelRoutes
        }
        published = snapshot
        monitor.updateStatistics { $0.lossesPublishedAhead += 1 }
        monitor.publish(snapshot)
        return true
    }

    /// Empties the route socket, then re-reads the route table.
    ///
    /// What is read before the dump is already in the dump, so it is dropped unparsed; reading it
    /// all first also means no notification older than the dump is applied after it.
    private func resyncRoutes() {
        routeResync = .none
        resyncDue = nil
        if receiveRoutes(limit: nil, discard: true) {
            resyncAll()
            return
        }
        monitor.updateStatistics { $0.routeResyncs += 1 }
        reportRefillFailure { () throws(NetlinkError) in try refillRoutes() }
        dirty = true
    }

    private func resyncAll() {
        monitor.updateStatistics { $0.fullResyncs += 1 }
        resync(linkCache, "links", callback: NetlinkEventLoop.linkChanged)
        // The merge kept the old flags of links refreshed by hand, and reported no change.
        for link in refreshedLinks.values { _ = refreshedLink(link) }
        resync(addressCache, "addresses", callback: NetlinkEventLoop.addressChanged)
        routeResync = .none
        resyncDue = nil
        // A loss found here is covered by this very re-read, so it is not counted again.
        _ = receiveRoutes(limit: nil, discard: true, countOverflow: false)
        reportRefillFailure { () throws(NetlinkError) in try refillRoutes() }
        dirty = true
        urgent = true
    }

    /// Re-reads the route table from scratch with a fresh `RTM_GETROUTE` dump, like the first fill.
    ///
    /// Not a merge into the old table (as `nl_cache_resync` did: for IPv6 gateway routes libnl's
    /// merge left the cached twin marked, so every resync dropped all IPv6 gateway routes, found
    /// by ResilienceTests). The old table is dropped first so two copies never coexist.
    private func refillRoutes() throws(NetlinkError) {
        routes.removeAll()
        expiries.removeAll()
        try RouteMessage.dump(socket: syncSocket!, restart: { routes.removeAll(); expiries.removeAll() }) {
            routes.insertDumped($0)
            recordLifetime(of: $0)
        }
    }

    private func recordLifetime(of message: RouteMessage) {
        expiries.record(message.key, expiry: message.lifetime.map { clock.now + $0 + Self.expiryMargin })
    }

    private func reportRefillFailure(_ body: () throws(NetlinkError) -> Void) {
        do {
            try body()
        } catch {
            logger.error("re-reading routes failed", metadata: ["error": "\(error)"])
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

    /// Removing a link's last IPv4 address makes the kernel flush its routes without RTM_DELROUTE.
    private static let addressChanged: change_func_t = { _, _, action, context in
        guard let context else { return }
        let loop = Unmanaged<NetlinkEventLoop>.fromOpaque(context).takeUnretainedValue()
        loop.dirty = true
        loop.urgent = true
        if action == syncd_nl_act_del() { loop.routeResync = max(loop.routeResync, .afterPublish) }
    }

    /// `link` as the kernel describes it now (`RTM_GETLINK` for its index), kept in
    /// ``refreshedLinks``; `link` itself when the kernel does not answer (it is going away).
    private func refreshedLink(_ link: LinkInfo) -> LinkInfo {
        var fresh: OpaquePointer?
        guard rtnl_link_get_kernel(syncSocket, link.index, nil, &fresh) >= 0, let fresh else {
            refreshedLinks[link.index] = nil
            return link
        }
        defer { rtnl_link_put(fresh) }
        let info = KernelObjects.link(fresh)
        refreshedLinks[link.index] = info
        return info
    }

    private func linkChanged(_ object: OpaquePointer, action: Int32) {
        dirty = true
        urgent = true
        // A bridge port's AF_BRIDGE view coming and going says nothing about its carrier.
        guard KernelObjects.isInterface(object, in: linkCache) else { return }
        var link = KernelObjects.link(object)
        let old = linkStates[link.index]
        if action == syncd_nl_act_del() {
            linkStates[link.index] = nil
            refreshedLinks[link.index] = nil
            routeResync = max(routeResync, .afterPublish)
            return
        }
        if rtnl_link_get_family(object) != AF_UNSPEC {
            link = refreshedLink(link)
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

/// When the kernel's lookups are asked again after one got no answer (its request or the read
/// of its answer failed): soon, then less often while they keep failing, up to ``longest``.
struct LookupRetry {
    static let first = Duration.milliseconds(20)
    static let longest = Duration.seconds(5)

    private(set) var due: ContinuousClock.Instant?
    private var delay = LookupRetry.first

    /// A lookup failed at `now`: the next try is due after the current delay, which doubles.
    /// Returns that delay.
    mutating func failed(at now: ContinuousClock.Instant) -> Duration {
        let wait = delay
        due = now + wait
        delay = min(delay * 2, Self.longest)
        return wait
    }

    /// Every lookup was answered: the next failure is retried soon again.
    mutating func succeeded() {
        due = nil
        delay = Self.first
    }

    func isDue(at now: ContinuousClock.Instant) -> Bool { due.map { now >= $0 } ?? false }

    /// The retry is being made now.
    mutating func taken() { due = nil }
}
