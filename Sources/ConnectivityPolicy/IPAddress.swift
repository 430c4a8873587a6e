#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// An IP address family.
public enum AddressFamily: String, Sendable, Hashable, Codable, CaseIterable {
    /// IPv4 (`AF_INET`): 4-byte addresses.
    case ipv4
    /// IPv6 (`AF_INET6`): 16-byte addresses.
    case ipv6
}

/// An IPv4 or IPv6 address, stored inline (no heap allocation) so that large route tables stay small.
public struct IPAddress: Sendable, Hashable, Codable, Comparable, CustomStringConvertible {
    /// Whether this is an IPv4 or an IPv6 address.
    public let family: AddressFamily
    /// The first 8 bytes in network order (an IPv4 address sits in the top 4 bytes).
    private let high: UInt64
    /// The last 8 bytes in network order (zero for IPv4).
    private let low: UInt64

    /// Creates an address from network-order bytes; `nil` unless there are 4 or 16.
    public init?(bytes: some Collection<UInt8>) {
        guard bytes.count == 4 || bytes.count == 16 else { return nil }
        family = bytes.count == 4 ? .ipv4 : .ipv6
        var high: UInt64 = 0, low: UInt64 = 0
        for (i, byte) in bytes.enumerated() {
            if i < 8 { high |= UInt64(byte) << (56 - 8 * UInt64(i)) } else { low |= UInt64(byte) << (56 - 8 * UInt64(i - 8)) }
        }
        self.high = high
        self.low = low
    }

    /// From the address as two big-endian halves (IPv4 in the top 4 bytes of `high`, `low` zero).
    ///
    /// For the netlink monitor's hot path: `init?(bytes:)` is generic and runs unspecialized
    /// from another module, which made it ~20% of the monitor's CPU in a route storm.
    package init(family: AddressFamily, high: UInt64, low: UInt64) {
        self.family = family
        self.high = high
        self.low = family == .ipv4 ? 0 : low
    }

    /// Network-order bytes: 4 for IPv4, 16 for IPv6.
    public var bytes: [UInt8] {
        let count = family == .ipv4 ? 4 : 16
        return (0..<count).map { i in
            i < 8 ? UInt8(truncatingIfNeeded: high >> (56 - 8 * UInt64(i))) : UInt8(truncatingIfNeeded: low >> (56 - 8 * UInt64(i - 8)))
        }
    }

    /// Parses the textual form (`192.0.2.1`, `2001:db8::1`).
    public init?(_ text: String) {
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 {
            self.init(bytes: withUnsafeBytes(of: &v4) { Array($0) })
            return
        }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, text, &v6) == 1 {
            self.init(bytes: withUnsafeBytes(of: &v6) { Array($0) })
            return
        }
        return nil
    }

    /// `127.0.0.0/8` or `::1`.
    public var isLoopback: Bool {
        family == .ipv4 ? high >> 56 == 127 : (high == 0 && low == 1)
    }

    /// The all-zero address of a family.
    public static func zero(_ family: AddressFamily) -> IPAddress {
        IPAddress(bytes: [UInt8](repeating: 0, count: family == .ipv4 ? 4 : 16))!
    }

    /// Whether the first `length` bits equal those of `other` (same family assumed).
    func sharesPrefix(of length: Int, with other: IPAddress) -> Bool {
        func mask(_ bits: Int) -> UInt64 { bits <= 0 ? 0 : bits >= 64 ? .max : ~(UInt64.max >> UInt64(bits)) }
        let highMask = mask(length), lowMask = mask(length - 64)
        return high & highMask == other.high & highMask && low & lowMask == other.low & lowMask
    }

    /// The textual form as `inet_ntop` writes it (`192.0.2.1`, `2001:db8::1`).
    public var description: String {
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
        let af = family == .ipv4 ? AF_INET : AF_INET6
        let ok = bytes.withUnsafeBytes { raw in
            inet_ntop(af, raw.baseAddress, &buffer, socklen_t(buffer.count)) != nil
        }
        guard ok else { return bytes.map { String($0) }.joined(separator: ".") }
        let end = buffer.firstIndex(of: 0) ?? buffer.endIndex
        return String(decoding: buffer[..<end].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// IPv4 before IPv6, then by the bytes in network order: the canonical order of snapshots.
    public static func < (lhs: IPAddress, rhs: IPAddress) -> Bool {
        (lhs.family == .ipv4 ? 0 : 1, lhs.high, lhs.low) < (rhs.family == .ipv4 ? 0 : 1, rhs.high, rhs.low)
    }

    /// Decodes the textual form; anything that does not parse is a data-corrupted error.
    public init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        guard let address = IPAddress(text) else {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "not an IP address: \(text)"))
        }
        self = address
    }

    /// Encodes the textual form (``description``), not the bytes.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(description)
    }
}

/// An address prefix such as `10.0.0.0/8` or `::/0`.
public struct IPPrefix: Sendable, Hashable, Codable, Comparable, CustomStringConvertible {
    /// The network address; bits past ``length`` are kept as given, not zeroed.
    public var address: IPAddress
    /// The number of leading bits that count: 0 to 32 for IPv4, 0 to 128 for IPv6.
    public var length: Int

    /// A prefix of `length` bits of `address`; the length is clamped to the family's range.
    public init(address: IPAddress, length: Int) {
        self.address = address
        self.length = max(0, min(length, address.family == .ipv4 ? 32 : 128))
    }

    /// Parses `address/length`; a bare address is a host prefix.
    public init?(_ text: String) {
        let parts = text.split(separator: "/", maxSplits: 1)
        guard let first = parts.first, let address = IPAddress(String(first)) else { return nil }
        if parts.count == 2 {
            guard let length = Int(parts[1]), length >= 0, length <= (address.family == .ipv4 ? 32 : 128) else { return nil }
            self.init(address: address, length: length)
        } else {
            self.init(address: address, length: address.family == .ipv4 ? 32 : 128)
        }
    }

    /// The default route prefix of a family (`0.0.0.0/0` or `::/0`).
    public static func defaultRoute(_ family: AddressFamily) -> IPPrefix {
        IPPrefix(address: .zero(family), length: 0)
    }

    /// The family of the prefix's address.
    public var family: AddressFamily { address.family }
    /// A zero-length prefix (`0.0.0.0/0`, `::/0`): what a default route covers.
    public var isDefault: Bool { length == 0 }

    /// Whether `other` lies inside this prefix.
    public func contains(_ other: IPAddress) -> Bool {
        other.family == family && address.sharesPrefix(of: length, with: other)
    }

    /// The `address/length` form, e.g. `10.0.0.0/8`.
    public var description: String { "\(address)/\(length)" }

    /// By address, then shorter prefixes first: the canonical order of snapshots.
    public static func < (lhs: IPPrefix, rhs: IPPrefix) -> Bool {
        (lhs.address, lhs.length) < (rhs.address, rhs.length)
    }
}
