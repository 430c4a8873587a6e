import ConnectivityPolicy
import Testing

/// A small builder for snapshots: one ethernet-like link with an address and a default route.
struct Net {
    var links: [LinkInfo] = [
        LinkInfo(index: 1, name: "lo", flags: [.up, .loopback, .running, .lowerUp], operState: .unknown),
        LinkInfo(index: 2, name: "eth0", flags: [.up, .running, .lowerUp], operState: .up),
    ]
    var addresses: [AddressInfo] = [
        AddressInfo(linkIndex: 1, address: IPAddress("127.0.0.1")!, prefixLength: 8, scope: .host, flags: []),
        AddressInfo(linkIndex: 2, address: IPAddress("192.0.2.10")!, prefixLength: 24, scope: .universe, flags: []),
    ]
    var routes: [RouteInfo] = [
        RouteInfo(destination: IPPrefix("192.0.2.0/24")!, type: .unicast, nextHops: [NextHop(linkIndex: 2)]),
        RouteInfo(destination: .defaultRoute(.ipv4), nextHops: [NextHop(linkIndex: 2, gateway: IPAddress("192.0.2.1"))]),
    ]

    var snapshot: NetworkSnapshot { NetworkSnapshot(links: links, addresses: addresses, routes: routes) }

    func verdict(_ destination: Destination = .internet) -> Verdict {
        ConnectivityPolicy.evaluate(snapshot, for: destination)
    }

    mutating func setLink(_ index: Int32, flags: LinkFlags, operState: OperState) {
        links = links.map { $0.index == index ? LinkInfo(index: index, name: $0.name, flags: flags, operState: operState) : $0 }
    }
}

extension Verdict {
    var link: String? {
        if case .online(let path) = self { return path.link }
        return nil
    }
}

@Suite struct CarrierRuleTests {
    @Test(arguments: [
        // (flags, operstate, expected) following systemd-networkd's netif_has_carrier(): with
        // operstate UNKNOWN it takes LOWER_UP and RUNNING together.
        (LinkFlags([.up, .running, .lowerUp]), OperState.up, true),
        (LinkFlags([.up]), OperState.up, true),
        (LinkFlags([.up, .running, .lowerUp]), OperState.unknown, true),
        (LinkFlags([.up, .lowerUp]), OperState.unknown, false),
        (LinkFlags([.up, .running]), OperState.unknown, false),
        (LinkFlags([.up]), OperState.unknown, false),
        (LinkFlags([.up, .running, .lowerUp, .dormant]), OperState.unknown, false),
        (LinkFlags([.up, .running, .lowerUp]), OperState.dormant, false),
        (LinkFlags([.up, .running, .lowerUp]), OperState.down, false),
        (LinkFlags([.up]), OperState.lowerLayerDown, false),
        (LinkFlags([.running, .lowerUp]), OperState.up, false),
        (LinkFlags([.up, .lowerUp]), OperState.testing, false),
        (LinkFlags([.up, .lowerUp]), OperState.notPresent, false),
    ])
    func carrier(flags: LinkFlags, operState: OperState, expected: Bool) {
        #expect(LinkInfo(index: 2, name: "eth0", flags: flags, operState: operState).hasCarrier == expected)
    }
}

@Suite struct VerdictTests {
    @Test func onlineThroughDefaultRoute() {
        let verdict = Net().verdict()
        guard case .online(let path) = verdict else { Issue.record("expected online, got \(verdict)"); return }
        #expect(path.link == "eth0")
        #expect(path.family == .ipv4)
        #expect(path.route == .defaultRoute(.ipv4))
        #expect(path.gateway == IPAddress("192.0.2.1"))
    }

    @Test func noCarrierWhenTheOnlyLinkLostIt() {
        var net = Net()
        net.setLink(2, flags: [.up], operState: .lowerLayerDown)
        #expect(net.verdict() == .offline(.noCarrier))
    }

    @Test func loopbackNeverCounts() {
        var net = Net()
        net.links.removeAll { $0.name == "eth0" }
        net.routes.append(RouteInfo(destination: .defaultRoute(.ipv4), nextHops: [NextHop(linkIndex: 1)]))
        net.addresses.append(AddressInfo(linkIndex: 1, address: IPAddress("203.0.113.5")!, prefixLength: 32, scope: .universe, flags: []))
        #expect(net.verdict() == .offline(.noCarrier))
    }

    @Test func noAddressWhenNoneIsGlobal() {
        var net = Net()
        net.addresses.removeAll { $0.linkIndex == 2 }
        net.addresses.append(AddressInfo(linkIndex: 2, address: IPAddress("fe80::1")!, prefixLength: 64, scope: .link, flags: []))
        #expect(net.verdict() == .offline(.noAddress))
    }

