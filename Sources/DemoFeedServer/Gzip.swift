/// A gzip (RFC 1952) encoder using stored deflate blocks.
///
/// No zlib binding is available to this module; stored blocks are valid gzip that every
/// decoder accepts, which is what matters here: the client's decompression path is exercised
/// end to end. The body does not get smaller.
enum Gzip {
    static func encode(_ input: [UInt8]) -> [UInt8] {
        var out: [UInt8] = [0x1F, 0x8B, 0x08, 0x00, 0, 0, 0, 0, 0x00, 0xFF]
        out.reserveCapacity(input.count + input.count / 65_535 * 5 + 32)
        var offset = 0
        repeat {
            let length = min(65_535, input.count - offset)
            let isFinal = offset + length == input.count
            out.append(isFinal ? 0x01 : 0x00)
            out.append(UInt8(length & 0xFF))
            out.append(UInt8(length >> 8))
            out.append(UInt8(~length & 0xFF))
            out.append(UInt8((~length >> 8) & 0xFF))
            out.append(contentsOf: input[offset..<offset + length])
            offset += length
        } while offset < input.count
        appendLittleEndian(crc32(input), to: &out)
        appendLittleEndian(UInt32(truncatingIfNeeded: input.count), to: &out)
        return out
    }

    private static func appendLittleEndian(_ value: UInt32, to out: inout [UInt8]) {
        for shift in stride(from: 0, to: 32, by: 8) { out.append(UInt8((value >> UInt32(shift)) & 0xFF)) }
    }

    private static let table: [UInt32] = (0..<256).map { n in
        var c = UInt32(n)
        for _ in 0..<8 { c = c & 1 != 0 ? 0xEDB8_8320 ^ (c >> 1) : c >> 1 }
        return c
    }

    static func crc32(_ bytes: [UInt8]) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in bytes { crc = table[Int((crc ^ UInt32(byte)) & 0xFF)] ^ (crc >> 8) }
        return crc ^ 0xFFFF_FFFF
    }
}
