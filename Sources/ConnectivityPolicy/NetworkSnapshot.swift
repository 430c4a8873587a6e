/// The kernel's operational state of a link (RFC 2863, `IF_OPER_*`).
public enum OperState: UInt8, Sendable, Hashable, Codable, CustomStringConvertible {
    /// The driver reports no state (`IF_OPER_UNKNOWN`); many virtual links stay here while working.
    case unknown = 0
    /// Some component of the link is missing, e.g. removed hardware (`IF_OPER_NOTPRESENT`).
    case notPresent = 1
    /// The link cannot pass traffic (`IF_OPER_DOWN`).
    case down = 2
    /// Down because a link it sits on is down, e.g. a VLAN over an unplugged port (`IF_OPER_LOWERLAYERDOWN`).
    case lowerLayerDown = 3
    /// In a test mode, not passing normal traffic (`IF_OPER_TESTING`).
    case testing = 4
    /// Up but waiting for an external event, e.g. 802.1X authentication (`IF_OPER_DORMANT`).
    case dormant = 5
    /// Ready to pass traffic (`IF_OPER_UP`).
    case up = 6

    /// The state as `ip link` prints it, lower-case with dashes (`lower-layer-down`).
    public var description: String {
        switch self {
        case .unknown: "unknown"
        case .notPresent: "not-present"
        case .down: "down"
        case .lowerLayerDown: "lower-layer-down"
        case .testing: "testing"
        case .dormant: "dormant"
        case .up: "up"
        }
    }
}

/// Interface flags that the policy reads (`IFF_*`).
public struct LinkFlags: OptionSet, Sendable, Hashable, Codable {
    /// The `ifi_flags` bits as the kernel reports them.
    public let rawValue: UInt32
    /// Flags from the kernel's `ifi_flags` bits.
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    /// `IFF_UP`: the link is administratively up (`ip link set up`).
    public static let up = LinkFlags(rawValue: 0x1)
    /// `IFF_LOOPBACK`: the loopback link, which never counts as a way out.
    public static let loopback = LinkFlags(rawValue: 0x8)
    /// `IFF_RUNNING`: the driver says the link is operational; part of the carrier rule for links without an operstate.
    public static let running = LinkFlags(rawValue: 0x40)
    /// `IFF_LOWER_UP`: the physical layer signals carrier.
    public static let lowerUp = LinkFlags(rawValue: 0x10000)
    /// `IFF_DORMANT`: the link waits for an external event (802.1X, say); it has no carrier for the policy.
    public static let dormant = LinkFlags(rawValue: 0x20000)
}

/// One network interface as the kernel reports it.
public struct LinkInfo: Sendable, Hashable, Codable {
    /// The kernel's interface index (`ifindex`), which addresses and routes refer to.
    public var index: Int32
    /// The interface name, e.g. `eth0` or `wlan0`.
    public var name: String
    /// The interface flags the carrier rule reads.
    public var flags: LinkFlags
    /// The kernel's operational state (`IFLA_OPERSTATE`).
    public var operState: OperState

    /// A link as reported by the kernel, or built by hand in tests.
    public init(index: Int32, name: String, flags: LinkFlags, operState: OperState) {
        self.index = index
        self.name = name
        self.flags = flags
        self.operState = operState
    }

    /// Whether this is the loopback link, which the policy never counts as a way out.
    public var isLoopback: Bool { flags.contains(.loopback) }

    /// systemd-networkd's carrier rule (`netif_has_carrier`): operstate UP, or UNKNOWN with both
    /// LOWER_UP and RUNNING (drivers that never report an operstate) and not DORMANT; and, unlike
    /// networkd, the link must be administratively UP.
    public var hasCarrier: Bool {
        guard flags.contains(.up), !flags.contains(.dormant) else { return false }
        switch operState {
        case .up:
            return true
        case .unknown:
            return flags.isSuperset(of: [.lowerUp, .running])
        default:
            return false
        }
    }
}

