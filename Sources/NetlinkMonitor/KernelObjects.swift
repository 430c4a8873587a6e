import CNetlink
import ConnectivityPolicy

/// Conversions from libnl's cached objects to the policy's value types.
enum KernelObjects {
    static func address(_ addr: OpaquePointer?, family: Int32) -> IPAddress? {
        guard let addr else { return nil }
        let length = Int(nl_addr_get_len(addr))
        if length == 0 {
            // libnl represents "no address" (e.g. a default route's destination) with an empty nl_addr.
            return .zero(family == AF_INET6 ? .ipv6 : .ipv4)
        }
        guard let raw = nl_addr_get_binary_addr(addr) else { return nil }
        // Not `IPAddress(bytes:)`: generic, it runs unspecialized from this module and was a
        // fifth of the monitor's CPU in a route storm.
        switch length {
        case 4:
            return IPAddress(family: .ipv4, high: UInt64(UInt32(bigEndian: raw.loadUnaligned(as: UInt32.self))) << 32, low: 0)
        case 16:
            return IPAddress(
                family: .ipv6,
                high: UInt64(bigEndian: raw.loadUnaligned(as: UInt64.self)),
                low: UInt64(bigEndian: raw.loadUnaligned(fromByteOffset: 8, as: UInt64.self))
            )
        default:
            return nil
        }
    }

    static func link(_ object: OpaquePointer) -> LinkInfo {
        let name = rtnl_link_get_name(object).map { String(cString: $0) } ?? ""
        return LinkInfo(
            index: rtnl_link_get_ifindex(object),
            name: name,
            flags: LinkFlags(rawValue: rtnl_link_get_flags(object)),
            operState: OperState(rawValue: rtnl_link_get_operstate(object)) ?? .unknown
        )
    }

    static func addressInfo(_ object: OpaquePointer) -> AddressInfo? {
        let family = rtnl_addr_get_family(object)
        guard family == AF_INET || family == AF_INET6,
              let local = address(rtnl_addr_get_local(object), family: family)
        else { return nil }
        return AddressInfo(
            linkIndex: rtnl_addr_get_ifindex(object),
            address: local,
            prefixLength: Int(rtnl_addr_get_prefixlen(object)),
            scope: Scope(raw: UInt8(truncatingIfNeeded: rtnl_addr_get_scope(object))),
            flags: AddressFlags(rawValue: rtnl_addr_get_flags(object))
        )
    }

    static func route(_ object: OpaquePointer) -> RouteInfo? {
        let family = Int32(rtnl_route_get_family(object))
        guard family == AF_INET || family == AF_INET6,
              let dst = rtnl_route_get_dst(object),
              let destination = address(dst, family: family)
        else { return nil }
        // A single-path route carries RTNH_F_* in rtm_flags; libnl keeps them on the route.
        let routeFlags = Int32(bitPattern: rtnl_route_get_flags(object))
        let downMask = syncd_rtnh_f_linkdown() | syncd_rtnh_f_dead()
        var hops: [NextHop] = []
        let count = rtnl_route_get_nnexthops(object)
        hops.reserveCapacity(Int(count))
        for i in 0..<count {
            guard let hop = rtnl_route_nexthop_n(object, i) else { continue }
            let hopFlags = Int32(bitPattern: rtnl_route_nh_get_flags(hop))
            hops.append(NextHop(
                linkIndex: rtnl_route_nh_get_ifindex(hop),
                gateway: rtnl_route_nh_get_gateway(hop).flatMap { address($0, family: family) },
                isLinkDown: (hopFlags | routeFlags) & downMask != 0
            ))
        }
        return RouteInfo(
            destination: IPPrefix(address: destination, length: Int(nl_addr_get_prefixlen(dst))),
            table: rtnl_route_get_table(object),
            type: RouteType(raw: rtnl_route_get_type(object)),
            priority: rtnl_route_get_priority(object),
            nextHops: hops
        )
    }

