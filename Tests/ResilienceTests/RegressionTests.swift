import ConnectivityPolicy
import NetlinkMonitor
import Testing
import TestSupport

/// Minimal replays of what the randomized runs found, kept so the bugs stay fixed.
@Suite(.enabled(if: Privileges.rootTestsEnabled, Comment(rawValue: Privileges.skipReason)))
struct RegressionTests {
    /// Found by seeds 1, 0x5EED and 0xC0FFEE: every re-read of the route table (after a link lost
    /// or regained carrier, or an address went away) dropped the IPv6 routes that have a gateway,
    /// the IPv6 default route included, so an IPv6-only host looked offline. Cause: libnl's
    /// `nl_cache_resync` merges such a route into its cached twin and then deletes the twin as
    /// obsolete; the monitor now refills the route cache instead.
    @Test func ipv6GatewayRoutesSurviveARouteTableReread() async throws {
        try Privileges.requireRoot()
        let h = try await ResilienceHarness()
        let log = VerdictLog()
        let stream = ConnectivityMonitor.verdicts(from: h.monitor, settle: .zero)
        let consumer = Task { for await verdict in stream { log.append(verdict) } }
        defer { consumer.cancel() }
        var sequence: UInt32 = 1
        func ipv6Online(_ dump: NetworkSnapshot) -> Bool {
            guard case .online(let path) = ConnectivityPolicy.evaluate(dump) else { return false }
            return path.family == .ipv6 && log.latest == ConnectivityPolicy.evaluate(dump)
        }

        // IPv6 only: a v6 address, a v6 default route via the peer, no IPv4 default route.
        try await h.apply([
            .ip("address add fd00:77::1/64 dev \(ResilienceHarness.link) nodad"),
            .ip("route add ::/0 via \(ResilienceHarness.gateway6) dev \(ResilienceHarness.link)"),
            .ip("route del default"),
            .ip("address add 10.77.0.21/24 dev \(ResilienceHarness.link)"),
        ], sequence: &sequence)
        let start = try await h.waitForAgreement(ipv6Online)
        if let dump = start { Issue.record("IPv6-only setup: \(SnapshotDiff(monitor: h.monitor.snapshot, kernel: dump))") }
        let rereads = h.monitor.statistics.routeResyncs

        // Removing an address makes the monitor re-read the route table (the kernel may have
        // flushed routes without a word); the IPv6 default route must survive that.
        try await h.apply([.ip("address del 10.77.0.21/24 dev \(ResilienceHarness.link)")], sequence: &sequence)
        // The re-read comes just after the monitor publishes the removal: agreement is judged
        // only after it, or it could be judged on the snapshot from before the re-read.
        try await waitUntil("the address removal made the monitor re-read routes") { h.monitor.statistics.routeResyncs > rereads }
        let after = try await h.waitForAgreement(ipv6Online)
        if let dump = after {
            Issue.record("after the route table was re-read: \(SnapshotDiff(monitor: h.monitor.snapshot, kernel: dump)); verdict \(String(describing: log.latest)), kernel says \(ConnectivityPolicy.evaluate(dump))")
        }

        // Same through a carrier loss and return on the peer side.
        try await h.apply([.peerLink(up: false), .peerLink(up: true)], sequence: &sequence)
        let flapped = try await h.waitForAgreement(ipv6Online)
        if let dump = flapped { Issue.record("after a carrier flap: \(SnapshotDiff(monitor: h.monitor.snapshot, kernel: dump))") }
    }
}
