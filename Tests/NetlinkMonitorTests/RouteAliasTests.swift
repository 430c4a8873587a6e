import ConnectivityPolicy
import NetlinkMonitor
import Testing
import TestSupport

/// Routes that share the kernel's identity (family, table, destination, tos, priority): IPv4
/// `append`/`prepend` aliases, IPv6 ECMP routes whose siblings come and go one at a time, and
/// IPv6 routes that share a destination and metric without being siblings. The monitor keeps
/// its own route table from notifications (not libnl's route cache), so each step checks it
/// against a fresh kernel dump.
@Suite(.enabled(if: Privileges.rootTestsEnabled, Comment(rawValue: Privileges.skipReason)))
struct RouteAliasTests {
    let link = VethTopology.clientLink

    @Test func ipv4AppendPrependReplaceAndDeleteOneAlias() async throws {
        let h = try await MonitorHarness.settledOnline()
        let prefix = "198.18.0.0/24"
        try await h.client("route", "add", prefix, "via", "10.77.0.2")
        try await h.client("route", "append", prefix, "via", "10.77.0.3")
        try await h.client("route", "prepend", prefix, "via", "10.77.0.4")
        try await h.expectSettled("three aliases") { _ in true }
        let dump = try await NetlinkMonitor.dumpSnapshot(networkNamespacePath: h.topology.client.path)
        #expect(dump.routes.filter { $0.destination == IPPrefix(prefix)! }.count == 3, "the kernel dump should list every alias")
        try await h.client("route", "del", prefix, "via", "10.77.0.3")
        try await h.expectSettled("middle alias deleted") { _ in true }
        try await h.client("route", "replace", prefix, "via", "10.77.0.5")
        try await h.expectSettled("first alias replaced") { _ in true }
        try await h.client("route", "del", prefix)
        try await h.expectSettled("first alias deleted") { _ in true }
        try await h.client("route", "del", prefix)
        try await h.expectSettled("last alias deleted") { _ in true }
    }

    /// Found by the randomized tests once they wrote policy tables: a unicast route replacing an
    /// IPv6 prohibit route of the same metric replaces it in the kernel (no ECMP-capable twin to
    /// replace, so the first of that metric goes), where the monitor had kept both.
    @Test func ipv6UnicastReplacesARejectRoute() async throws {
        try Privileges.requireRoot()
        let h = try await MonitorHarness()
        try await h.client("address", "add", "fd00:77::1/64", "dev", link, "nodad")
        try await h.client("-6", "route", "replace", "prohibit", "2001:db8:100::/48", "table", "100")
        try await h.expectSettled("prohibit route") { _ in true }
        try await h.client("-6", "route", "replace", "2001:db8:100::/48", "via", "fd00:77::2", "table", "100")
        try await h.expectSettled("replaced by a unicast route") { _ in true }
        #expect(h.monitor.snapshot.routes.filter { $0.destination == IPPrefix("2001:db8:100::/48")! }.count == 1)
    }

    @Test func ipv6MultipathSiblingsAndTwins() async throws {
        let h = try await MonitorHarness.settledOnline()
        try await h.client("address", "add", "fd00:77::1/64", "dev", link, "nodad")
        let prefix = "2001:db8:5::/48"
        try await h.client("-6", "route", "add", prefix, "via", "fd00:77::2", "dev", link)
        try await h.client("-6", "route", "append", prefix, "via", "fd00:77::3", "dev", link)
        try await h.client("-6", "route", "append", prefix, "via", "fd00:77::4", "dev", link)
        try await h.expectSettled("three siblings") { _ in true }
        #expect(h.monitor.snapshot.routes.contains { $0.destination == IPPrefix(prefix)! && $0.nextHops.count == 3 })
        try await h.client("-6", "route", "del", prefix, "via", "fd00:77::3", "dev", link)
        try await h.expectSettled("one sibling deleted") { _ in true }
        // Same destination and metric, but not siblings: a device route and a blackhole.
        try await h.client("-6", "route", "append", prefix, "dev", link)
        try await h.client("-6", "route", "append", "blackhole", prefix)
        try await h.expectSettled("twins next to the ECMP route") { _ in true }
        try await h.client("-6", "route", "replace", prefix, "via", "fd00:77::9", "dev", link)
        try await h.expectSettled("ECMP route replaced") { _ in true }
        try await h.client("-6", "route", "del", prefix, "dev", link)
        try await h.expectSettled("device twin deleted") { _ in true }
        try await h.client("-6", "route", "add", "2001:db8:6::/48", "nexthop", "via", "fd00:77::2", "dev", link, "nexthop", "via", "fd00:77::3", "dev", link)
        try await h.expectSettled("multipath added at once") { _ in true }
        try await h.client("-6", "route", "del", "2001:db8:6::/48")
        try await h.client("-6", "route", "flush", prefix)
        try await h.expectSettled("all deleted") { _ in true }
    }
}
