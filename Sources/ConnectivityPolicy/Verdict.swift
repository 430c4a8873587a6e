/// Why a destination is not reachable. Ordered from least to most progress towards online.
public enum OfflineReason: String, Sendable, Hashable, Codable, Comparable, CustomStringConvertible {
    /// No link other than loopback has carrier.
    case noCarrier = "no-carrier"
    /// Links have carrier, but none holds a usable (global, not tentative) address of the family.
    case noAddress = "no-address"
    /// No route covers the destination through a link with carrier and a usable address.
    case noRoute = "no-route"

    private var rank: Int {
        switch self {
        case .noCarrier: 0
        case .noAddress: 1
        case .noRoute: 2
        }
    }

    public static func < (lhs: OfflineReason, rhs: OfflineReason) -> Bool { lhs.rank < rhs.rank }

    public var description: String {
        switch self {
        case .noCarrier: "no carrier"
        case .noAddress: "no address"
        case .noRoute: "no route to host"
        }
    }
}

/// What connectivity needs to reach.
public enum Destination: Sendable, Hashable, Codable, CustomStringConvertible {
    /// The internet at large: a default route of either family.
    case internet
    /// Any one of these addresses (the resolved addresses of a host).
    case addresses([IPAddress])

    public var description: String {
        switch self {
        case .internet: "internet"
        case .addresses(let list): list.map(\.description).joined(separator: ",")
        }
    }
}

/// The path that makes a destination reachable.
public struct OnlinePath: Sendable, Hashable, Codable {
    /// Interface name of the outgoing link.
    public var link: String
    public var linkIndex: Int32
    public var family: AddressFamily
    /// The route that was chosen.
    public var route: IPPrefix
    public var gateway: IPAddress?

    public init(link: String, linkIndex: Int32, family: AddressFamily, route: IPPrefix, gateway: IPAddress?) {
        self.link = link
        self.linkIndex = linkIndex
        self.family = family
        self.route = route
        self.gateway = gateway
    }
}

/// The connectivity verdict for one destination, with its reason.
public enum Verdict: Sendable, Hashable, Codable, CustomStringConvertible {
    case online(OnlinePath)
    case offline(OfflineReason)

    public var isOnline: Bool {
        if case .online = self { return true }
        return false
    }

    public var description: String {
        switch self {
        case .online(let path): "online via \(path.link) (\(path.family.rawValue))"
        case .offline(let reason): "offline: \(reason)"
        }
    }
}

/// The pure connectivity policy: from a snapshot of the kernel's tables to a verdict.
public enum ConnectivityPolicy {
    /// Evaluates whether `destination` is reachable in `snapshot`.
    ///
    /// A destination is reachable when a link with carrier holds a usable address of the
    /// destination's family and the most specific route covering it (in the main table) leads
    /// out of that link without being marked linkdown. A more specific reject route
    /// (blackhole, unreachable, prohibit) wins over a broader unicast one, as in the kernel.
    ///
    /// A loopback destination (a feed served on this machine) is reachable whenever the loopback
    /// link is up: no carrier, address or route elsewhere matters to it.
    public static func evaluate(_ snapshot: NetworkSnapshot, for destination: Destination = .internet) -> Verdict {
        if case .addresses(let list) = destination, let address = list.first(where: \.isLoopback),
           let loopback = snapshot.links.first(where: { $0.isLoopback && $0.flags.contains(.up) }) {
            let host = IPPrefix(address: address, length: address.family == .ipv4 ? 32 : 128)
            return .online(OnlinePath(link: loopback.name, linkIndex: loopback.index, family: address.family, route: host, gateway: nil))
        }
        let carrierLinks = Dictionary(
            snapshot.links.filter { $0.hasCarrier && !$0.isLoopback }.map { ($0.index, $0) },
            uniquingKeysWith: { first, _ in first }
        )
        guard !carrierLinks.isEmpty else { return .offline(.noCarrier) }

        let targets: [(AddressFamily, IPAddress?)]
        switch destination {
        case .internet:
            targets = AddressFamily.allCases.map { ($0, nil) }
        case .addresses(let list):
            targets = list.map { ($0.family, $0) }
            if list.isEmpty { return .offline(.noRoute) }
        }

        var best: OfflineReason = .noCarrier
        for (family, address) in targets {
            switch evaluate(snapshot, carrierLinks: carrierLinks, family: family, address: address) {
            case .online(let path):
                return .online(path)
            case .offline(let reason):
                best = max(best, reason)
            }
        }
        return .offline(best)
    }

    private static func evaluate(
        _ snapshot: NetworkSnapshot,
        carrierLinks: [Int32: LinkInfo],
        family: AddressFamily,
        address: IPAddress?
    ) -> Verdict {
        let addressedLinks = Set(
            snapshot.addresses
                .filter { $0.address.family == family && $0.isUsable && carrierLinks[$0.linkIndex] != nil }
                .map(\.linkIndex)
        )
        guard !addressedLinks.isEmpty else { return .offline(.noAddress) }

        // Longest prefix first, then lowest metric: the order in which the kernel would pick.
        let covering = snapshot.routes
            .filter { route in
                route.table == RouteInfo.mainTable
                    && route.destination.family == family
                    && (address.map { route.destination.contains($0) } ?? route.destination.isDefault)
            }
            .sorted { ($0.destination.length, -Int64($0.priority)) > ($1.destination.length, -Int64($1.priority)) }

        for route in covering {
            if route.type.rejects { return .offline(.noRoute) }
            guard route.type == .unicast else { continue }
            for hop in route.nextHops where !hop.isLinkDown && addressedLinks.contains(hop.linkIndex) {
                guard let link = carrierLinks[hop.linkIndex] else { continue }
                return .online(OnlinePath(link: link.name, linkIndex: link.index, family: family, route: route.destination, gateway: hop.gateway))
            }
        }
        return .offline(.noRoute)
    }
}