    @Test(arguments: [AddressFlags.tentative, .dadFailed])
    func unfinishedOrFailedDADDoesNotCount(flag: AddressFlags) {
        var net = Net()
        net.addresses = net.addresses.map { a in
            var a = a
            if a.linkIndex == 2 { a.flags = flag }
            return a
        }
        #expect(net.verdict() == .offline(.noAddress))
    }

    @Test func addressOnALinkWithoutCarrierDoesNotCount() {
        var net = Net()
        net.links.append(LinkInfo(index: 3, name: "wlan0", flags: [.up, .running, .lowerUp], operState: .up))
        net.setLink(2, flags: [.up], operState: .down)
        #expect(net.verdict() == .offline(.noAddress))
    }

    @Test func noRouteWithoutADefault() {
        var net = Net()
        net.routes.removeAll { $0.destination.isDefault }
        #expect(net.verdict() == .offline(.noRoute))
        // The local subnet is still reachable.
        #expect(net.verdict(.addresses([IPAddress("192.0.2.77")!])).link == "eth0")
    }

    @Test func linkdownRouteIsNotUsable() {
        var net = Net()
        net.routes = net.routes.map { r in
            var r = r
            r.nextHops = r.nextHops.map { NextHop(linkIndex: $0.linkIndex, gateway: $0.gateway, isLinkDown: true) }
            return r
        }
        #expect(net.verdict() == .offline(.noRoute))
    }

    @Test func routeThroughALinkWithoutAddressIsNotUsable() {
        var net = Net()
        net.links.append(LinkInfo(index: 3, name: "wg0", flags: [.up, .running, .lowerUp], operState: .unknown))
        net.routes = [RouteInfo(destination: .defaultRoute(.ipv4), nextHops: [NextHop(linkIndex: 3)])]
        #expect(net.verdict() == .offline(.noRoute))
    }

    @Test func moreSpecificRouteCoversTheDestination() {
        var net = Net()
        // As the kernel reports a WireGuard link: no operstate, RUNNING and LOWER_UP.
        net.links.append(LinkInfo(index: 3, name: "wg0", flags: [.up, .running, .lowerUp], operState: .unknown))
        net.addresses.append(AddressInfo(linkIndex: 3, address: IPAddress("10.8.0.2")!, prefixLength: 24, scope: .universe, flags: []))
        net.routes.append(RouteInfo(destination: IPPrefix("198.51.100.0/24")!, nextHops: [NextHop(linkIndex: 3)]))
        #expect(net.verdict(.addresses([IPAddress("198.51.100.9")!])).link == "wg0")
        #expect(net.verdict(.addresses([IPAddress("203.0.113.9")!])).link == "eth0")
        net.routes.removeAll { $0.destination.isDefault }
        #expect(net.verdict(.addresses([IPAddress("203.0.113.9")!])) == .offline(.noRoute))
        #expect(net.verdict(.addresses([IPAddress("198.51.100.9")!])).link == "wg0")
    }

    @Test func lowerMetricWinsAmongEqualPrefixes() {
        var net = Net()
        net.links.append(LinkInfo(index: 3, name: "wlan0", flags: [.up, .running, .lowerUp], operState: .up))
        net.addresses.append(AddressInfo(linkIndex: 3, address: IPAddress("10.0.0.5")!, prefixLength: 24, scope: .universe, flags: []))
        net.routes = [
            RouteInfo(destination: .defaultRoute(.ipv4), priority: 600, nextHops: [NextHop(linkIndex: 3)]),
            RouteInfo(destination: .defaultRoute(.ipv4), priority: 100, nextHops: [NextHop(linkIndex: 2)]),
        ]
        #expect(net.verdict().link == "eth0")
        net.setLink(2, flags: [.up], operState: .down)
        #expect(net.verdict().link == "wlan0")
    }

    @Test(arguments: [RouteType.blackhole, .unreachable, .prohibit])
    func moreSpecificRejectRouteWins(type: RouteType) {
        var net = Net()
        net.routes.append(RouteInfo(destination: IPPrefix("203.0.113.0/24")!, type: type, nextHops: []))
        #expect(net.verdict(.addresses([IPAddress("203.0.113.1")!])) == .offline(.blocked))
        #expect(net.verdict(.addresses([IPAddress("198.51.100.1")!])).link == "eth0")
    }

    @Test func otherTablesAreIgnored() {
        var net = Net()
        net.routes = [RouteInfo(destination: .defaultRoute(.ipv4), table: 100, nextHops: [NextHop(linkIndex: 2)])]
        #expect(net.verdict() == .offline(.noRoute))
    }

