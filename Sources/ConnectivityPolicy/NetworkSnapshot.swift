/// The kernel's operational state of a link (RFC 2863, `IF_OPER_*`).
public enum OperState: UInt8, Sendable, Hashable, Codable, CustomStringConvertible {
    case unknown = 0
    case notPresent = 1
    case down = 2
    case lowerLayerDown = 3
    case testing = 4
    case dormant = 5
    case up = 6

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
    public let rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    public static let up = LinkFlags(rawValue: 0x1)
    public static let loopback = LinkFlags(rawValue: 0x8)
    public static let running = LinkFlags(rawValue: 0x40)
    public static let lowerUp = LinkFlags(rawValue: 0x10000)
    public static let dormant = LinkFlags(rawValue: 0x20000)
}

/// One network interface as the kernel reports it.
public struct LinkInfo: Sendable, Hashable, Codable {
    public var index: Int32
    public var name: String
    public var flags: LinkFlags
    public var operState: OperState

    public init(index: Int32, name: String, flags: LinkFlags, operState: OperState) {
        self.index = index
        self.name = name
        self.flags = flags
        self.operState = operState
    }

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
    public let rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    public static let optimistic = AddressFlags(rawValue: 0x04)
    public static let dadFailed = AddressFlags(rawValue: 0x08)
    public static let deprecated = AddressFlags(rawValue: 0x20)
    public static let tentative = AddressFlags(rawValue: 0x40)
}

/// Route and address scopes (`RT_SCOPE_*`).
public enum Scope: UInt8, Sendable, Hashable, Codable {
    case universe = 0
    case site = 200
    case link = 253
    case host = 254
    case nowhere = 255

    public init(raw: UInt8) { self = Scope(rawValue: raw) ?? .site }
}

/// One address assigned to a link.
public struct AddressInfo: Sendable, Hashable, Codable, Comparable {
    public var linkIndex: Int32
    public var address: IPAddress
    public var prefixLength: Int
    public var scope: Scope
    public var flags: AddressFlags

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

    public static func < (lhs: AddressInfo, rhs: AddressInfo) -> Bool {
        (lhs.linkIndex, lhs.address, lhs.prefixLength) < (rhs.linkIndex, rhs.address, rhs.prefixLength)
    }
}

/// Route types (`RTN_*`) that matter to reachability.
public enum RouteType: UInt8, Sendable, Hashable, Codable {
    case unspecified = 0
    case unicast = 1
    case local = 2
    case broadcast = 3
    case anycast = 4
    case multicast = 5
    case blackhole = 6
    case unreachable = 7
    case prohibit = 8
    case `throw` = 9
    case nat = 10
    case xresolve = 11

    public init(raw: UInt8) { self = RouteType(rawValue: raw) ?? .unspecified }

    /// A route of this type makes the covered destinations unreachable.
    public var rejects: Bool { self == .blackhole || self == .unreachable || self == .prohibit }
}

/// One next hop of a route.
public struct NextHop: Sendable, Hashable, Codable, Comparable {
    public var linkIndex: Int32
    public var gateway: IPAddress?
    /// `RTNH_F_LINKDOWN` or `RTNH_F_DEAD`: the kernel keeps the route but its link has no carrier.
    public var isLinkDown: Bool

    public init(linkIndex: Int32, gateway: IPAddress? = nil, isLinkDown: Bool = false) {
        self.linkIndex = linkIndex
        self.gateway = gateway
        self.isLinkDown = isLinkDown
    }

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

    public var destination: IPPrefix
    public var table: UInt32
    public var type: RouteType
    public var priority: UInt32
    public var nextHops: [NextHop]

    public init(destination: IPPrefix, table: UInt32 = RouteInfo.mainTable, type: RouteType = .unicast, priority: UInt32 = 0, nextHops: [NextHop]) {
        self.destination = destination
        self.table = table
        self.type = type
        self.priority = priority
        self.nextHops = nextHops
    }

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
    public private(set) var links: [LinkInfo]
    public private(set) var addresses: [AddressInfo]
    public private(set) var routes: [RouteInfo]
    /// The kernel's own route lookups, for the addresses someone asked the monitor to track
    /// (`NetlinkMonitor.track(_:)`), taken with the tables above. When an address has one, the
    /// policy follows the kernel's choice of path; otherwise it falls back to its model of the
    /// main table.
    public var kernelRoutes: [IPAddress: KernelRoute] = [:]

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

    public func link(index: Int32) -> LinkInfo? {
        links.first { $0.index == index }
    }

    public func link(named name: String) -> LinkInfo? {
        links.first { $0.name == name }
    }
}
