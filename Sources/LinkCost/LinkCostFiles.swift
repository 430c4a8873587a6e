#if canImport(Glibc)
import Glibc
#endif

/// What files on this machine say about a link's cost: systemd-networkd's DHCP leases and
/// sysfs. Each read is a few small files; a file that is missing, unreadable or too large says
/// nothing.
public struct LinkCostFiles: Sendable {
    /// Where systemd-networkd keeps its leases, one file per interface index.
    public var leaseDirectory: String
    /// Where sysfs lists network devices.
    public var sysfsNetDirectory: String

    /// The system's own directories by default.
    public init(leaseDirectory: String = "/run/systemd/netif/leases", sysfsNetDirectory: String = "/sys/class/net") {
        self.leaseDirectory = leaseDirectory
        self.sysfsNetDirectory = sysfsNetDirectory
    }

    /// The most a lease or sysfs file may hold before it is ignored.
    static let maximumFileSize = 64 << 10

    /// Whether link `index`'s DHCP lease carries vendor option 43 with `ANDROID_METERED`, as an
    /// Android phone's hotspot sends it (NetworkManager reads the same option).
    public func leaseSaysMetered(linkIndex index: Int32) -> Bool {
        guard let lease = Self.read("\(leaseDirectory)/\(index)") else { return false }
        return Self.leaseSaysMetered(lease)
    }

    /// Whether a lease file's `VENDOR_SPECIFIC=` (the option's bytes in hex, as networkd writes
    /// them) contains `ANDROID_METERED`.
    static func leaseSaysMetered(_ lease: String) -> Bool {
        for line in lease.split(separator: "\n") where line.hasPrefix("VENDOR_SPECIFIC=") {
            guard let bytes = decodeHex(line.dropFirst("VENDOR_SPECIFIC=".count)) else { continue }
            let marker = Array("ANDROID_METERED".utf8)
            if bytes.count >= marker.count,
               (0...(bytes.count - marker.count)).contains(where: { bytes[$0..<($0 + marker.count)].elementsEqual(marker) }) {
                return true
            }
        }
        return false
    }

    private static func decodeHex(_ text: Substring) -> [UInt8]? {
        let digits = Array(text.utf8)
        guard digits.count % 2 == 0 else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(digits.count / 2)
        var index = 0
        while index < digits.count {
            guard let high = hexValue(digits[index]), let low = hexValue(digits[index + 1]) else { return nil }
            bytes.append(high << 4 | low)
            index += 2
        }
        return bytes
    }

    private static func hexValue(_ digit: UInt8) -> UInt8? {
        switch digit {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): digit - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): digit - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): digit - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    /// The hardware facts sysfs gives for link `name`: `uevent`'s `DEVTYPE`, `type`, and the
    /// name of the driver `device/driver` links to. `nil` when sysfs does not list the link (it
    /// lives in another network namespace than the one sysfs was mounted in).
    public func facts(linkName name: String) -> LinkFacts? {
        // A link name is at most 15 bytes with no slash: anything else is not a sysfs entry.
        guard !name.isEmpty, name.utf8.count <= 15, !name.contains("/"), name != ".", name != ".." else { return nil }
        let directory = "\(sysfsNetDirectory)/\(name)"
        guard let uevent = Self.read("\(directory)/uevent") else { return nil }
        var facts = LinkFacts()
        for line in uevent.split(separator: "\n") where line.hasPrefix("DEVTYPE=") {
            facts.deviceType = String(line.dropFirst("DEVTYPE=".count))
        }
        facts.hardwareType = Self.read("\(directory)/type").flatMap { Int(String($0.filter { !$0.isWhitespace })) }
        facts.driver = Self.linkTarget("\(directory)/device/driver").map { target in
            String(target.split(separator: "/").last ?? Substring(target))
        }
        return facts
    }

    /// A small text file's contents, or `nil`.
    static func read(_ path: String) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        // Sysfs files and leases are a few hundred bytes: read in small chunks, not into a buffer
        // of the largest size allowed.
        var contents: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while contents.count <= maximumFileSize {
            let read = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress!, $0.count) }
            if read < 0 && errno == EINTR { continue }
            guard read > 0 else { break }
            contents += chunk[0..<read]
        }
        guard contents.count <= maximumFileSize else { return nil }
        return String(decoding: contents, as: UTF8.self)
    }

    private static func linkTarget(_ path: String) -> String? {
        var buffer = [CChar](repeating: 0, count: 4096)
        let length = readlink(path, &buffer, buffer.count - 1)
        guard length > 0 else { return nil }
        return String(decoding: buffer[0..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
