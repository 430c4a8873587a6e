import ConnectivityPolicy
import NetlinkMonitor
import Testing
import TestSupport

/// Routing beyond the main table, on a real kernel: policy rules, reject rules, `throw`, two
/// uplinks under both `ignore_routes_with_linkdown` settings, nexthop objects. After every step
/// the published verdict must be the one expected, equal the policy's verdict for a fresh kernel
/// dump, and agree with `ip route get` (an oracle with its own netlink code and parser).
///
/// Each test also records what the snapshot model alone (main table, no rules) says, where it
/// differs: that is the answer syncd gave before it asked the kernel.
@Suite(.enabled(if: Privileges.rootTestsEnabled, Comment(rawValue: Privileges.skipReason)))
struct PolicyRoutingTests {
    let link = VethTopology.clientLink
    /// A host behind the server namespace that only specific routes or rules decide about.
    static let host = IPAddress("10.88.0.7")!

    /// Waits for `predicate`, then holds the verdict against `ip route get`.
    func expect(
        _ h: MonitorHarness, _ description: String,
        model expectedModel: Verdict? = nil,
        sourceLocation: SourceLocation = #_sourceLocation,
        _ predicate: (Verdict) -> Bool
    ) async throws {
        try await h.expectKernelAgrees(description, about: Self.host, model: expectedModel, sourceLocation: sourceLocation, predicate)
    }

    @Test func aRuleToAnotherTableRoutesTheHost() async throws {
        try Privileges.requireRoot()
        let h = try await MonitorHarness(destination: .addresses([Self.host]))
        try await h.client("route", "del", "default")
        try await h.client("route", "add", "10.88.0.0/24", "via", VethTopology.serverAddress, "table", "100")
        try await expect(h, "route only in table 100, no rule") { $0.isOffline(.noRoute) }
        try await h.client("rule", "add", "to", "10.88.0.0/24", "lookup", "100")
        try await expect(h, "rule to table 100", model: .offline(.noRoute)) { $0.isOnline(via: link) }
        try await h.client("rule", "del", "to", "10.88.0.0/24", "lookup", "100")
        try await expect(h, "rule removed") { $0.isOffline(.noRoute) }
        #expect(h.monitor.statistics.policyChanges >= 2)
    }

    @Test func aRuleToATableWithAnUnreachableRouteBlocksTheHost() async throws {
        try Privileges.requireRoot()
        let h = try await MonitorHarness(destination: .addresses([Self.host]))
        try await expect(h, "default route") { $0.isOnline(via: link) }
        try await h.client("route", "add", "unreachable", "10.88.0.0/24", "table", "100")
        try await h.client("rule", "add", "to", "10.88.0.0/24", "lookup", "100", "priority", "100")
        try await expect(h, "rule to an unreachable route") { $0.isOffline(.blocked) }
        #expect(h.modelVerdict.isOnline, "the model alone reads main's default route")
        try await h.client("rule", "del", "priority", "100")
        try await expect(h, "rule removed") { $0.isOnline(via: link) }
    }

    @Test func prohibitAndUnreachableRuleActionsBlockTheHost() async throws {
        try Privileges.requireRoot()
        let h = try await MonitorHarness(destination: .addresses([Self.host]))
        try await expect(h, "default route") { $0.isOnline(via: link) }
        // A rule's `unreachable` action makes the kernel answer ENETUNREACH, exactly as no route
        // does ("Network is unreachable"); `prohibit` and `blackhole` answer as reject routes.
        for (action, reason) in [("prohibit", OfflineReason.blocked), ("unreachable", .noRoute), ("blackhole", .blocked)] {
            try await h.client("rule", "add", "to", "10.88.0.7", action, "priority", "90")
            try await expect(h, "rule action \(action)") { $0.isOffline(reason) }
            #expect(h.modelVerdict.isOnline, "the model alone says online under a \(action) rule")
            try await h.client("rule", "del", "priority", "90")
            try await expect(h, "\(action) rule removed") { $0.isOnline(via: link) }
        }
    }

    @Test func aRuleToATableOverridesABlackholeInMain() async throws {
        try Privileges.requireRoot()
        let h = try await MonitorHarness(destination: .addresses([Self.host]))
        try await h.client("route", "add", "blackhole", "10.88.0.0/24")
        try await expect(h, "blackhole in main") { $0.isOffline(.blocked) }
        try await h.client("route", "add", "10.88.0.0/24", "via", VethTopology.serverAddress, "table", "100")
        try await h.client("rule", "add", "to", "10.88.0.0/24", "lookup", "100", "priority", "100")
        try await expect(h, "rule to table 100 before main", model: .offline(.blocked)) { $0.isOnline(via: link) }
    }

