import ConnectivityPolicy
import Dispatch
import NetlinkMonitor
import Synchronization
import Testing
import TestSupport

/// Real kernel events: each test builds its own namespaces and veth pair, changes them with
/// `ip`, and checks both the published verdict and that the monitor's snapshot equals a fresh
/// kernel dump.
@Suite(.enabled(if: Privileges.rootTestsEnabled, Comment(rawValue: Privileges.skipReason)))
struct NamespaceMonitorTests {
    let link = VethTopology.clientLink

    @Test func startsOnlineThroughTheDefaultRoute() async throws {
        let h = try await MonitorHarness.settledOnline()
        let stats = h.monitor.statistics
        #expect(stats.receiveBufferBytes >= 8 << 20, "receive buffer \(stats.receiveBufferBytes)")
    }

    @Test func peerDownIsNoCarrierAndPeerUpIsOnline() async throws {
        let h = try await MonitorHarness.settledOnline()
        // Carrier loss and gain only mark routes linkdown and back, silently: the monitor must
        // re-read them after each. The re-read after a loss comes just after the loss is
        // published, so each is waited for before the next change: a change that came first
        // would be read with it, in one re-read.
        let resyncsBefore = h.monitor.statistics.routeResyncs
        try await h.server("link", "set", VethTopology.serverLink, "down")
        try await h.expectSettled("peer down") { $0.isOffline(.noCarrier) }
        try await waitUntil("the monitor re-read the routes after the carrier loss") { h.monitor.statistics.routeResyncs > resyncsBefore }
        let resyncsAfterLoss = h.monitor.statistics.routeResyncs
        try await h.server("link", "set", VethTopology.serverLink, "up")
        try await h.expectSettled("peer up") { $0.isOnline(via: link) }
        try await waitUntil("the monitor re-read the routes after the carrier came back") { h.monitor.statistics.routeResyncs > resyncsAfterLoss }
    }

    @Test func aConsumerOnTheMonitorsExecutorFollowsCarrierOnTheMonitorsThread() async throws {
        let h = try await MonitorHarness.settledOnline(destination: .addresses([IPAddress("198.51.100.7")!]), onMonitorThread: true)
        try await h.server("link", "set", VethTopology.serverLink, "down")
        try await h.expectSettled("peer down") { $0.isOffline(.noCarrier) }
        try await h.client("link", "set", link, "down")
        try await h.server("link", "set", VethTopology.serverLink, "up")
        try await h.client("link", "set", link, "up")
        try await h.expectSettled("admin up, routes flushed") { $0.isOffline(.noRoute) }
        try await h.client("route", "add", "default", "via", VethTopology.serverAddress, "dev", link)
        try await h.expectSettled("default route re-added") { $0.isOnline(via: link) }
        let tid = try #require(h.monitor.threadID)
        #expect(h.consumerThreads.count == h.verdicts.count)
        #expect(h.consumerThreads.allSatisfy { $0 == tid }, "every verdict was received on the monitor's thread: \(h.consumerThreads) vs \(tid)")
    }

    @Test func adminDownThenUpWithNothingReaddedHasNoRoute() async throws {
        let h = try await MonitorHarness.settledOnline()
        try await h.client("link", "set", link, "down")
        try await h.expectSettled("admin down") { $0.isOffline(.noCarrier) }
        // The kernel flushed the IPv4 routes without RTM_DELROUTE: a delta-only monitor says online here.
        try await h.client("link", "set", link, "up")
        try await h.expectSettled("admin up, routes flushed") { $0.isOffline(.noRoute) }
        try await h.client("route", "add", "default", "via", VethTopology.serverAddress, "dev", link)
        try await h.expectSettled("default route re-added") { $0.isOnline(via: link) }
    }

