import ConnectivityPolicy
import Foundation
import LinkCost
import Testing
import TestSupport

/// The order of the sources and what each says, as a table; the files as systemd-networkd and
/// sysfs write them.
struct LinkCostRulesTests {
    static let globs = LinkCostGlobs(metered: ["wwan*", "ppp?"], unmetered: ["eth*", "wwan9"])

    struct Case: Sendable, CustomTestStringConvertible {
        var link: String
        var networkManager: NetworkManagerMetered?
        var lease = false
        var facts: LinkFacts?
        var cost: LinkCost
        var source: LinkCostSource
        var testDescription: String { "\(link) nm=\(networkManager.map(String.init(describing:)) ?? "-") lease=\(lease) → \(cost) \(source)" }
    }

    static let cases: [Case] = [
        // The configuration wins over everything, metered over unmetered.
        Case(link: "wwan0", networkManager: .no, lease: false, facts: nil, cost: .metered, source: .configuration),
        Case(link: "wwan9", networkManager: nil, cost: .metered, source: .configuration),
        Case(link: "eth0", networkManager: .yes, lease: true, facts: LinkFacts(deviceType: "wwan"), cost: .unmetered, source: .configuration),
        Case(link: "ppp0", cost: .metered, source: .configuration),
        // NetworkManager next; its guesses count, its unknown says nothing.
        Case(link: "wlan0", networkManager: .guessYes, cost: .metered, source: .networkManager),
        Case(link: "wlan0", networkManager: .guessNo, lease: true, cost: .unmetered, source: .networkManager),
        Case(link: "wlan0", networkManager: .unknown, lease: true, cost: .metered, source: .dhcpLease),
        // Then the lease, then the hardware.
        Case(link: "usb0", lease: true, facts: LinkFacts(driver: "rndis_host"), cost: .metered, source: .dhcpLease),
        Case(link: "usb0", facts: LinkFacts(driver: "rndis_host"), cost: .metered, source: .linkType),
        Case(link: "mdm0", facts: LinkFacts(deviceType: "wwan"), cost: .metered, source: .linkType),
        Case(link: "dsl0", facts: LinkFacts(hardwareType: 512), cost: .metered, source: .linkType),
        Case(link: "bnep0", facts: LinkFacts(deviceType: "bluetooth"), cost: .metered, source: .linkType),
        // A guess never says unmetered: an ordinary Ethernet driver is unknown.
        Case(link: "enp3s0", facts: LinkFacts(hardwareType: 1, driver: "e1000e"), cost: .unknown, source: .none),
        Case(link: "wlp2s0", networkManager: nil, facts: nil, cost: .unknown, source: .none),
    ]

    @Test(arguments: cases)
    func sourcesInOrder(_ c: Case) {
        let assessment = LinkCostRules.assess(link: c.link, globs: Self.globs, networkManager: c.networkManager, leaseSaysMetered: c.lease, facts: c.facts)
        #expect(assessment.cost == c.cost)
        #expect(assessment.source == c.source)
    }

    @Test func theEvidenceIsInWords() {
        let byGlob = LinkCostRules.assess(link: "wwan0", globs: Self.globs, networkManager: nil, leaseSaysMetered: false, facts: nil)
        #expect(byGlob.description == #"metered, set in the configuration (metered = "wwan*")"#)
        let byManager = LinkCostRules.assess(link: "wlan0", globs: .init(), networkManager: .guessYes, leaseSaysMetered: false, facts: nil)
        #expect(byManager.description == "metered, from NetworkManager (Metered=guess-yes)")
        let byDriver = LinkCostRules.assess(link: "usb0", globs: .init(), networkManager: nil, leaseSaysMetered: false, facts: LinkFacts(driver: "ipheth"))
        #expect(byDriver.description == "metered, guessed from the link type (driver ipheth)")
    }

    /// Vendor option 43 as an Android hotspot sends it, hex-encoded as networkd's lease file has it.
    @Test func aLeaseWithAndroidMeteredSaysMetered() throws {
        let directory = try TemporaryDirectory(prefix: "syncd-lease")
        let hex = Array("ANDROID_METERED".utf8).map { String(format: "%02X", $0) }.joined()
        try "# This is private data. Do not parse.\nADDRESS=192.168.43.17\nVENDOR_SPECIFIC=\(hex)\n".write(toFile: directory.file("7"), atomically: true, encoding: .utf8)
        try "ADDRESS=10.0.0.5\nVENDOR_SPECIFIC=0102ab\n".write(toFile: directory.file("8"), atomically: true, encoding: .utf8)
        try "VENDOR_SPECIFIC=zz\(hex)\n".write(toFile: directory.file("9"), atomically: true, encoding: .utf8)
        let files = LinkCostFiles(leaseDirectory: directory.path, sysfsNetDirectory: directory.file("none"))
        #expect(files.leaseSaysMetered(linkIndex: 7))
        #expect(!files.leaseSaysMetered(linkIndex: 8), "another vendor option")
        #expect(!files.leaseSaysMetered(linkIndex: 9), "not hex")
        #expect(!files.leaseSaysMetered(linkIndex: 10), "no lease")
    }

    /// A sysfs tree as the kernel lays it out for a phone tethered over USB.
    @Test func sysfsFactsOfATetheredPhone() throws {
        let root = try TemporaryDirectory(prefix: "syncd-sysfs")
        let fm = FileManager.default
        let device = root.file("devices/usb1/1-1:1.0")
        try fm.createDirectory(atPath: root.file("net/usb0"), withIntermediateDirectories: true)
        try fm.createDirectory(atPath: device, withIntermediateDirectories: true)
        try fm.createDirectory(atPath: root.file("bus/usb/drivers/rndis_host"), withIntermediateDirectories: true)
        try "INTERFACE=usb0\nIFINDEX=5\n".write(toFile: root.file("net/usb0/uevent"), atomically: true, encoding: .utf8)
        try "1\n".write(toFile: root.file("net/usb0/type"), atomically: true, encoding: .utf8)
        try fm.createSymbolicLink(atPath: root.file("net/usb0/device"), withDestinationPath: device)
        try fm.createSymbolicLink(atPath: device + "/driver", withDestinationPath: "../../../bus/usb/drivers/rndis_host")
        try fm.createDirectory(atPath: root.file("net/wwan0"), withIntermediateDirectories: true)
        try "DEVTYPE=wwan\nINTERFACE=wwan0\n".write(toFile: root.file("net/wwan0/uevent"), atomically: true, encoding: .utf8)

        let files = LinkCostFiles(leaseDirectory: root.file("leases"), sysfsNetDirectory: root.file("net"))
        let usb = try #require(files.facts(linkName: "usb0"))
        #expect(usb == LinkFacts(deviceType: nil, hardwareType: 1, driver: "rndis_host"))
        #expect(usb.guess?.cost == .metered)
        #expect(files.facts(linkName: "wwan0")?.guess?.detail == "WWAN modem")
        #expect(files.facts(linkName: "eth7") == nil, "not in sysfs")
        #expect(files.facts(linkName: "../net/usb0") == nil, "not a link name")
    }
}
