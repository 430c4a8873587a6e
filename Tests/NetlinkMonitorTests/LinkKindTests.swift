import ConnectivityPolicy
import Foundation
import NetlinkMonitor
import Testing
import TestSupport

/// Links of every kind the kernel reports, on a real kernel: a bridge carrying the address (every
/// container or VM host), a macvlan, a tun device with and without a process behind it, policy
/// rules and split routes through a tunnel, and routes with a lifetime. After each step the
/// published verdict must be the one expected, the monitor's snapshot must equal a fresh dump,
/// and `ip route get` (an oracle with its own netlink code) must agree.
@Suite(.enabled(if: Privileges.rootTestsEnabled, Comment(rawValue: Privileges.skipReason)))
struct LinkKindTests {
    /// A host behind the server namespace, reached through the default route.
    static let host = IPAddress("10.88.0.7")!
    /// The internet at large is judged by this address's route (IPv4).
    static let internetProbe = Destination.internetProbes[0]

    /// A client whose address sits on bridge `br0`, with `veth-c` as its only port.
    func bridgedHarness(destination: Destination = .addresses([Self.host])) async throws -> MonitorHarness {
        let h = try await MonitorHarness(destination: destination, configure: false)
        try await h.server("addr", "add", "\(VethTopology.serverAddress)/24", "dev", VethTopology.serverLink)
        try await h.server("link", "set", VethTopology.serverLink, "up")
        try await h.client("link", "add", "br0", "type", "bridge")
        try await h.client("link", "set", VethTopology.clientLink, "master", "br0")
        try await h.client("link", "set", VethTopology.clientLink, "up")
        try await h.client("link", "set", "br0", "up")
        try await h.client("addr", "add", "\(VethTopology.clientAddress)/24", "dev", "br0")
        try await h.client("route", "add", "default", "via", VethTopology.serverAddress, "dev", "br0")
        return h
    }

    @Test func aBridgeCarryingTheAddressIsOnlineAndFollowsItsPort() async throws {
        try Privileges.requireRoot()
        let h = try await bridgedHarness()
        try await h.expectKernelAgrees("address on the bridge", about: Self.host) { $0.isOnline(via: "br0") }
        #expect(h.monitor.snapshot.link(named: "br0") != nil, "the bridge is among the links: \(h.monitor.snapshot.links.map(\.name))")

        // The bridge's only port loses carrier: so does the bridge.
        try await h.server("link", "set", VethTopology.serverLink, "down")
        try await h.expectKernelAgrees("the port lost carrier", about: Self.host) { $0.isOffline(.noCarrier) }
        try await h.server("link", "set", VethTopology.serverLink, "up")
        try await h.expectKernelAgrees("the port has carrier again", about: Self.host) { $0.isOnline(via: "br0") }

        // A bridge without ports has no carrier; its routes stay.
        try await h.client("link", "set", VethTopology.clientLink, "nomaster")
        try await h.expectKernelAgrees("the port detached", about: Self.host) { $0.isOffline(.noCarrier) }
        try await h.client("link", "set", VethTopology.clientLink, "master", "br0")
        try await h.expectKernelAgrees("the port attached again", about: Self.host) { $0.isOnline(via: "br0") }

        // The bridge down: the kernel flushes its routes; the port keeps carrier but holds no address.
        try await h.client("link", "set", "br0", "down")
        try await h.expectKernelAgrees("the bridge down", about: Self.host) { $0.isOffline(.noAddress) }
        try await h.client("link", "set", "br0", "up")
        try await h.client("route", "add", "default", "via", VethTopology.serverAddress, "dev", "br0")
        try await h.expectKernelAgrees("the bridge up, the default route back", about: Self.host) { $0.isOnline(via: "br0") }
        try await h.stopMonitor()
    }

    @Test func theInternetThroughABridgeIsOnline() async throws {
        try Privileges.requireRoot()
        let h = try await bridgedHarness(destination: .internet)
        try await h.expectKernelAgrees("internet through the bridge", about: Self.internetProbe) { $0.isOnline(via: "br0") }
    }