    @Test func carrierLossIsPublishedAheadOfLibnlThenInFull() async throws {
        let host = IPAddress("198.51.100.7")!
        let h = try await MonitorHarness.settledOnline(destination: .addresses([host]))

        let peerDownAhead = try await loseCarrierUntilPublishedAhead(h, "peer down") {
            try await h.server("link", "set", VethTopology.serverLink, "down")
        } check: { published, _, _ in
            // The first snapshot without carrier (route notifications may have come before it) is
            // already offline, with an answer for the tracked host.
            let first = try #require(published.first { $0.links.first { $0.name == link }?.hasCarrier == false })
            #expect(first.kernelRoutes[host] != nil)
            #expect(ConnectivityPolicy.evaluate(first, for: h.destination) == .offline(.noCarrier))
        } restore: {
            try await h.server("link", "set", VethTopology.serverLink, "up")
            try await h.expectSettled("peer up") { $0.isOnline(via: link) }
        }
        #expect(peerDownAhead, "a peer-down's carrier loss was published ahead of libnl")

        let aheadBeforeGain = h.monitor.statistics.lossesPublishedAhead
        try await h.server("link", "set", VethTopology.serverLink, "up")
        try await h.expectSettled("peer up") { $0.isOnline(via: link) }
        // A gain is never published ahead: it waits for the re-dump.
        #expect(h.monitor.statistics.lossesPublishedAhead == aheadBeforeGain)

        let adminDownAhead = try await loseCarrierUntilPublishedAhead(h, "admin down") {
            try await h.client("link", "set", link, "down")
        } check: { published, before, ahead in
            // The admin-down flushed the route, but the loss went out ahead with the answer from
            // before it: with no link but loopback keeping a carrier, the kernel is not asked on
            // that path. The full snapshots after it asked, and the kernel found no route.
            let answerBefore = try #require(before.kernelRoutes[host])
            let lost = try #require(published.first { $0.links.first { $0.name == link }?.hasCarrier == false })
            if ahead { #expect(lost.kernelRoutes[host] == answerBefore) }
            #expect(published.last?.kernelRoutes[host] != answerBefore)
        } restore: {
            try await h.client("link", "set", link, "up")
            try await h.client("route", "replace", "default", "via", VethTopology.serverAddress, "dev", link)
            try await h.expectSettled("admin up again") { $0.isOnline(via: link) }
        }
        #expect(adminDownAhead, "an admin-down's carrier loss was published ahead of libnl")
    }

    /// Takes the client link's carrier away with `lose` until the loss went out ahead of libnl,
    /// up to three times, bringing it back with `restore` between tries; `check` sees each try's
    /// published snapshots, the snapshot from before it, and whether it went out ahead.
    ///
    /// The peek sees only the link socket's first datagram: a notification still queued (the
    /// link-local address's DAD, or the kernel's link watch running late on a loaded machine)
    /// can stand before the loss's, and the loss then takes the ordinary path. That is correct,
    /// but it is not what these tries are for, so such a straggler must not decide the test.
    private func loseCarrierUntilPublishedAhead(
        _ h: MonitorHarness,
        _ what: String,
        lose: () async throws -> Void,
        check: ([NetworkSnapshot], NetworkSnapshot, Bool) throws -> Void,
        restore: () async throws -> Void
    ) async throws -> Bool {
        let snapshots = Mutex<[NetworkSnapshot]>([])
        let token = h.monitor.addObserver { snapshot in snapshots.withLock { $0.append(snapshot) } }
        defer { h.monitor.removeObserver(token) }
        for attempt in 1...3 {
            if attempt > 1 { try await restore() }
            let before = h.monitor.snapshot
            let aheadBefore = h.monitor.statistics.lossesPublishedAhead
            snapshots.withLock { $0 = [] }
            try await lose()
            try await h.expectSettled("\(what), try \(attempt)") { $0.isOffline(.noCarrier) }
            let ahead = h.monitor.statistics.lossesPublishedAhead > aheadBefore
            try check(snapshots.withLock { $0 }, before, ahead)
            if ahead { return true }
        }
        return false
    }

    @Test func addressRemovalIsNoAddress() async throws {
        let h = try await MonitorHarness.settledOnline()
        try await h.client("addr", "del", "\(VethTopology.clientAddress)/24", "dev", link)
        try await h.expectSettled("address removed") { $0.isOffline(.noAddress) }
        try await h.client("addr", "add", "\(VethTopology.clientAddress)/24", "dev", link)
        // Removing the last address flushed the default route silently.
        try await h.expectSettled("address back, route gone") { $0.isOffline(.noRoute) }
        try await h.client("route", "add", "default", "via", VethTopology.serverAddress)
        try await h.expectSettled("route back") { $0.isOnline(via: link) }
    }

    @Test func defaultRouteRemoveAndAdd() async throws {
        let h = try await MonitorHarness.settledOnline()
        try await h.client("route", "del", "default")
        try await h.expectSettled("default route removed") { $0.isOffline(.noRoute) }
        try await h.client("route", "add", "default", "via", VethTopology.serverAddress)
        try await h.expectSettled("default route added") { $0.isOnline(via: link) }
    }

    @Test func moreSpecificRouteReachesTheDestinationWithoutADefault() async throws {
        let host = IPAddress("198.51.100.7")!
        let h = try await MonitorHarness.settledOnline(destination: .addresses([host]))
        try await h.client("route", "del", "default")
        try await h.expectSettled("no default") { $0.isOffline(.noRoute) }
        try await h.client("route", "add", "198.51.100.0/24", "via", VethTopology.serverAddress)
        try await h.expectSettled("specific route") { verdict in
            guard case .online(let path) = verdict else { return false }
            return path.route == IPPrefix("198.51.100.0/24")!
        }
        // The internet at large is still unreachable: only the covered host is.
        #expect(ConnectivityPolicy.evaluate(h.monitor.snapshot, for: .internet) == .offline(.noRoute))
        // A more specific reject route wins over the broader one, as in the kernel.
        try await h.client("route", "add", "blackhole", "198.51.100.7/32")
        try await h.expectSettled("blackholed host") { $0.isOffline(.blocked) }
    }

    @Test func ipv6DefaultRouteWithTentativeAddress() async throws {
        let h = try await MonitorHarness.settledOnline()
        try await h.server("addr", "add", "fd00:77::2/64", "dev", VethTopology.serverLink, "nodad")
        // Duplicate address detection slowed to three probes 20 s apart, so the address stays
        // tentative for a minute, twice the hang guard: however late the steps below run, they
        // see it tentative (each waits at most the hang guard), and the kernel alone ends it.
        let probes = 3, probeIntervalMilliseconds = 20_000
        let probeInterval = Duration.milliseconds(probeIntervalMilliseconds)
        _ = try await h.topology.client.exec(["sysctl", "-qw", "net.ipv6.conf.\(link).dad_transmits=\(probes)"])
        _ = try await h.topology.client.exec(["sysctl", "-qw", "net.ipv6.neigh.\(link).retrans_time_ms=\(probeIntervalMilliseconds)"])
        try await h.client("addr", "add", "fd00:77::1/64", "dev", link)
        try await h.client("-6", "route", "add", "default", "via", "fd00:77::2", "dev", link)
        try await h.client("route", "del", "default")
        let address = try #require(try await NetlinkMonitor.dumpSnapshot(networkNamespacePath: h.topology.client.path)
            .addresses.first { $0.address == IPAddress("fd00:77::1")! })
        #expect(address.flags.contains(.tentative))
        // The only default route is IPv6, and its link's only global IPv6 address is tentative:
        // nothing can be sent from it yet (the IPv4 address has no route either: "no route").
        try await h.expectSettled("IPv6 default route, address tentative") { if case .offline = $0 { true } else { false } }
        try await h.expectSettled("IPv6 only, after DAD", timeout: probeInterval * probes + hangGuard) { $0.isOnline(via: link, family: .ipv6) }
        // The longest test here, so often the run's last: its monitor is gone before it ends.
        try await h.stopMonitor()
    }

