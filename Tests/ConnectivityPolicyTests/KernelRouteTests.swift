import ConnectivityPolicy
import Testing

/// The policy when the kernel's own lookup is known: the kernel picks the path (its table, its
/// link), the snapshot says whether that link can carry traffic and, for a refusal, why.
@Suite struct KernelRouteTests {
    static let host = IPAddress("198.51.100.7")!

    func verdict(_ net: Net, _ kernel: KernelRoute) -> Verdict {
        var snapshot = net.snapshot
        snapshot.kernelRoutes = [Self.host: kernel]
        return ConnectivityPolicy.evaluate(snapshot, for: .addresses([Self.host]))
    }

    func twoLinks() -> Net {
        var net = Net()
        net.links.append(LinkInfo(index: 3, name: "wg0", flags: [.up, .running, .lowerUp], operState: .unknown))
        net.addresses.append(AddressInfo(linkIndex: 3, address: IPAddress("10.6.0.2")!, prefixLength: 32, scope: .universe, flags: []))
        net.routes.append(RouteInfo(destination: IPPrefix("198.51.100.0/24")!, table: 100, nextHops: [NextHop(linkIndex: 3)]))
        return net
    }

    @Test func theKernelsChoiceOfLinkWinsOverTheMainTable() {
        let net = twoLinks()
        // The model reads main: the default route through eth0.
        #expect(net.verdict(.addresses([Self.host])).link == "eth0")
        // The kernel (a rule to table 100) sends it through wg0, and names the route it used.
        guard case .online(let path) = verdict(net, .route(linkIndex: 3, type: .unicast, table: 100, gateway: nil)) else {
            Issue.record("expected online")
            return
        }
        #expect(path.link == "wg0" && path.route == IPPrefix("198.51.100.0/24")!)
    }

    @Test func thePathsLinkMustHaveCarrierAndAnAddress() {
        var net = twoLinks()
        net.setLink(3, flags: [.up], operState: .lowerLayerDown)
        // eth0 is fine, but the kernel still sends the host through wg0 (a linkdown route kept).
        #expect(verdict(net, .route(linkIndex: 3, type: .unicast, table: 100, gateway: nil)) == .offline(.noCarrier))
        net = twoLinks()
        net.addresses.removeAll { $0.linkIndex == 3 }
        #expect(verdict(net, .route(linkIndex: 3, type: .unicast, table: 100, gateway: nil)) == .offline(.noAddress))
    }

    @Test(arguments: [RouteRefusal.unreachable, .prohibited, .blackhole])
    func aRejectIsBlockedWhateverTheMainTableSays(refusal: RouteRefusal) {
        #expect(Net().verdict(.addresses([Self.host])).isOnline)
        #expect(verdict(Net(), .refused(refusal)) == .offline(.blocked))
    }

    @Test func noRouteTakesItsReasonFromTheModel() {
        var net = Net()
        // The model sees a default route (a throw or a rule took the lookup elsewhere): no route.
        #expect(verdict(net, .refused(.noRoute)) == .offline(.noRoute))
        // Without an address, the way there stops earlier, and the reason says so.
        net.addresses.removeAll { $0.linkIndex == 2 }
        #expect(verdict(net, .refused(.noRoute)) == .offline(.noAddress))
        net = Net()
        net.setLink(2, flags: [.up], operState: .down)
        #expect(verdict(net, .refused(.noRoute)) == .offline(.noCarrier))
        // A blackhole in main that a rule bypassed into nothing: the kernel said no route, not blocked.
        net = Net()
        net.routes.append(RouteInfo(destination: IPPrefix("198.51.100.0/24")!, type: .blackhole, nextHops: []))
        #expect(verdict(net, .refused(.noRoute)) == .offline(.noRoute))
    }

    @Test func aLocalRouteIsThisMachine() {
        guard case .online(let path) = verdict(Net(), .route(linkIndex: 1, type: .local, table: 255, gateway: nil)) else {
            Issue.record("expected online")
            return
        }
        #expect(path.link == "lo")
    }