    @Test func aThrowRouteIsNoRoute() async throws {
        try Privileges.requireRoot()
        let h = try await MonitorHarness(destination: .addresses([Self.host]))
        try await expect(h, "default route") { $0.isOnline(via: link) }
        // In main, a throw sends the lookup on to the next rule (the empty default table): the
        // kernel answers "network is unreachable" while the default route still covers the host.
        try await h.client("route", "add", "throw", "10.88.0.0/24")
        try await expect(h, "throw in main") { $0.isOffline(.noRoute) }
        #expect(h.modelVerdict.isOnline, "the model alone reads past the throw to the default route")
        try await h.client("route", "del", "throw", "10.88.0.0/24")
        try await expect(h, "throw removed") { $0.isOnline(via: link) }
    }

    @Test(arguments: [false, true])
    func twoUplinksWithCarrierLoss(ignoreLinkdown: Bool) async throws {
        try Privileges.requireRoot()
        let h = try await MonitorHarness(destination: .addresses([Self.host]))
        try await h.addSecondUplink()
        try await h.topology.client.exec(["sysctl", "-qw", "net.ipv4.conf.all.ignore_routes_with_linkdown=\(ignoreLinkdown ? 1 : 0)"])
        try await h.client("route", "replace", "default", "via", VethTopology.serverAddress, "dev", link, "metric", "100")
        try await h.client("route", "add", "default", "via", "10.78.0.2", "dev", "veth-c2", "metric", "200")
        try await expect(h, "both uplinks") { $0.isOnline(via: link) }
        try await h.server("link", "set", VethTopology.serverLink, "down")
        if ignoreLinkdown {
            try await expect(h, "carrier lost, linkdown routes ignored") { $0.isOnline(via: "veth-c2") }
        } else {
            // The kernel keeps choosing the preferred route, marked linkdown: traffic fails,
            // although the second uplink is fine (the model alone said online via veth-c2).
            try await expect(h, "carrier lost, linkdown routes kept") { $0.isOffline(.noCarrier) }
            #expect(h.modelVerdict.isOnline(via: "veth-c2"))
        }
        try await h.server("link", "set", VethTopology.serverLink, "up")
        try await expect(h, "carrier back") { $0.isOnline(via: link) }
    }

    @Test func nexthopObjects() async throws {
        try Privileges.requireRoot()
        let h = try await MonitorHarness(destination: .addresses([Self.host]))
        try await h.addSecondUplink()
        try await h.client("route", "del", "default")
        try await expect(h, "no route") { $0.isOffline(.noRoute) }
        try await h.client("nexthop", "add", "id", "10", "via", VethTopology.serverAddress, "dev", link)
        try await h.client("route", "add", "10.88.0.0/24", "nhid", "10")
        try await expect(h, "route through nexthop 10") { $0.isOnline(via: link) }
        // Replacing the nexthop object moves every route that uses it, without a route message.
        try await h.client("nexthop", "replace", "id", "10", "via", "10.78.0.2", "dev", "veth-c2")
        try await expect(h, "nexthop 10 moved to the second uplink") { $0.isOnline(via: "veth-c2") }
        try await h.client("nexthop", "del", "id", "10")
        try await expect(h, "nexthop removed") { $0.isOffline(.noRoute) }
    }
}

extension MonitorHarness {
    /// What the snapshot model alone says for the destination, ignoring the kernel's lookups.
    var modelVerdict: Verdict { ConnectivityPolicy.evaluateModel(monitor.snapshot, for: destination) }

    /// A second veth pair between the namespaces: `veth-c2` 10.78.0.1/24 to `veth-s2` 10.78.0.2/24.
    func addSecondUplink() async throws {
        try await client("link", "add", "veth-c2", "type", "veth", "peer", "name", "veth-s2", "netns", topology.server.name)
        try await server("addr", "add", "10.78.0.2/24", "dev", "veth-s2")
        try await server("link", "set", "veth-s2", "up")
        try await client("addr", "add", "10.78.0.1/24", "dev", "veth-c2")
        try await client("link", "set", "veth-c2", "up")
    }
}