    @Test func routeBurstOverflowsTheBufferAndResyncs() async throws {
        // A tiny buffer (the kernel's minimum) so a burst overflows it.
        let h = try await MonitorHarness.settledOnline(receiveBufferSize: 4096)
        // A slow observer holds the monitor's thread during each burst, as a busy consumer
        // would: the kernel keeps queueing notifications and the small buffer overflows for
        // certain, however the scheduler places the reader (on one core it can otherwise keep up).
        let hold = ObserverHold()
        // Let go on every path: a test that throws while holding would leave the monitor's
        // thread parked until the hold gives up by itself.
        defer { hold.release() }
        let token = h.monitor.addObserver { _ in hold.passWhenReleased() }
        defer { h.monitor.removeObserver(token) }
        let count = 5000
        var add: [String] = []
        for i in 0..<count { add.append("route add 10.\(100 + i / 65536).\(i / 256 % 256).\(i % 256)/32 via \(VethTopology.serverAddress)") }
        add.append("route del default")
        // Each burst starts only once a first change has parked the monitor in the observer.
        hold.engage()
        try await h.client("route", "add", "10.99.0.0/16", "via", VethTopology.serverAddress)
        try await hold.waitUntilHolding()
        try await h.topology.client.ipBatch(add)
        hold.release()
        // Resyncing after 5000 routes on a loaded machine is the slow part: twice the hang guard.
        try await h.expectSettled("after burst of \(count) adds, default removed", timeout: hangGuard * 2) { $0.isOffline(.noRoute) }
        #expect(h.monitor.snapshot.routes.filter { $0.destination.length == 32 && $0.table == RouteInfo.mainTable }.count == count)
        hold.engage()
        try await h.client("route", "del", "10.99.0.0/16")
        try await hold.waitUntilHolding()
        try await h.topology.client.ipBatch(["route add default via \(VethTopology.serverAddress)"] + (0..<count).map { i in "route del 10.\(100 + i / 65536).\(i / 256 % 256).\(i % 256)/32" })
        hold.release()
        try await h.expectSettled("after burst of deletes, default back", timeout: hangGuard * 2) { $0.isOnline(via: link) }
        let stats = h.monitor.statistics
        #expect(stats.overflows >= 2, "a 4 KiB buffer held during each burst of \(count) notifications should overflow: \(stats)")
        #expect(stats.fullResyncs >= stats.overflows)
        #expect(!hold.gaveUp, "the monitor's thread was held past the hold's own limit")
    }
}