    /// The netlink monitor skips the lookups of a carrier loss it publishes ahead when this says
    /// they cannot matter: the verdict must then be the same whatever they hold.
    @Test func withoutCarrierBeyondLoopbackTheLookupsCannotMatter() {
        let answers: [KernelRoute] = [
            .route(linkIndex: 2, type: .unicast, table: 254, gateway: IPAddress("192.0.2.1")),
            .route(linkIndex: 3, type: .unicast, table: 100, gateway: nil),
            .route(linkIndex: 1, type: .local, table: 255, gateway: nil),
            .refused(.noRoute), .refused(.unreachable), .refused(.prohibited), .refused(.blackhole), .refused(.other),
        ]
        var net = twoLinks()
        #expect(ConnectivityPolicy.consultsKernelRoutes(links: net.snapshot.links))
        // With carrier, the answers do decide: not one verdict for all of them.
        #expect(Set(answers.map { verdict(net, $0) }).count > 1)
        net.setLink(2, flags: [.up], operState: .down)
        #expect(ConnectivityPolicy.consultsKernelRoutes(links: net.snapshot.links))
        net.setLink(3, flags: [.up], operState: .lowerLayerDown)
        #expect(!ConnectivityPolicy.consultsKernelRoutes(links: net.snapshot.links))
        for answer in answers {
            #expect(verdict(net, answer) == .offline(.noCarrier), "kernel answer \(answer)")
        }
        var snapshot = net.snapshot
        snapshot.kernelRoutes = [:]
        #expect(ConnectivityPolicy.evaluate(snapshot, for: .addresses([Self.host])) == .offline(.noCarrier))
    }

    @Test func evaluateModelIgnoresTheLookups() {
        var snapshot = Net().snapshot
        snapshot.kernelRoutes = [Self.host: .refused(.prohibited)]
        #expect(ConnectivityPolicy.evaluate(snapshot, for: .addresses([Self.host])) == .offline(.blocked))
        #expect(ConnectivityPolicy.evaluateModel(snapshot, for: .addresses([Self.host])).isOnline)
    }
}

/// The rung above the route: evidence limits an online verdict, never an offline one.
@Suite struct LadderTests {
    let online = Net().verdict()

    @Test func evidenceLimitsOnlyOnline() {
        #expect(online.limited(by: LimitedEvidence()) == online)
        let limited = online.limited(by: LimitedEvidence(serverUnreachable: "10.0.0.1: connection timed out"))
        guard case .limited(let limitation) = limited else {
            Issue.record("expected limited")
            return
        }
        #expect(limitation.reason == .serverUnreachable && limitation.path == online.path && limitation.detail.contains("timed out"))
        // Offline explains every failure above it.
        #expect(Verdict.offline(.noRoute).limited(by: LimitedEvidence(dnsFailure: "x: failed")) == .offline(.noRoute))
        #expect(!limited.isOnline && limited.path?.link == "eth0")
    }

    @Test func aPortalExplainsTheOtherFailures() {
        let all = LimitedEvidence(dnsFailure: "feed.example: Temporary failure in name resolution", portal: "http://portal.example/login", serverUnreachable: "connection timed out")
        guard case .limited(let limitation) = online.limited(by: all) else {
            Issue.record("expected limited")
            return
        }
        #expect(limitation.reason == .portal && limitation.detail == "http://portal.example/login")
        guard case .limited(let dns) = online.limited(by: LimitedEvidence(dnsFailure: "feed.example: failed", serverUnreachable: "timed out")) else {
            Issue.record("expected limited")
            return
        }
        #expect(dns.reason == .dnsFailed)
    }

    @Test func urlHostsBecomeDestinations() {
        #expect(Destination(urlHost: "10.0.0.1") == .addresses([IPAddress("10.0.0.1")!]))
        #expect(Destination(urlHost: "[2001:db8::1]") == .addresses([IPAddress("2001:db8::1")!]))
        #expect(Destination(urlHost: "feed.example") == .host("feed.example"))
        #expect(Destination(urlHost: nil) == .internet)
        // An unresolved name is judged as the internet by the pure policy.
        #expect(ConnectivityPolicy.evaluate(Net().snapshot, for: .host("feed.example")) == Net().verdict(.internet))
    }
}