/// Address flags that the policy reads (`IFA_F_*`).
public struct AddressFlags: OptionSet, Sendable, Hashable, Codable {
    /// The `IFA_F_*` bits as the kernel reports them.
    public let rawValue: UInt32
    /// Flags from the kernel's `IFA_F_*` bits.
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    /// `IFA_F_OPTIMISTIC`: IPv6 optimistic DAD; the address is used while the check still runs.
    public static let optimistic = AddressFlags(rawValue: 0x04)
    /// `IFA_F_DADFAILED`: duplicate address detection found another host using it; never usable.
    public static let dadFailed = AddressFlags(rawValue: 0x08)
    /// `IFA_F_DEPRECATED`: the preferred lifetime ran out; still works, not chosen for new connections.
    public static let deprecated = AddressFlags(rawValue: 0x20)
    /// `IFA_F_TENTATIVE`: duplicate address detection has not finished; not usable yet.
    public static let tentative = AddressFlags(rawValue: 0x40)
}

/// Route and address scopes (`RT_SCOPE_*`).
public enum Scope: UInt8, Sendable, Hashable, Codable {
    /// `RT_SCOPE_UNIVERSE`: global, valid anywhere; the only scope whose addresses count as usable.
    case universe = 0
    /// `RT_SCOPE_SITE`: valid inside the site only (also what an unknown raw value maps to).
    case site = 200
    /// `RT_SCOPE_LINK`: valid on the attached link only, e.g. `fe80::/10` or `169.254.0.0/16`.
    case link = 253
    /// `RT_SCOPE_HOST`: valid on this machine only, e.g. `127.0.0.1`.
    case host = 254
    /// `RT_SCOPE_NOWHERE`: the destination does not exist.
    case nowhere = 255

    /// The scope for a kernel value; values without a case count as ``site`` (not global, so not usable).
    public init(raw: UInt8) { self = Scope(rawValue: raw) ?? .site }
}

/// One address assigned to a link.
public struct AddressInfo: Sendable, Hashable, Codable, Comparable {
    /// The interface index of the link the address is assigned to.
    public var linkIndex: Int32
    /// The assigned address itself.
    public var address: IPAddress
    /// The length of the on-link prefix, in bits (the `/24` of `192.0.2.10/24`).
    public var prefixLength: Int
    /// Where the address is valid; only ``Scope/universe`` makes it usable for the internet.
    public var scope: Scope
    /// The DAD and lifetime flags that decide whether the address is usable yet.
    public var flags: AddressFlags

    /// An address as reported by the kernel, or built by hand in tests.
    public init(linkIndex: Int32, address: IPAddress, prefixLength: Int, scope: Scope, flags: AddressFlags) {
        self.linkIndex = linkIndex
        self.address = address
        self.prefixLength = prefixLength
        self.scope = scope
        self.flags = flags
    }

    /// Global scope, duplicate address detection finished and passed.
    public var isUsable: Bool {
        scope == .universe && !flags.contains(.tentative) && !flags.contains(.dadFailed)
    }

    /// By link index, then address, then prefix length: the canonical order of snapshots.
    public static func < (lhs: AddressInfo, rhs: AddressInfo) -> Bool {
        (lhs.linkIndex, lhs.address, lhs.prefixLength) < (rhs.linkIndex, rhs.address, rhs.prefixLength)
    }
}

/// Route types (`RTN_*`) that matter to reachability.
public enum RouteType: UInt8, Sendable, Hashable, Codable {
    /// `RTN_UNSPEC`: no type given; also what an unknown raw value maps to.
    case unspecified = 0
    /// `RTN_UNICAST`: an ordinary route through a gateway or a directly attached link; the only type that leads out.
    case unicast = 1
    /// `RTN_LOCAL`: the destination is an address of this machine.
    case local = 2
    /// `RTN_BROADCAST`: a broadcast address, delivered as broadcast on the link.
    case broadcast = 3
    /// `RTN_ANYCAST`: a local anycast address.
    case anycast = 4
    /// `RTN_MULTICAST`: a multicast route.
    case multicast = 5
    /// `RTN_BLACKHOLE`: packets are dropped silently; the destination is blocked.
    case blackhole = 6
    /// `RTN_UNREACHABLE`: the destination is rejected with host unreachable; blocked.
    case unreachable = 7
    /// `RTN_PROHIBIT`: the destination is rejected as administratively prohibited; blocked.
    case prohibit = 8
    /// `RTN_THROW`: the lookup leaves this table and goes on with the next policy rule.
    case `throw` = 9
    /// `RTN_NAT`: stateless NAT, no longer supported by Linux.
    case nat = 10
    /// `RTN_XRESOLVE`: an external resolver was to route it; unused by Linux.
    case xresolve = 11

