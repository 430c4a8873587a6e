import ConnectivityPolicy
@testable import NetlinkMonitor
import Testing

/// The carrier part of raw link notifications, built byte by byte from the kernel's ABI
/// (`linux/netlink.h`, `linux/rtnetlink.h`, `linux/if_link.h`) rather than with the parser's own types.
struct LinkChangeTests {
    static let newLink: UInt16 = 16  // RTM_NEWLINK
    static let delLink: UInt16 = 17  // RTM_DELLINK
    static let newAddress: UInt16 = 20  // RTM_NEWADDR
    static let ifname: UInt16 = 3  // IFLA_IFNAME
    static let operstate: UInt16 = 16  // IFLA_OPERSTATE
    static let up: UInt32 = 0x1, running: UInt32 = 0x40, lowerUp: UInt32 = 0x10000

    /// One netlink message: a 16-byte header, a 16-byte `ifinfomsg`, then attributes.
    static func message(type: UInt16, family: UInt8 = 0, index: Int32, flags: UInt32, attributes: [(UInt16, [UInt8])] = []) -> [UInt8] {
        var body: [UInt8] = [family, 0]
        body += le(UInt16(1))  // ifi_type: ARPHRD_ETHER
        body += le(UInt32(bitPattern: index))
        body += le(flags)
        body += le(UInt32(0xFFFF_FFFF))  // ifi_change
        for (type, payload) in attributes {
            body += le(UInt16(4 + payload.count)) + le(type) + payload
            body += [UInt8](repeating: 0, count: (4 - payload.count % 4) % 4)
        }
        return le(UInt32(16 + body.count)) + le(type) + le(UInt16(0)) + le(UInt32(0)) + le(UInt32(0)) + body
    }

    static func le<T: FixedWidthInteger>(_ value: T) -> [UInt8] {
        withUnsafeBytes(of: value.littleEndian) { Array($0) }
    }

    static func parse(_ bytes: [UInt8]) -> [LinkChange] {
        bytes.withUnsafeBytes { LinkChange.parse($0) }
    }

    @Test func readsFlagsAndOperstateOfANewLinkMessage() {
        let bytes = Self.message(type: Self.newLink, index: 7, flags: Self.up | 0x2, attributes: [
            (Self.ifname, Array("veth-c\0".utf8)),
            (Self.operstate, [2]),  // IF_OPER_DOWN
        ])
        #expect(Self.parse(bytes) == [LinkChange(index: 7, kind: .updated(flags: LinkFlags(rawValue: Self.up | 0x2), operState: .down))])
    }

    @Test func aMessageWithoutOperstateLeavesItUnknownToTheChange() {
        let bytes = Self.message(type: Self.newLink, index: 3, flags: Self.up | Self.running | Self.lowerUp)
        #expect(Self.parse(bytes) == [LinkChange(index: 3, kind: .updated(flags: [.up, .running, .lowerUp], operState: nil))])
    }

    @Test func readsEveryMessageOfADatagramAndSkipsOthers() {
        let bytes = Self.message(type: Self.newLink, index: 2, flags: Self.up)
            + Self.message(type: Self.newLink, family: 10, index: 2, flags: 0)  // AF_INET6 protinfo
            + Self.message(type: Self.newAddress, index: 2, flags: 0)
            + Self.message(type: Self.delLink, index: 5, flags: 0)
        #expect(Self.parse(bytes) == [
            LinkChange(index: 2, kind: .updated(flags: [.up], operState: nil)),
            LinkChange(index: 5, kind: .removed),
        ])
    }

    @Test func stopsAtAMessageCutShort() {
        let whole = Self.message(type: Self.newLink, index: 2, flags: Self.up)
        let cut = Self.message(type: Self.newLink, index: 4, flags: 0, attributes: [(Self.operstate, [2])])
        #expect(Self.parse(whole + cut.dropLast(4)) == [LinkChange(index: 2, kind: .updated(flags: [.up], operState: nil))])
        #expect(Self.parse(Array(whole.prefix(20))).isEmpty)
        // A length field smaller than a header must not loop or read outside the datagram.
        var broken = whole
        broken[0] = 3
        #expect(Self.parse(broken).isEmpty)
    }

    @Test func aMalformedAttributeEndsTheAttributeWalkNotTheMessage() {
        var bytes = Self.message(type: Self.newLink, index: 9, flags: Self.up, attributes: [(Self.operstate, [6])])
        bytes[32] = 200  // the attribute claims more bytes than the message holds
        #expect(Self.parse(bytes) == [LinkChange(index: 9, kind: .updated(flags: [.up], operState: nil))])
    }

    static let ethernet = LinkInfo(index: 2, name: "eth0", flags: [.up, .running, .lowerUp], operState: .up)
    static let wifi = LinkInfo(index: 3, name: "wlan0", flags: [.up, .running, .lowerUp], operState: .up)
    static let loopback = LinkInfo(index: 1, name: "lo", flags: [.up, .loopback, .running, .lowerUp], operState: .unknown)

    @Test func adminDownOfALinkWithCarrierIsALoss() {
        let (links, lost) = LinkChange.apply([LinkChange(index: 2, kind: .updated(flags: [], operState: .down))], to: [Self.loopback, Self.ethernet, Self.wifi])
        #expect(lost)
        #expect(links.map(\.hasCarrier) == [true, false, true])
        #expect(links[1] == LinkInfo(index: 2, name: "eth0", flags: [], operState: .down))
    }

    @Test func carrierLossOfALinkWithoutOperstateIsALoss() {
        // Drivers that never report an operstate: carrier is LOWER_UP and RUNNING.
        let dummy = LinkInfo(index: 5, name: "dummy0", flags: [.up, .running, .lowerUp], operState: .unknown)
        let (links, lost) = LinkChange.apply([LinkChange(index: 5, kind: .updated(flags: [.up], operState: nil))], to: [Self.ethernet, dummy])
        #expect(lost)
        #expect(links[1] == LinkInfo(index: 5, name: "dummy0", flags: [.up], operState: .unknown))
    }

    @Test func removingALinkWithCarrierIsALoss() {
        let (links, lost) = LinkChange.apply([LinkChange(index: 2, kind: .removed)], to: [Self.ethernet, Self.wifi])
        #expect(lost)
        #expect(links == [Self.wifi])
    }

    @Test func gainsUnknownLinksAndLinksWithoutCarrierAreNoLoss() {
        let down = LinkInfo(index: 4, name: "eth1", flags: [], operState: .down)
        let gone = LinkInfo(index: 6, name: "eth2", flags: [.up], operState: .lowerLayerDown)
        let changes = [
            LinkChange(index: 4, kind: .updated(flags: [.up, .running, .lowerUp], operState: .up)),
            LinkChange(index: 6, kind: .removed),
            LinkChange(index: 9, kind: .updated(flags: [], operState: .down)),
            LinkChange(index: 2, kind: .updated(flags: [.up, .running, .lowerUp, LinkFlags(rawValue: 0x1000)], operState: .up)),
        ]
        let (links, lost) = LinkChange.apply(changes, to: [Self.ethernet, down, gone])
        #expect(!lost)
        #expect(links.map(\.index) == [2, 4])
        #expect(links.allSatisfy { $0.hasCarrier })
    }
}