    /// Calls `body` with each object of a cache.
    static func forEach(_ cache: OpaquePointer?, _ body: (OpaquePointer) -> Void) {
        var object = nl_cache_get_first(cache)
        while let current = object {
            body(current)
            object = nl_cache_get_next(current)
        }
    }

    /// Whether a link cache object stands for the interface itself rather than for one of its
    /// per-family views.
    ///
    /// Per-family link messages (a bridge port's AF_BRIDGE state, IPv6 protinfo) land in the cache
    /// as extra objects beside the interface's AF_UNSPEC one. But libnl files a link whose kind
    /// names an address family under that family: a bridge's own link is an AF_BRIDGE object
    /// with no AF_UNSPEC one beside it (`link_msg_parser` maps the kind `bridge` through
    /// `nl_str2af`). So an object is the interface when it is AF_UNSPEC, or when its index has no
    /// AF_UNSPEC object. A scan of the cache: link changes are rare.
    static func isInterface(_ object: OpaquePointer, in cache: OpaquePointer?) -> Bool {
        if rtnl_link_get_family(object) == AF_UNSPEC { return true }
        let index = rtnl_link_get_ifindex(object)
        var found = false
        forEach(cache) { other in
            if !found, rtnl_link_get_family(other) == AF_UNSPEC, rtnl_link_get_ifindex(other) == index { found = true }
        }
        return !found
    }

    /// Links and addresses of the two caches: one link per interface index (``isInterface(_:in:)``).
    /// `refreshed` replaces what the cache holds for links it keeps under another family (see
    /// ``NetlinkEventLoop``): libnl merges a later message about such a link into the old object
    /// without its flags.
    static func linksAndAddresses(links: OpaquePointer?, addresses: OpaquePointer?, refreshed: [Int32: LinkInfo] = [:]) -> ([LinkInfo], [AddressInfo]) {
        var linkList: [LinkInfo] = []
        var addressList: [AddressInfo] = []
        linkList.reserveCapacity(Int(nl_cache_nitems(links)))
        addressList.reserveCapacity(Int(nl_cache_nitems(addresses)))
        // Objects of other families, kept until every AF_UNSPEC one is known (they stay in the
        // cache meanwhile): a bridge's link is the only object of its index.
        var familyOnly: [Int32: OpaquePointer] = [:]
        var interfaces = Set<Int32>()
        forEach(links) { object in
            if rtnl_link_get_family(object) == AF_UNSPEC {
                let info = link(object)
                linkList.append(info)
                interfaces.insert(info.index)
            } else if familyOnly[rtnl_link_get_ifindex(object)] == nil {
                familyOnly[rtnl_link_get_ifindex(object)] = object
            }
        }
        for (index, object) in familyOnly where !interfaces.contains(index) { linkList.append(refreshed[index] ?? link(object)) }
        forEach(addresses) { if let a = addressInfo($0) { addressList.append(a) } }
        return (linkList, addressList)
    }

    /// Builds a snapshot from the link and address caches and a route list.
    static func snapshot(links: OpaquePointer?, addresses: OpaquePointer?, routes: [RouteInfo]) -> NetworkSnapshot {
        let (linkList, addressList) = linksAndAddresses(links: links, addresses: addresses)
        return NetworkSnapshot(links: linkList, addresses: addressList, routes: routes)
    }

    /// Builds a snapshot from the link and address caches and a route list already in
    /// ``NetworkSnapshot``'s canonical order (``RouteTable``): no sort, no copy of the routes.
    static func snapshot(links: OpaquePointer?, addresses: OpaquePointer?, refreshed: [Int32: LinkInfo], canonicalRoutes routes: [RouteInfo]) -> NetworkSnapshot {
        let (linkList, addressList) = linksAndAddresses(links: links, addresses: addresses, refreshed: refreshed)
        return NetworkSnapshot(links: linkList, addresses: addressList, canonicalRoutes: routes)
    }
}