    /// The type for a kernel value; values without a case count as ``unspecified``.
    public init(raw: UInt8) { self = RouteType(rawValue: raw) ?? .unspecified }

    /// A route of this type makes the covered destinations unreachable.
    public var rejects: Bool { self == .blackhole || self == .unreachable || self == .prohibit }
}

/// One next hop of a route.
public struct NextHop: Sendable, Hashable, Codable, Comparable {
    /// The interface index of the outgoing link.
    public var linkIndex: Int32
    /// The router to send through; `nil` for a directly attached destination.
    public var gateway: IPAddress?
    /// `RTNH_F_LINKDOWN` or `RTNH_F_DEAD`: the kernel keeps the route but its link has no carrier.
    public var isLinkDown: Bool

    /// A next hop out of `linkIndex`, through `gateway` when there is one.
    public init(linkIndex: Int32, gateway: IPAddress? = nil, isLinkDown: Bool = false) {
        self.linkIndex = linkIndex
        self.gateway = gateway
        self.isLinkDown = isLinkDown
    }

    /// By link index, then gateway bytes (none first), then live before linkdown: the canonical order.
    public static func < (lhs: NextHop, rhs: NextHop) -> Bool {
        if lhs.linkIndex != rhs.linkIndex { return lhs.linkIndex < rhs.linkIndex }
        let left = lhs.gateway?.bytes ?? [], right = rhs.gateway?.bytes ?? []
        if left != right { return left.lexicographicallyPrecedes(right) }
        return !lhs.isLinkDown && rhs.isLinkDown
    }
}

/// One route of the routing tables.
public struct RouteInfo: Sendable, Hashable, Codable, Comparable {
    /// `RT_TABLE_MAIN`.
    public static let mainTable: UInt32 = 254

    /// The prefix the route covers (`0.0.0.0/0` for a default route).
    public var destination: IPPrefix
    /// The routing table it sits in; the policy's own model reads only ``mainTable``.
    public var table: UInt32
    /// What the route does with traffic: forward it, keep it local, or reject it.
    public var type: RouteType
    /// The route metric; of routes with the same prefix, the lowest wins.
    public var priority: UInt32
    /// Where traffic goes: one entry, or several for a multipath route.
    public var nextHops: [NextHop]

    /// A route as reported by the kernel, or built by hand in tests; a unicast route of the main table by default.
    public init(destination: IPPrefix, table: UInt32 = RouteInfo.mainTable, type: RouteType = .unicast, priority: UInt32 = 0, nextHops: [NextHop]) {
        self.destination = destination
        self.table = table
        self.type = type
        self.priority = priority
        self.nextHops = nextHops
    }

    /// By table, destination, metric, type, then next hops: the canonical order of snapshots.
    public static func < (lhs: RouteInfo, rhs: RouteInfo) -> Bool {
        if lhs.table != rhs.table { return lhs.table < rhs.table }
        if lhs.destination != rhs.destination { return lhs.destination < rhs.destination }
        if lhs.priority != rhs.priority { return lhs.priority < rhs.priority }
        if lhs.type != rhs.type { return lhs.type.rawValue < rhs.type.rawValue }
        return lhs.nextHops.lexicographicallyPrecedes(rhs.nextHops)
    }
}

/// Why the kernel refused a route lookup (the error of an `RTM_GETROUTE` request).
public enum RouteRefusal: String, Sendable, Hashable, Codable, CustomStringConvertible {
    /// `ENETUNREACH`: no route in any table the rules reach (a `throw` route ends here too).
    case noRoute = "no-route"
    /// `EHOSTUNREACH`: an `unreachable` route or rule.
    case unreachable
    /// `EACCES`: a `prohibit` route or rule.
    case prohibited
    /// `EINVAL`: a `blackhole` route or rule.
    case blackhole
    /// Any other error; the lookup tells nothing, so the snapshot model decides.
    case other

