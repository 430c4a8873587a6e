import CNetlink

/// Netlink's framing: the messages of a datagram and the attributes of a message, each padded
/// to 4 bytes. Every reader of raw netlink in this module walks them here, so the bounds checks
/// live in one place: a length that does not fit ends the walk, and a datagram cut short or
/// malformed yields its whole parts only.
enum NetlinkWire {
    static func aligned(_ length: Int) -> Int { (length + 3) & ~3 }

    /// Calls `body` with the header of each whole message in `datagram` and the message's offset
    /// and length (header included); `body` returns `false` to stop.
    static func forEachMessage(in datagram: UnsafeRawBufferPointer, _ body: (nlmsghdr, _ offset: Int, _ length: Int) -> Bool) {
        let headerSize = MemoryLayout<nlmsghdr>.size
        var offset = 0
        while offset + headerSize <= datagram.count {
            let header = datagram.loadUnaligned(fromByteOffset: offset, as: nlmsghdr.self)
            let length = Int(header.nlmsg_len)
            guard length >= headerSize, offset + length <= datagram.count, body(header, offset, length) else { return }
            offset += aligned(length)
        }
    }

    /// Calls `body` with the type (flag bits cleared) and the payload's offset and size of each
    /// whole attribute in `buffer[start..<end]`; `body` returns `false` to stop.
    static func forEachAttribute(in buffer: UnsafeRawBufferPointer, from start: Int, to end: Int, _ body: (_ type: UInt16, _ payload: Int, _ size: Int) -> Bool) {
        var offset = start
        while offset + 4 <= end {
            let length = Int(buffer.loadUnaligned(fromByteOffset: offset, as: UInt16.self))
            let type = buffer.loadUnaligned(fromByteOffset: offset + 2, as: UInt16.self) & 0x3FFF
            guard length >= 4, offset + length <= end, body(type, offset + 4, length - 4) else { return }
            offset += aligned(length)
        }
    }
}