    @Test func aMacvlanFollowsItsLowerLink() async throws {
        try Privileges.requireRoot()
        let h = try await MonitorHarness(destination: .addresses([Self.host]), configure: false)
        try await h.server("addr", "add", "\(VethTopology.serverAddress)/24", "dev", VethTopology.serverLink)
        try await h.server("link", "set", VethTopology.serverLink, "up")
        try await h.client("link", "set", VethTopology.clientLink, "up")
        try await h.client("link", "add", "mv0", "link", VethTopology.clientLink, "type", "macvlan", "mode", "bridge")
        try await h.client("link", "set", "mv0", "up")
        try await h.client("addr", "add", "\(VethTopology.clientAddress)/24", "dev", "mv0")
        try await h.client("route", "add", "default", "via", VethTopology.serverAddress, "dev", "mv0")
        try await h.expectKernelAgrees("address on the macvlan", about: Self.host) { $0.isOnline(via: "mv0") }
        // The lower link loses carrier: the macvlan's operstate turns LOWERLAYERDOWN.
        try await h.server("link", "set", VethTopology.serverLink, "down")
        try await h.expectKernelAgrees("the lower link lost carrier", about: Self.host) { $0.isOffline(.noCarrier) }
        try await h.server("link", "set", VethTopology.serverLink, "up")
        try await h.expectKernelAgrees("the lower link has carrier again", about: Self.host) { $0.isOnline(via: "mv0") }
        try await h.client("link", "set", "mv0", "down")
        try await h.expectKernelAgrees("the macvlan down", about: Self.host) { if case .offline = $0 { true } else { false } }
    }

    @Test func aTunHasCarrierOnlyWhileAProcessHoldsIt() async throws {
        try Privileges.requireRoot()
        let h = try await MonitorHarness(destination: .addresses([Self.host]))
        try await h.client("tuntap", "add", "dev", "tun0", "mode", "tun")
        try await h.client("addr", "add", "10.99.0.1/24", "dev", "tun0")
        try await h.client("link", "set", "tun0", "up")
        try await h.client("route", "add", "10.88.0.0/24", "dev", "tun0")
        // The kernel routes the host through tun0 although nothing reads it: NO-CARRIER.
        try await h.expectKernelAgrees("a tun nobody holds", about: Self.host) { $0.isOffline(.noCarrier) }
        let holder = try await TunHolder(in: h, device: "tun0")
        try await h.expectKernelAgrees("a process holds the tun", about: Self.host) { $0.isOnline(via: "tun0") }
        await holder.stop()
        try await h.expectKernelAgrees("the process let go", about: Self.host) { $0.isOffline(.noCarrier) }
    }

    /// wg-quick's rules: everything not marked goes to a table whose default route is the tunnel.
    @Test func theInternetFollowsPolicyRulesIntoATunnel() async throws {
        try Privileges.requireRoot()
        let h = try await MonitorHarness(destination: .internet)
        try await h.expectKernelAgrees("the physical link", about: Self.internetProbe) { $0.isOnline(via: VethTopology.clientLink) }
        try await h.client("tuntap", "add", "dev", "tun0", "mode", "tun")
        try await h.client("addr", "add", "10.99.0.1/24", "dev", "tun0")
        try await h.client("link", "set", "tun0", "up")
        let holder = try await TunHolder(in: h, device: "tun0")
        try await h.client("route", "add", "default", "dev", "tun0", "table", "51820")
        try await h.client("rule", "add", "not", "fwmark", "51820", "table", "51820", "priority", "100")
        try await h.expectKernelAgrees("rules into the tunnel", about: Self.internetProbe) { $0.isOnline(via: "tun0") }
        #expect(h.modelVerdict.isOnline(via: VethTopology.clientLink), "the model alone reads main's default route")
        // The tunnel loses carrier: every public address goes through it, so the internet is gone.
        await holder.stop()
        try await h.expectTunnelCarrierLost()
        try await h.client("rule", "del", "priority", "100")
        try await h.expectKernelAgrees("the rule removed", about: Self.internetProbe) { $0.isOnline(via: VethTopology.clientLink) }
    }

    /// OpenVPN's `def1`: two `/1` routes through the tunnel override the default route.
    @Test func theInternetFollowsSplitRoutesIntoATunnel() async throws {
        try Privileges.requireRoot()
        let h = try await MonitorHarness(destination: .internet)
        try await h.client("tuntap", "add", "dev", "tun0", "mode", "tun")
        try await h.client("addr", "add", "10.99.0.1/24", "dev", "tun0")
        try await h.client("link", "set", "tun0", "up")
        let holder = try await TunHolder(in: h, device: "tun0")
        try await h.client("route", "add", "0.0.0.0/1", "dev", "tun0")
        try await h.client("route", "add", "128.0.0.0/1", "dev", "tun0")
        try await h.expectKernelAgrees("split routes into the tunnel", about: Self.internetProbe) { $0.isOnline(via: "tun0") }
        await holder.stop()
        try await h.expectTunnelCarrierLost()
    }

