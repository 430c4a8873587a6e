import CNetlink
import ConnectivityPolicy

#if canImport(Glibc)
import Glibc
#endif

/// Asks the kernel how it would route to an address: an `RTM_GETROUTE` request for one
/// destination, what `ip route get ADDRESS` sends, answered by the kernel's own FIB lookup (policy
/// rules, every table, `throw`, VRFs, nexthop objects, the linkdown sysctls).
///
/// A raw `NETLINK_ROUTE` socket of its own, opened on the monitor's thread (so in the monitored
/// namespace) and used only there. The kernel answers a route request synchronously while the
/// request is being sent, so a lookup costs two system calls and never waits on the network.
final class KernelRouteLookup {
    private let fd: Int32
    private var sequence: UInt32 = 0
    private static let bufferSize = 16 << 10
    private let buffer = UnsafeMutableRawPointer.allocate(byteCount: KernelRouteLookup.bufferSize, alignment: 8)

    init() throws(NetlinkError) {
        let fd = socket(AF_NETLINK, Int32(SOCK_RAW.rawValue) | Int32(SOCK_CLOEXEC.rawValue), NETLINK_ROUTE)
        guard fd >= 0 else { throw NetlinkError("open route lookup socket", errno: errno) }
        // A safety net only: the answer is queued before send returns.
        var timeout = timeval(tv_sec: 1, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        self.fd = fd
    }

    deinit {
        close(fd)
        buffer.deallocate()
    }

    /// The kernel's route for each address, and the first lookup that got no answer (its request
    /// or the read of its answer failed, with `errno`), which then reads `.refused(.other)`.
    func lookup(_ addresses: some Sequence<IPAddress>) -> (routes: [IPAddress: KernelRoute], failure: (address: IPAddress, errno: Int32)?) {
        var result: [IPAddress: KernelRoute] = [:]
        var failure: (address: IPAddress, errno: Int32)?
        for address in addresses {
            switch lookup(address) {
            case .success(let route):
                result[address] = route
            case .failure(let error):
                result[address] = .refused(.other)
                if failure == nil { failure = (address, error.code) }
            }
        }
        return (result, failure)
    }

    /// Why a lookup got no answer: the `errno` of the send or the receive that failed.
    struct NoAnswer: Error {
        var code: Int32
    }

    /// One request, one answer: an `RTM_NEWROUTE` with the chosen path, or the kernel's error.
    func lookup(_ address: IPAddress) -> Result<KernelRoute, NoAnswer> {
        sequence &+= 1
        let seq = sequence
        guard send(request(for: address, sequence: seq)) else { return .failure(NoAnswer(code: errno)) }
        while true {
            let count = recv(fd, buffer, Self.bufferSize, 0)
            if count < 0 {
                if errno == EINTR { continue }
                return .failure(NoAnswer(code: errno))
            }
            if let answer = parse(count: count, sequence: seq) { return .success(answer) }
        }
    }

    private func request(for address: IPAddress, sequence: UInt32) -> [UInt8] {
        let bytes = address.bytes
        let headerSize = MemoryLayout<nlmsghdr>.size
        let rtmsgSize = MemoryLayout<rtmsg>.size
        let attributeSize = 4 + bytes.count
        let total = headerSize + rtmsgSize + attributeSize
        var message = [UInt8](repeating: 0, count: total)
        message.withUnsafeMutableBytes { raw in
            var header = nlmsghdr()
            header.nlmsg_len = UInt32(total)
            header.nlmsg_type = UInt16(RTM_GETROUTE)
            header.nlmsg_flags = UInt16(NLM_F_REQUEST)
            header.nlmsg_seq = sequence
            raw.storeBytes(of: header, as: nlmsghdr.self)
            var route = rtmsg()
            route.rtm_family = UInt8(address.family == .ipv4 ? AF_INET : AF_INET6)
            route.rtm_dst_len = UInt8(bytes.count * 8)
            raw.storeBytes(of: route, toByteOffset: headerSize, as: rtmsg.self)
            let attribute = headerSize + rtmsgSize
            raw.storeBytes(of: UInt16(attributeSize), toByteOffset: attribute, as: UInt16.self)
            raw.storeBytes(of: UInt16(RTA_DST.rawValue), toByteOffset: attribute + 2, as: UInt16.self)
            for (i, byte) in bytes.enumerated() { raw[attribute + 4 + i] = byte }
        }
        return message
    }

    private func send(_ message: [UInt8]) -> Bool {
        var kernel = sockaddr_nl()
        kernel.nl_family = sa_family_t(AF_NETLINK)
        while true {
            let sent = message.withUnsafeBytes { raw in
                withUnsafePointer(to: &kernel) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                        sendto(fd, raw.baseAddress, raw.count, 0, $0, socklen_t(MemoryLayout<sockaddr_nl>.size))
                    }
                }
            }
            if sent >= 0 { return true }
            if errno != EINTR { return false }
        }
    }

    /// The answer to `sequence` in one datagram, or `nil` when the datagram holds another answer
    /// (a late one to an earlier request that timed out).
    private func parse(count: Int, sequence: UInt32) -> KernelRoute? {
        let headerSize = MemoryLayout<nlmsghdr>.size
        let datagram = UnsafeRawBufferPointer(start: buffer, count: count)
        var answer: KernelRoute?
        NetlinkWire.forEachMessage(in: datagram) { header, offset, length in
            guard header.nlmsg_seq == sequence else { return true }
            let body = offset + headerSize
            switch Int32(header.nlmsg_type) {
            case Int32(NLMSG_ERROR):
                guard length >= headerSize + 4 else {
                    answer = .refused(.other)
                    return false
                }
                switch -datagram.loadUnaligned(fromByteOffset: body, as: Int32.self) {
                case 0: return true
                case ENETUNREACH: answer = .refused(.noRoute)
                case EHOSTUNREACH: answer = .refused(.unreachable)
                case EACCES: answer = .refused(.prohibited)
                case EINVAL: answer = .refused(.blackhole)
                default: answer = .refused(.other)
                }
                return false
            case Int32(RTM_NEWROUTE):
                answer = route(in: datagram, at: body, end: offset + length)
                return false
            default:
                return true
            }
        }
        return answer
    }

    private func route(in datagram: UnsafeRawBufferPointer, at body: Int, end: Int) -> KernelRoute {
        let rtmsgSize = MemoryLayout<rtmsg>.size
        guard body + rtmsgSize <= end else { return .refused(.other) }
        let message = datagram.loadUnaligned(fromByteOffset: body, as: rtmsg.self)
        var table = UInt32(message.rtm_table)
        var linkIndex: Int32 = 0
        var gateway: IPAddress?
        NetlinkWire.forEachAttribute(in: datagram, from: body + NetlinkWire.aligned(rtmsgSize), to: end) { type, payload, size in
            switch type {
            case UInt16(RTA_TABLE.rawValue) where size >= 4:
                table = datagram.loadUnaligned(fromByteOffset: payload, as: UInt32.self)
            case UInt16(RTA_OIF.rawValue) where size >= 4:
                linkIndex = datagram.loadUnaligned(fromByteOffset: payload, as: Int32.self)
            case UInt16(RTA_GATEWAY.rawValue) where size == 4 || size == 16:
                gateway = IPAddress(bytes: UnsafeRawBufferPointer(rebasing: datagram[payload..<(payload + size)]))
            default:
                break
            }
            return true
        }
        return .route(linkIndex: linkIndex, type: RouteType(raw: message.rtm_type), table: table, gateway: gateway)
    }
}
