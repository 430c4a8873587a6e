/// Why a destination is not reachable. Ordered from least to most progress towards online.
public enum OfflineReason: String, Sendable, Hashable, Codable, Comparable, CustomStringConvertible {
    /// No link other than loopback has carrier.
    case noCarrier = "no-carrier"
    /// Links have carrier, but none holds a usable (global, not tentative) address of the family.
    case noAddress = "no-address"
    /// No route covers the destination through a link with carrier and a usable address.
    case noRoute = "no-route"
    /// A route or a policy rule covers the destination and rejects it: a `blackhole`,
    /// `unreachable` or `prohibit` route, or a rule with such an action.
    case blocked = "blocked"

    private var rank: Int {
        switch self {
        case .noCarrier: 0
        case .noAddress: 1
        case .noRoute: 2
        case .blocked: 3
        }
    }

    /// Less progress first: ``noCarrier`` < ``noAddress`` < ``noRoute`` < ``blocked``.
    public static func < (lhs: OfflineReason, rhs: OfflineReason) -> Bool { lhs.rank < rhs.rank }

    /// The reason in words for people, e.g. `no route to host`.
    public var description: String {
        switch self {
        case .noCarrier: "no carrier"
        case .noAddress: "no address"
        case .noRoute: "no route to host"
        case .blocked: "blocked by a reject route or rule"
        }
    }
}

/// Why a destination the kernel routes is still not usable: the rung between offline and
/// online. Ordered from least to most progress towards online.
public enum LimitedReason: String, Sendable, Hashable, Codable, Comparable, CustomStringConvertible {
    /// The host name did not resolve.
    case dnsFailed = "dns-failed"
    /// The network answers in place of the internet: a captive portal wants a sign-in.
    case portal = "portal"
    /// The route exists but the server does not answer (connect timeouts, host unreachable).
    case serverUnreachable = "server-unreachable"

    private var rank: Int {
        switch self {
        case .dnsFailed: 0
        case .portal: 1
        case .serverUnreachable: 2
        }
    }

    /// Less progress first: ``dnsFailed`` < ``portal`` < ``serverUnreachable``.
    public static func < (lhs: LimitedReason, rhs: LimitedReason) -> Bool { lhs.rank < rhs.rank }

    /// The reason in words for people, e.g. `captive portal`.
    public var description: String {
        switch self {
        case .dnsFailed: "name resolution failed"
        case .portal: "captive portal"
        case .serverUnreachable: "server unreachable"
        }
    }
}

/// A limited verdict: why, the evidence in words, and the path the kernel would use.
public struct Limitation: Sendable, Hashable, Codable, CustomStringConvertible {
    /// Which rung above the route fails.
    public var reason: LimitedReason
    /// The evidence, for people: the name and the resolver's words (`feed.example: Name or
    /// service not known`), the portal's URL, or the server's failure (`connection timed out`).
    public var detail: String
    /// The path the kernel routes the destination through, when it does.
    public var path: OnlinePath?

    /// A limitation with its evidence, and the path the kernel routes through when known.
    public init(_ reason: LimitedReason, detail: String, path: OnlinePath? = nil) {
        self.reason = reason
        self.detail = detail
        self.path = path
    }

    /// The reason's code and the evidence, e.g. `dns-failed: feed.example: Name or service not known`.
    public var description: String { "\(reason.rawValue): \(detail)" }
}

/// Why a host cannot be used: no usable path (offline), or a path with a failure above it
/// (limited). The one typed reason that travels from the kernel's tables to the wire.
public enum ConnectivityProblem: Sendable, Hashable, CustomStringConvertible {
    /// No usable path.
    case offline(OfflineReason)
    /// A path, but something above it fails.
    case limited(LimitedReason)

    /// The machine-readable code: `no-carrier`, `no-route`, `dns-failed`, `portal`, ….
    public var code: String {
        switch self {
        case .offline(let reason): reason.rawValue
        case .limited(let reason): reason.rawValue
        }
    }

    /// Whether a path exists (the limited rung).
    public var isLimited: Bool {
        if case .limited = self { return true }
        return false
    }

    /// The reason in words, e.g. "no carrier".
    public var description: String {
        switch self {
        case .offline(let reason): reason.description
        case .limited(let reason): reason.description
        }
    }
}

/// What connectivity needs to reach.
public enum Destination: Sendable, Hashable, Codable, CustomStringConvertible {
    /// The internet at large: a route of either family to a public address (``internetProbes``).
    case internet
    /// Any one of these addresses (the resolved addresses of a host).
    case addresses([IPAddress])
    /// A host name, resolved by whoever evaluates it (`NameResolution`, ``ConnectivityMonitor``).
    /// The pure policy cannot resolve names: it judges an unresolved name as ``internet``.
    case host(String)