    /// The kernel stops using a route when its lifetime ends and says nothing until its garbage
    /// collection deletes it; that is set to an hour here, so only the monitor's own timer can
    /// notice within the test's bound.
    @Test func anIPv6RouteStopsCountingWhenItsLifetimeEnds() async throws {
        try Privileges.requireRoot()
        let host = IPAddress("2001:db8:88::7")!
        let h = try await MonitorHarness(destination: .addresses([host]))
        _ = try await h.topology.client.exec(["sysctl", "-qw", "net.ipv6.route.gc_interval=3600"])
        try await h.server("addr", "add", "2001:db8:77::2/64", "dev", VethTopology.serverLink, "nodad")
        try await h.client("addr", "add", "2001:db8:77::1/64", "dev", VethTopology.clientLink, "nodad")
        try await h.expectKernelAgrees("no route to the host yet", about: host) { $0.isOffline(.noRoute) }
        try await h.client("-6", "route", "add", "2001:db8:88::/64", "via", "2001:db8:77::2", "dev", VethTopology.clientLink, "expires", "3")
        try await h.expectKernelAgrees("a route with 3 s to live", about: host) { $0.isOnline(via: VethTopology.clientLink, family: .ipv6) }
        try await h.expectKernelAgrees("the route's lifetime ended", about: host) { $0.isOffline(.noRoute) }
        let listed = try await h.topology.client.ip("-6", "route", "show", "2001:db8:88::/64")
        #expect(listed.contains("2001:db8:88::/64"), "the kernel still lists the expired route, so nothing but its lifetime told: \(listed)")
        #expect(h.monitor.statistics.routeExpiries >= 1)
    }

    /// IPv4 routes have no lifetime in the kernel: `expires` is accepted and ignored. After the
    /// time has passed, syncd and the kernel still agree.
    @Test func anIPv4RouteWithExpiresKeepsCounting() async throws {
        try Privileges.requireRoot()
        let h = try await MonitorHarness(destination: .addresses([Self.host]))
        try await h.client("route", "del", "default")
        try await h.client("route", "add", "10.88.0.0/24", "via", VethTopology.serverAddress, "expires", "1")
        try await h.expectKernelAgrees("a route with expires 1", about: Self.host) { $0.isOnline(via: VethTopology.clientLink) }
        try await Task.sleep(for: .seconds(1.5))
        try await h.expectKernelAgrees("past its expiry", about: Self.host) { $0.isOnline(via: VethTopology.clientLink) }
    }
}

extension MonitorHarness {
    /// The internet verdict after the tunnel that carries IPv4 lost carrier: offline, for the
    /// reason of the family that got furthest (here IPv6, which has no address at all); IPv4's
    /// own reason is the tunnel's lost carrier.
    func expectTunnelCarrierLost(sourceLocation: SourceLocation = #_sourceLocation) async throws {
        try await expectKernelAgrees("the tunnel lost carrier", about: LinkKindTests.internetProbe, sourceLocation: sourceLocation) {
            if case .offline = $0 { true } else { false }
        }
        #expect(
            ConnectivityPolicy.evaluate(monitor.snapshot, for: .addresses([LinkKindTests.internetProbe])) == .offline(.noCarrier),
            "IPv4 goes through the tunnel, which has no carrier", sourceLocation: sourceLocation
        )
    }
}

/// A process in the client namespace that attaches to a tun device (`TUNSETIFF`), which gives
/// the device carrier for as long as the process holds it.
struct TunHolder {
    let process: ChildProcess
    let directory: TemporaryDirectory

    init(in h: MonitorHarness, device: String) async throws {
        directory = try TemporaryDirectory(prefix: "syncd-tun")
        let script = """
        import fcntl, os, struct, sys, time
        fd = os.open("/dev/net/tun", os.O_RDWR)
        # TUNSETIFF with IFF_TUN | IFF_NO_PI
        fcntl.ioctl(fd, 0x400454ca, struct.pack("16sH22x", sys.argv[1].encode(), 0x0001 | 0x1000))
        print("attached", flush=True)
        while True:
            time.sleep(3600)
        """
        process = try ChildProcess(["ip", "netns", "exec", h.topology.client.name, "python3", "-c", script, device], logPath: directory.file("tun.log"))
        let process = self.process
        try await waitUntil("the tun holder attached to \(device)") { process.output.contains("attached") || !process.isRunning }
        guard process.output.contains("attached") else {
            throw TunHolderFailed(output: process.output)
        }
    }

    func stop() async {
        await process.stop(signal: SIGKILL)
    }
}

struct TunHolderFailed: Error, CustomStringConvertible {
    var output: String
    var description: String { "the tun holder did not attach: \(output)" }
}