/// Holds the monitor's thread inside an observer while engaged, then lets it go: when released,
/// or by itself after ``limit`` (then ``gaveUp`` says so), so a test that never releases it
/// cannot park the thread for good.
final class ObserverHold: Sendable {
    /// How long the monitor's thread is held at most.
    static let limit = hangGuard * 2

    private let engaged = Atomic<Bool>(false)
    private let holding = Atomic<Bool>(false)
    private let timedOut = Atomic<Bool>(false)
    private let released = DispatchSemaphore(value: 0)

    func engage() { engaged.store(true, ordering: .sequentiallyConsistent) }

    func release() {
        if engaged.exchange(false, ordering: .sequentiallyConsistent) { released.signal() }
    }

    /// Whether a hold ended at ``limit`` instead of by ``release()``.
    var gaveUp: Bool { timedOut.load(ordering: .sequentiallyConsistent) }

    /// Waits (bounded) until the monitor's thread is parked in ``passWhenReleased()``.
    func waitUntilHolding(timeout: Duration = hangGuard) async throws {
        try await waitUntil("the monitor's thread is held in the observer", timeout: timeout, interval: .milliseconds(2)) {
            holding.load(ordering: .sequentiallyConsistent)
        }
    }

    /// Called on the monitor's thread: blocks while engaged, at most ``limit``.
    func passWhenReleased() {
        guard engaged.load(ordering: .sequentiallyConsistent) else { return }
        holding.store(true, ordering: .sequentiallyConsistent)
        defer { holding.store(false, ordering: .sequentiallyConsistent) }
        let seconds = Double(Self.limit.components.seconds) + Double(Self.limit.components.attoseconds) / 1e18
        guard released.wait(timeout: .now() + seconds) == .timedOut else { return }
        if engaged.exchange(false, ordering: .sequentiallyConsistent) {
            timedOut.store(true, ordering: .sequentiallyConsistent)
        } else {
            // release() disengaged just now and is about to signal: take that signal, so the
            // semaphore does not let a later hold through.
            released.wait()
        }
    }
}