    @Test func ipv6OnlyDestinationNeedsIPv6() {
        var net = Net()
        let v6 = IPAddress("2001:db8::1")!
        #expect(net.verdict(.addresses([v6])) == .offline(.noAddress))
        net.addresses.append(AddressInfo(linkIndex: 2, address: IPAddress("2001:db8:1::10")!, prefixLength: 64, scope: .universe, flags: []))
        #expect(net.verdict(.addresses([v6])) == .offline(.noRoute))
        net.routes.append(RouteInfo(destination: .defaultRoute(.ipv6), nextHops: [NextHop(linkIndex: 2, gateway: IPAddress("fe80::1"))]))
        guard case .online(let path) = net.verdict(.addresses([v6])) else { Issue.record("expected online"); return }
        #expect(path.family == .ipv6)
    }

    @Test func anyResolvedAddressSufficesAndTheBestReasonIsReported() {
        var net = Net()
        net.routes.removeAll { $0.destination.isDefault }
        let v4 = IPAddress("203.0.113.1")!, v6 = IPAddress("2001:db8::1")!
        // IPv6 has no address (less progress), IPv4 has an address but no route: report no-route.
        #expect(net.verdict(.addresses([v6, v4])) == .offline(.noRoute))
        net.routes.append(RouteInfo(destination: IPPrefix("203.0.113.0/24")!, nextHops: [NextHop(linkIndex: 2)]))
        #expect(net.verdict(.addresses([v6, v4])).link == "eth0")
    }

    @Test func loopbackDestinationNeedsOnlyTheLoopbackLink() {
        var net = Net()
        net.setLink(2, flags: [.up], operState: .down)
        #expect(net.verdict() == .offline(.noCarrier))
        #expect(net.verdict(.addresses([IPAddress("127.0.0.1")!])).link == "lo")
        #expect(net.verdict(.addresses([IPAddress("::1")!])).link == "lo")
        net.setLink(1, flags: [.loopback], operState: .unknown)
        #expect(net.verdict(.addresses([IPAddress("127.0.0.1")!])) == .offline(.noCarrier))
        #expect(IPAddress("127.8.9.10")!.isLoopback && !IPAddress("128.0.0.1")!.isLoopback && !IPAddress("::2")!.isLoopback)
    }

    @Test func emptyAddressListIsNoRoute() {
        #expect(Net().verdict(.addresses([])) == .offline(.noRoute))
    }
}

@Suite struct AddressTests {
    @Test func parsesAndPrints() {
        #expect(IPAddress("192.0.2.1")?.description == "192.0.2.1")
        #expect(IPAddress("2001:db8::1")?.description == "2001:db8::1")
        #expect(IPAddress("::ffff:1.2.3.4")?.family == .ipv6)
        #expect(IPAddress("nonsense") == nil)
        #expect(IPAddress("256.1.1.1") == nil)
        #expect(IPAddress(bytes: [1, 2, 3]) == nil)
        #expect(IPAddress(bytes: [192, 0, 2, 1]) == IPAddress("192.0.2.1"))
        #expect(IPAddress("2001:db8::1")!.bytes.count == 16)
    }

    @Test(arguments: [
        ("10.0.0.0/8", "10.255.1.1", true),
        ("10.0.0.0/8", "11.0.0.1", false),
        ("192.0.2.128/25", "192.0.2.129", true),
        ("192.0.2.128/25", "192.0.2.127", false),
        ("0.0.0.0/0", "8.8.8.8", true),
        ("0.0.0.0/0", "2001:db8::1", false),
        ("2001:db8::/32", "2001:db8:ffff::1", true),
        ("2001:db8::/32", "2001:db9::1", false),
        ("2001:db8:0:0:8000::/65", "2001:db8::8000:0:0:1", true),
        ("2001:db8:0:0:8000::/65", "2001:db8::7fff:0:0:1", false),
        ("::/0", "::1", true),
        ("198.51.100.7/32", "198.51.100.7", true),
        ("198.51.100.7/32", "198.51.100.8", false),
    ])
    func prefixContains(prefix: String, address: String, expected: Bool) {
        #expect(IPPrefix(prefix)!.contains(IPAddress(address)!) == expected)
    }

    @Test func rejectsBadPrefixes() {
        #expect(IPPrefix("10.0.0.0/33") == nil)
        #expect(IPPrefix("10.0.0.0/-1") == nil)
        #expect(IPPrefix("2001:db8::/129") == nil)
        #expect(IPPrefix("10.0.0.1")?.length == 32)
    }

    @Test func snapshotsCompareInCanonicalOrder() {
        let net = Net()
        let shuffled = NetworkSnapshot(links: net.links.reversed(), addresses: net.addresses.reversed(), routes: net.routes.reversed())
        #expect(shuffled == net.snapshot)
    }
}