    /// A destination for the host of a URL: its address when the host is a literal (IPv6 in
    /// brackets too), otherwise the name; the internet when there is no host.
    public init(urlHost host: String?) {
        let trimmed = host.map { $0.hasPrefix("[") && $0.hasSuffix("]") ? String($0.dropFirst().dropLast()) : $0 }
        guard let trimmed, !trimmed.isEmpty else {
            self = .internet
            return
        }
        if let literal = IPAddress(trimmed) {
            self = .addresses([literal])
        } else {
            self = .host(trimmed)
        }
    }

    /// The addresses of an ``addresses(_:)`` destination; none for the internet or an unresolved name.
    public var addresses: [IPAddress] {
        if case .addresses(let list) = self { return list }
        return []
    }

    /// Where the internet at large is looked up, one address per family: a.root-servers.net
    /// (198.41.0.4, 2001:503:ba3e::2:30), public, stable for decades, and routed like any other
    /// public address. A route lookup sends no packet; what the kernel answers for these follows
    /// policy rules, tunnels and split `/1` routes as a feed's own host would.
    public static let internetProbes: [IPAddress] = [IPAddress("198.41.0.4")!, IPAddress("2001:503:ba3e::2:30")!]

    /// The addresses whose route the kernel is asked for: the destination's own, or
    /// ``internetProbes`` for the internet and for a name not yet resolved.
    public var kernelLookups: [IPAddress] {
        switch self {
        case .addresses(let list): list
        case .internet, .host: Self.internetProbes
        }
    }

    /// For logs: `internet`, the addresses comma-separated, or the host name.
    public var description: String {
        switch self {
        case .internet: "internet"
        case .addresses(let list): list.map(\.description).joined(separator: ",")
        case .host(let name): name
        }
    }
}

/// The path that makes a destination reachable.
public struct OnlinePath: Sendable, Hashable, Codable {
    /// Interface name of the outgoing link.
    public var link: String
    /// Interface index of the outgoing link.
    public var linkIndex: Int32
    /// The address family the destination is reached over.
    public var family: AddressFamily
    /// The route that was chosen.
    public var route: IPPrefix
    /// The router traffic goes through; `nil` when the destination is on the link (or on this machine).
    public var gateway: IPAddress?
    /// What traffic over the link costs, and who said so.
    public var cost: LinkCostAssessment

    /// A path out of `link` by `route`, through `gateway` when there is one, at `cost`.
    public init(link: String, linkIndex: Int32, family: AddressFamily, route: IPPrefix, gateway: IPAddress?, cost: LinkCostAssessment = .unknown) {
        self.link = link
        self.linkIndex = linkIndex
        self.family = family
        self.route = route
        self.gateway = gateway
        self.cost = cost
    }
}

/// The connectivity verdict for one destination, with its reason: a ladder from offline (the
/// kernel has no usable path) through limited (a path, but no answer above it) to online.
public enum Verdict: Sendable, Hashable, Codable, CustomStringConvertible {
    /// The destination is reachable through this path.
    case online(OnlinePath)
    /// The kernel routes the destination, but something above the route fails.
    case limited(Limitation)
    /// The kernel has no usable path to the destination.
    case offline(OfflineReason)

    /// Whether the destination is fully reachable; limited and offline both say no.
    public var isOnline: Bool {
        if case .online = self { return true }
        return false
    }

    /// The path the kernel uses, online or limited.
    public var path: OnlinePath? {
        switch self {
        case .online(let path): path
        case .limited(let limitation): limitation.path
        case .offline: nil
        }
    }

    /// This verdict, limited by `evidence` when the route alone would say online. Offline stays
    /// offline: a missing route explains every failure above it.
    public func limited(by evidence: LimitedEvidence) -> Verdict {
        guard case .online(let path) = self, let limitation = evidence.worst(path: path) else { return self }
        return .limited(limitation)
    }

    /// For logs, e.g. `online via wlan0 (ipv4)`, `limited: portal (…)`, `offline: no carrier`.
    public var description: String {
        switch self {
        case .online(let path): "online via \(path.link) (\(path.family.rawValue)\(path.cost.isMetered ? ", metered" : ""))"
        case .limited(let limitation): "limited: \(limitation.reason.rawValue) (\(limitation.detail))"
        case .offline(let reason): "offline: \(reason)"
        }
    }
}

