import CNetlink
import ConnectivityPolicy

#if canImport(Glibc)
import Glibc
#endif

/// The kernel's identity of a route: what `RTM_NEWROUTE`/`RTM_DELROUTE` address, and what libnl's
/// route cache hashes on (family via the prefix, table, tos, destination, priority; IPv6 also the
/// source prefix). Several routes may share one key (IPv4 `ip route append`/`prepend`, IPv6
/// routes that are not ECMP siblings): ``RouteTable`` keeps them as aliases of the key.
struct RouteKey: Hashable {
    var destination: IPPrefix
    var table: UInt32
    var priority: UInt32
    var tos: UInt8
    /// IPv6 source-specific routing (`ip -6 route add … from PREFIX`); `nil` for almost every route.
    var source: IPPrefix?
}

/// One route message from the kernel, converted to the policy's value type.
struct RouteMessage {
    enum Kind { case new, delete }

    var kind: Kind
    /// `NLM_F_*` of the notification: `REPLACE`, `APPEND`, `CREATE`, `EXCL`.
    var flags: Int32
    var key: RouteKey
    /// The route with its next hops in canonical (sorted) order, as ``NetworkSnapshot`` keeps them.
    var route: RouteInfo
    /// The route's remaining lifetime (`RTA_CACHEINFO`'s `rta_expires`), for a route that has one.
    var lifetime: Duration?

    var replaces: Bool { flags & Int32(NLM_F_REPLACE) != 0 }
    var appends: Bool { flags & Int32(NLM_F_APPEND) != 0 }

    /// Parses an `RTM_NEWROUTE`/`RTM_DELROUTE` message with libnl's `rtnl_route_parse`.
    ///
    /// Returns `nil` for other messages, other families, and cloned (cache/exception) routes: a
    /// dump without `RTM_F_CLONED` never lists those, and the snapshot must equal such a dump.
    init?(_ header: UnsafeMutablePointer<nlmsghdr>) {
        let type = Int32(header.pointee.nlmsg_type)
        switch type {
        case Int32(RTM_NEWROUTE): kind = .new
        case Int32(RTM_DELROUTE): kind = .delete
        default: return nil
        }
        flags = Int32(header.pointee.nlmsg_flags)
        var object: OpaquePointer?
        guard rtnl_route_parse(header, &object) >= 0, let object else { return nil }
        defer { rtnl_route_put(object) }
        guard rtnl_route_get_flags(object) & UInt32(RTM_F_CLONED) == 0,
              var route = KernelObjects.route(object)
        else { return nil }
        route.nextHops.sort()
        let family = Int32(rtnl_route_get_family(object))
        var source: IPPrefix?
        if let src = rtnl_route_get_src(object), nl_addr_get_prefixlen(src) > 0,
           let address = KernelObjects.address(src, family: family) {
            source = IPPrefix(address: address, length: Int(nl_addr_get_prefixlen(src)))
        }
        key = RouteKey(
            destination: route.destination,
            table: route.table,
            priority: route.priority,
            tos: rtnl_route_get_tos(object),
            source: source
        )
        self.route = route
        lifetime = kind == .new ? Self.lifetime(of: header) : nil
    }

    /// `rta_expires` counts clock ticks of `USER_HZ` (100 per second on Linux), down to the end.
    private static func lifetime(of header: UnsafeMutablePointer<nlmsghdr>) -> Duration? {
        let length = Int(header.pointee.nlmsg_len)
        let start = NetlinkWire.aligned(MemoryLayout<nlmsghdr>.size) + NetlinkWire.aligned(MemoryLayout<rtmsg>.size)
        guard length > start else { return nil }
        let message = UnsafeRawBufferPointer(start: UnsafeRawPointer(header), count: length)
        var ticks: Int32 = 0
        NetlinkWire.forEachAttribute(in: message, from: start, to: length) { type, payload, size in
            guard type == UInt16(RTA_CACHEINFO.rawValue), size >= MemoryLayout<rta_cacheinfo>.size else { return true }
            ticks = message.loadUnaligned(fromByteOffset: payload, as: rta_cacheinfo.self).rta_expires
            return false
        }
        // Zero: no lifetime. Negative: already over (the route awaits garbage collection), which
        // the kernel's lookups already show; re-reading it again and again would gain nothing.
        return ticks <= 0 ? nil : .milliseconds(Int64(ticks) * 10)
    }

    /// Dumps every route (`RTM_GETROUTE`, `NLM_F_DUMP`, all families) on `socket`, calling `body`
    /// with each, in the kernel's order. A dump the kernel interrupted (`NLM_F_DUMP_INTR`: the
    /// table changed while it was being walked) is started again; `restart` runs before each retry
    /// so the caller can drop what it collected.
    static func dump(
        socket: OpaquePointer,
        restart: () -> Void = {},
        _ body: (RouteMessage) -> Void
    ) throws(NetlinkError) {
        try withoutActuallyEscaping(body, do: { body throws(NetlinkError) in
            let sink = DumpSink(body)
            guard let callbacks = nl_cb_alloc(NL_CB_DEFAULT) else { throw NetlinkError("nl_cb_alloc", errno: ENOMEM) }
            defer { nl_cb_put(callbacks) }
            let context = Unmanaged.passUnretained(sink).toOpaque()
            nl_cb_set(callbacks, NL_CB_VALID, NL_CB_CUSTOM, DumpSink.received, context)
            var attempts = 0
            while true {
                attempts += 1
                var request = rtmsg()
                request.rtm_family = UInt8(AF_UNSPEC)
                try check("request route dump", nl_send_simple(socket, Int32(RTM_GETROUTE), NLM_F_DUMP, &request, MemoryLayout<rtmsg>.size))
                let result = nl_recvmsgs(socket, callbacks)
                if result == -Int32(NLE_DUMP_INTR) && attempts < 10 {
                    restart()
                    continue
                }
                try check("dump routes", result)
                return
            }
        })
    }

    /// Context of the dump callback, which libnl calls synchronously inside `nl_recvmsgs`.
    private final class DumpSink {
        let body: (RouteMessage) -> Void
        init(_ body: @escaping (RouteMessage) -> Void) { self.body = body }

        static let received: nl_recvmsg_msg_cb_t = { message, context in
            guard let message, let context, let header = nlmsg_hdr(message) else { return Int32(NL_OK.rawValue) }
            if let route = RouteMessage(header) {
                Unmanaged<DumpSink>.fromOpaque(context).takeUnretainedValue().body(route)
            }
            return Int32(NL_OK.rawValue)
        }
    }
}