    /// A reject route or rule matched: the kernel found the destination and refuses it.
    public var isReject: Bool { self == .unreachable || self == .prohibited || self == .blackhole }

    /// The refusal in words for logs and status, e.g. `network is unreachable`.
    public var description: String {
        switch self {
        case .noRoute: "network is unreachable"
        case .unreachable: "unreachable route or rule"
        case .prohibited: "prohibit route or rule"
        case .blackhole: "blackhole route or rule"
        case .other: "lookup failed"
        }
    }
}

/// The kernel's answer to "how would traffic to this address leave?": what `ip route get
/// ADDRESS` prints, from the kernel's own FIB lookup (policy rules, every table, `throw`, VRFs,
/// nexthop objects and the linkdown sysctls included).
public enum KernelRoute: Sendable, Hashable, Codable {
    /// Traffic leaves through `linkIndex` (for a `local` route, the loopback link).
    case route(linkIndex: Int32, type: RouteType, table: UInt32, gateway: IPAddress?)
    /// The kernel refuses to route it.
    case refused(RouteRefusal)
}

/// A consistent picture of the kernel's links, addresses and routes.
///
/// Values are kept in a canonical order so that two snapshots of the same tables compare equal.
public struct NetworkSnapshot: Sendable, Hashable, Codable {
    /// Every link, by index.
    public private(set) var links: [LinkInfo]
    /// Every address, by link index, then address, then prefix length.
    public private(set) var addresses: [AddressInfo]
    /// Every route of every table, in the order ``RouteInfo`` sorts them.
    public private(set) var routes: [RouteInfo]
    /// The kernel's own route lookups, for the addresses someone asked the monitor to track
    /// (`NetlinkMonitor.track(_:)`), taken with the tables above. When an address has one, the
    /// policy follows the kernel's choice of path; otherwise it falls back to its model of the
    /// main table.
    public var kernelRoutes: [IPAddress: KernelRoute] = [:]
    /// What each link costs, by link name, as whoever feeds the monitor knows it (the
    /// configuration, NetworkManager, DHCP leases, the link's hardware). A link missing here is
    /// of ``LinkCostAssessment/unknown`` cost. Verdicts carry the cost of the link they go through.
    public var linkCosts: [String: LinkCostAssessment] = [:]

    /// A snapshot of these tables, put into canonical order (so it costs a sort of every list).
    public init(links: [LinkInfo] = [], addresses: [AddressInfo] = [], routes: [RouteInfo] = []) {
        self.links = links.sorted { $0.index < $1.index }
        self.addresses = addresses.sorted()
        self.routes = routes.map { route in
            var route = route
            route.nextHops.sort()
            return route
        }.sorted()
    }

    /// Takes `routes` as they are: they must already be in canonical order (next hops sorted,
    /// routes sorted), as the netlink monitor keeps them. Sorting 100,000 routes per snapshot,
    /// and the copy of every route that re-sorting its next hops makes, was most of the cost and
    /// the peak memory of a snapshot in a route storm. Checked in debug builds.
    package init(links: [LinkInfo], addresses: [AddressInfo], canonicalRoutes routes: [RouteInfo]) {
        self.links = links.sorted { $0.index < $1.index }
        self.addresses = addresses.sorted()
        assert(
            zip(routes, routes.dropFirst()).allSatisfy { !($1 < $0) }
                && routes.allSatisfy { route in zip(route.nextHops, route.nextHops.dropFirst()).allSatisfy { !($1 < $0) } },
            "routes are not in canonical order"
        )
        self.routes = routes
    }

    /// The link with this interface index; `nil` when it is gone.
    public func link(index: Int32) -> LinkInfo? {
        links.first { $0.index == index }
    }

    /// The link with this interface name; `nil` when there is none.
    public func link(named name: String) -> LinkInfo? {
        links.first { $0.name == name }
    }
}