/// What is known above the route for one destination; each field is the evidence in words, or
/// `nil` when that rung is fine (or unknown).
public struct LimitedEvidence: Sendable, Hashable, Codable {
    /// The host name did not resolve: the name and the resolver's words.
    public var dnsFailure: String?
    /// The connectivity check was answered by something else: the portal's URL.
    public var portal: String?
    /// The server did not answer connections: the failure's words.
    public var serverUnreachable: String?

    /// Evidence in words; `nil` for each rung that is fine.
    public init(dnsFailure: String? = nil, portal: String? = nil, serverUnreachable: String? = nil) {
        self.dnsFailure = dnsFailure
        self.portal = portal
        self.serverUnreachable = serverUnreachable
    }

    /// The failure that explains the others: a portal intercepts names and connections alike
    /// (and signing in is what the user can do), a name that does not resolve leaves no server
    /// to connect to.
    func worst(path: OnlinePath?) -> Limitation? {
        if let portal { return Limitation(.portal, detail: portal, path: path) }
        if let dnsFailure { return Limitation(.dnsFailed, detail: dnsFailure, path: path) }
        if let serverUnreachable { return Limitation(.serverUnreachable, detail: serverUnreachable, path: path) }
        return nil
    }
}

/// The pure connectivity policy: from a snapshot of the kernel's tables to a verdict.
public enum ConnectivityPolicy {
    /// Evaluates whether `destination` is reachable in `snapshot`.
    ///
    /// For an address the kernel was asked about (``NetworkSnapshot/kernelRoutes``), the kernel's
    /// own lookup picks the path, policy rules and every table included; the path's link must then
    /// have carrier and a usable address of the family. A refused lookup is `blocked` when a reject
    /// route or rule matched, and otherwise offline for the reason the model finds (no carrier, no
    /// address, no route).
    ///
    /// The internet at large and a name not yet resolved are judged by the addresses of
    /// ``Destination/internetProbes``: any family through which one is reachable will do.
    ///
    /// Without a kernel lookup (an address nobody tracks, or a snapshot built by hand) the model
    /// decides: a link with carrier holds a usable address of the destination's
    /// family and the most specific route covering it in the main table leads out of that link
    /// without being marked linkdown; a more specific reject route (blackhole, unreachable,
    /// prohibit) wins over a broader unicast one, as in the kernel. The model knows nothing of
    /// policy rules, other tables, `throw` routes or the linkdown sysctls: that is what the
    /// kernel's lookup is for.
    ///
    /// A loopback destination (a feed served on this machine) is reachable whenever the loopback
    /// link is up: no carrier, address or route elsewhere matters to it.
    public static func evaluate(_ snapshot: NetworkSnapshot, for destination: Destination = .internet) -> Verdict {
        if case .addresses(let list) = destination, let address = list.first(where: \.isLoopback),
           let path = loopbackPath(snapshot, to: address) {
            return .online(path)
        }
        let carrierLinks = Dictionary(
            snapshot.links.filter(isCarrierUplink).map { ($0.index, $0) },
            uniquingKeysWith: { first, _ in first }
        )
        // What `consultsKernelRoutes` says: before any lookup is read.
        guard !carrierLinks.isEmpty else { return .offline(.noCarrier) }

        let targets = destination.kernelLookups.map { ($0.family, $0) }
        if targets.isEmpty { return .offline(.noRoute) }

        return withLinkCost(evaluatePath(snapshot, carrierLinks: carrierLinks, targets: targets), in: snapshot)
    }

    /// `verdict` with the cost of its path's link, as the snapshot knows it.
    private static func withLinkCost(_ verdict: Verdict, in snapshot: NetworkSnapshot) -> Verdict {
        guard !snapshot.linkCosts.isEmpty else { return verdict }
        switch verdict {
        case .online(var path):
            path.cost = snapshot.linkCosts[path.link] ?? .unknown
            return .online(path)
        case .limited, .offline:
            // The policy never decides limited: that comes later, from evidence above the route
            // (`limited(by:)`), and keeps this path's cost.
            return verdict
        }
    }

    private static func evaluatePath(_ snapshot: NetworkSnapshot, carrierLinks: [Int32: LinkInfo], targets: [(AddressFamily, IPAddress)]) -> Verdict {
        var best: OfflineReason = .noCarrier
        for (family, address) in targets {
            let verdict: Verdict
            if let kernel = snapshot.kernelRoutes[address] {
                verdict = evaluate(snapshot, carrierLinks: carrierLinks, address: address, kernel: kernel)
            } else {
                verdict = evaluate(snapshot, carrierLinks: carrierLinks, family: family, address: address)
            }
            switch verdict {
            case .online, .limited:
                return verdict
            case .offline(let reason):
                best = max(best, reason)
            }
        }
        return .offline(best)
    }

