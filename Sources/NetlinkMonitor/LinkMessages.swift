import CNetlink
import ConnectivityPolicy

/// What one link notification says about carrier, read from the message itself.
///
/// ``NetlinkEventLoop`` peeks at the head of its link socket before libnl reads it: when a link
/// that had carrier has lost it, the offline snapshot goes out without waiting for libnl to parse
/// the message, update its cache and free the old object, a large share of the time from the
/// kernel's notification to a published verdict (measured: BENCHMARKS.md, "The offline path made
/// shorter"). libnl then reads the same message as always and the full snapshot follows.
struct LinkChange: Equatable {
    enum Kind: Equatable {
        /// `RTM_NEWLINK`: the link's flags (`ifi_flags`) and its operstate, when the message
        /// carries `IFLA_OPERSTATE`.
        case updated(flags: LinkFlags, operState: OperState?)
        /// `RTM_DELLINK`: the link is gone.
        case removed
    }

    var index: Int32
    var kind: Kind

    /// The link notifications of one datagram, in order.
    ///
    /// Only whole-interface messages (`AF_UNSPEC`) count: the per-family ones (IPv6 protinfo,
    /// bridge ports) say nothing about carrier. Parsing stops at the first message that does not
    /// fit, so a datagram cut short by a small receive buffer yields its whole messages only.
    static func parse(_ datagram: UnsafeRawBufferPointer) -> [LinkChange] {
        let headerSize = MemoryLayout<nlmsghdr>.size
        let infoSize = MemoryLayout<ifinfomsg>.size
        var changes: [LinkChange] = []
        NetlinkWire.forEachMessage(in: datagram) { header, offset, length in
            let type = Int32(header.nlmsg_type)
            guard type == Int32(RTM_NEWLINK) || type == Int32(RTM_DELLINK), length >= headerSize + infoSize else { return true }
            let body = offset + headerSize
            let info = datagram.loadUnaligned(fromByteOffset: body, as: ifinfomsg.self)
            guard info.ifi_family == UInt8(AF_UNSPEC) else { return true }
            if type == Int32(RTM_DELLINK) {
                changes.append(LinkChange(index: info.ifi_index, kind: .removed))
                return true
            }
            changes.append(LinkChange(
                index: info.ifi_index,
                kind: .updated(
                    flags: LinkFlags(rawValue: info.ifi_flags),
                    operState: operState(in: datagram, from: body + NetlinkWire.aligned(infoSize), to: offset + length)
                )
            ))
            return true
        }
        return changes
    }

    private static func operState(in datagram: UnsafeRawBufferPointer, from start: Int, to end: Int) -> OperState? {
        var state: OperState?
        NetlinkWire.forEachAttribute(in: datagram, from: start, to: end) { type, payload, size in
            guard type == UInt16(IFLA_OPERSTATE), size >= 1 else { return true }
            state = OperState(rawValue: datagram[payload]) ?? .unknown
            return false
        }
        return state
    }

    /// `links` after `changes`, and whether a link that had carrier has lost it (or is gone).
    ///
    /// Links the list does not know are left out: a new link has no carrier to lose, and it
    /// reaches the snapshot through libnl's cache as before.
    static func apply(_ changes: [LinkChange], to links: [LinkInfo]) -> (links: [LinkInfo], lostCarrier: Bool) {
        var links = links
        var lost = false
        for change in changes {
            guard let position = links.firstIndex(where: { $0.index == change.index }) else { continue }
            let had = links[position].hasCarrier
            switch change.kind {
            case .removed:
                links.remove(at: position)
                lost = lost || had
            case .updated(let flags, let operState):
                links[position].flags = flags
                if let operState { links[position].operState = operState }
                lost = lost || (had && !links[position].hasCarrier)
            }
        }
        return (links, lost)
    }
}
