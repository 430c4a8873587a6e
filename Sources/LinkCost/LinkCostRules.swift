import ConnectivityPolicy

#if canImport(Glibc)
import Glibc
#endif

/// The configuration's say on link costs: `[network] metered` and `unmetered`, globs on link
/// names as fnmatch(3) reads them (`wwan*`, `ppp?`, `enx*`).
public struct LinkCostGlobs: Sendable, Hashable {
    /// Links always counted as metered.
    public var metered: [String]
    /// Links always counted as unmetered; a name matching both lists is metered.
    public var unmetered: [String]

    /// Globs for each list; none by default.
    public init(metered: [String] = [], unmetered: [String] = []) {
        self.metered = metered
        self.unmetered = unmetered
    }

    /// The glob of either list that `name` matches, metered first.
    public func match(_ name: String) -> (cost: LinkCost, glob: String)? {
        if let glob = metered.first(where: { Self.matches($0, name) }) { return (.metered, glob) }
        if let glob = unmetered.first(where: { Self.matches($0, name) }) { return (.unmetered, glob) }
        return nil
    }

    private static func matches(_ glob: String, _ name: String) -> Bool {
        fnmatch(glob, name, 0) == 0
    }
}

/// What the kernel and sysfs say about a link's hardware, for a guess at its cost.
public struct LinkFacts: Sendable, Hashable {
    /// The device type from sysfs's `uevent` (`DEVTYPE=`): `wwan`, `wlan`, `bluetooth`, `bridge`…
    public var deviceType: String?
    /// The hardware type (`/sys/class/net/NAME/type`, an `ARPHRD_*` value): 512 for PPP.
    public var hardwareType: Int?
    /// The driver bound to the device (`device/driver`'s name): `rndis_host`, `qmi_wwan`…
    public var driver: String?

    /// Facts as far as they are known.
    public init(deviceType: String? = nil, hardwareType: Int? = nil, driver: String? = nil) {
        self.deviceType = deviceType
        self.hardwareType = hardwareType
        self.driver = driver
    }

    /// `ARPHRD_PPP`.
    static let pppHardwareType = 512

    /// USB tethering (a phone sharing its mobile data) and modem drivers. `cdc_ether` and
    /// `cdc_ncm` also drive some USB Ethernet adapters: this is a guess, and says so.
    static let meteredDrivers: Set<String> = [
        "rndis_host", "ipheth", "cdc_ncm", "cdc_ether", "huawei_cdc_ncm",
        "qmi_wwan", "cdc_mbim", "option", "sierra_net", "mhi_net",
    ]

    /// The guess: WWAN modems, PPP, USB tethering and Bluetooth PAN are metered; anything else
    /// is unknown (never unmetered: a guess from hardware cannot tell a paid Wi-Fi apart).
    public var guess: LinkCostAssessment? {
        if deviceType == "wwan" { return LinkCostAssessment(.metered, source: .linkType, detail: "WWAN modem") }
        if hardwareType == Self.pppHardwareType { return LinkCostAssessment(.metered, source: .linkType, detail: "PPP link") }
        if deviceType == "bluetooth" || driver == "bnep" { return LinkCostAssessment(.metered, source: .linkType, detail: "Bluetooth PAN") }
        if let driver, Self.meteredDrivers.contains(driver) {
            return LinkCostAssessment(.metered, source: .linkType, detail: "driver \(driver)")
        }
        return nil
    }
}

/// Decides each link's cost from every source, the most authoritative first: the
/// configuration's globs, NetworkManager's `Metered`, a DHCP lease's `ANDROID_METERED`, then a
/// guess from the link's hardware. Pure: the caller gathers what each source says.
public enum LinkCostRules {
    /// The cost of link `name`.
    ///
    /// - Parameters:
    ///   - globs: the configuration's lists.
    ///   - networkManager: NetworkManager's value for the device, when it manages it; `unknown`
    ///     counts as saying nothing.
    ///   - leaseSaysMetered: whether the link's DHCP lease carries `ANDROID_METERED`.
    ///   - facts: the link's hardware, for the guess.
    public static func assess(
        link name: String,
        globs: LinkCostGlobs,
        networkManager: NetworkManagerMetered?,
        leaseSaysMetered: Bool,
        facts: LinkFacts?
    ) -> LinkCostAssessment {
        if let (cost, glob) = globs.match(name) {
            return LinkCostAssessment(cost, source: .configuration, detail: "\(cost == .metered ? "metered" : "unmetered") = \"\(glob)\"")
        }
        if let networkManager, networkManager != .unknown {
            return LinkCostAssessment(networkManager.cost, source: .networkManager, detail: "Metered=\(networkManager)")
        }
        if leaseSaysMetered {
            return LinkCostAssessment(.metered, source: .dhcpLease, detail: "option 43 ANDROID_METERED")
        }
        return facts?.guess ?? .unknown
    }
}