    /// Whether ``evaluate(_:for:)`` can read the kernel's lookups with these links: not when no
    /// link but loopback has carrier. Every verdict is then "no carrier" whatever the kernel
    /// answers (a loopback destination needs no route), so the netlink monitor need not ask it
    /// before publishing that loss.
    package static func consultsKernelRoutes(links: [LinkInfo]) -> Bool {
        links.contains(where: isCarrierUplink)
    }

    /// A link that can carry traffic off this machine: it has carrier and is not loopback.
    private static func isCarrierUplink(_ link: LinkInfo) -> Bool {
        link.hasCarrier && !link.isLoopback
    }

    /// The model's verdict alone, ignoring the kernel's lookups: what tests hold against the
    /// kernel, and what explains a refused lookup.
    public static func evaluateModel(_ snapshot: NetworkSnapshot, for destination: Destination = .internet) -> Verdict {
        var model = snapshot
        model.kernelRoutes = [:]
        return evaluate(model, for: destination)
    }

    private static func loopbackPath(_ snapshot: NetworkSnapshot, to address: IPAddress) -> OnlinePath? {
        guard let loopback = snapshot.links.first(where: { $0.isLoopback && $0.flags.contains(.up) }) else { return nil }
        let host = IPPrefix(address: address, length: address.family == .ipv4 ? 32 : 128)
        return OnlinePath(link: loopback.name, linkIndex: loopback.index, family: address.family, route: host, gateway: nil)
    }

    /// Follows the kernel's choice of path for one address.
    private static func evaluate(
        _ snapshot: NetworkSnapshot,
        carrierLinks: [Int32: LinkInfo],
        address: IPAddress,
        kernel: KernelRoute
    ) -> Verdict {
        let family = address.family
        switch kernel {
        case .route(let index, let type, let table, let gateway):
            // A local route: the address is this machine's own.
            if type == .local || snapshot.link(index: index)?.isLoopback == true {
                return loopbackPath(snapshot, to: address).map(Verdict.online) ?? .offline(.noCarrier)
            }
            guard let link = carrierLinks[index] else {
                // The kernel still prefers a link without carrier (a linkdown route kept by
                // ignore_routes_with_linkdown=0): traffic would fail, whatever other links exist.
                return .offline(snapshot.link(index: index) == nil ? .noRoute : .noCarrier)
            }
            guard snapshot.addresses.contains(where: { $0.linkIndex == index && $0.address.family == family && $0.isUsable }) else {
                return .offline(.noAddress)
            }
            // The kernel names the table, not the prefix it matched: the most specific route of
            // that table covering the address through this link is the one it used.
            let matched = snapshot.routes
                .filter { route in
                    route.table == table && route.destination.contains(address)
                        && route.nextHops.contains { $0.linkIndex == index }
                }
                .max { $0.destination.length < $1.destination.length }
            let route = matched?.destination ?? IPPrefix(address: address, length: family == .ipv4 ? 32 : 128)
            return .online(OnlinePath(link: link.name, linkIndex: index, family: family, route: route, gateway: gateway))
        case .refused(let refusal):
            if refusal.isReject { return .offline(.blocked) }
            // The kernel has no path; the model says how far the way there got. It cannot say
            // online or blocked here: rules or a throw route sent the lookup past its table.
            switch evaluate(snapshot, carrierLinks: carrierLinks, family: family, address: address) {
            case .offline(let reason) where reason != .blocked:
                return .offline(reason)
            default:
                return .offline(.noRoute)
            }
        }
    }

    private static func evaluate(
        _ snapshot: NetworkSnapshot,
        carrierLinks: [Int32: LinkInfo],
        family: AddressFamily,
        address: IPAddress
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
                    && route.destination.contains(address)
            }
            .sorted { ($0.destination.length, -Int64($0.priority)) > ($1.destination.length, -Int64($1.priority)) }

        for route in covering {
            if route.type.rejects { return .offline(.blocked) }
            guard route.type == .unicast else { continue }
            for hop in route.nextHops where !hop.isLinkDown && addressedLinks.contains(hop.linkIndex) {
                guard let link = carrierLinks[hop.linkIndex] else { continue }
                return .online(OnlinePath(link: link.name, linkIndex: link.index, family: family, route: route.destination, gateway: hop.gateway))
            }
        }
        return .offline(.noRoute)
    }
}
