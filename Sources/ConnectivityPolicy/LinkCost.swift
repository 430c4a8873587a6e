/// What sending and receiving over a link costs: whether traffic on it is metered (an LTE modem,
/// a phone's hotspot, a satellite link) or not.
public enum LinkCost: String, Sendable, Hashable, Codable, CustomStringConvertible {
    /// Traffic is paid for or capped: bulk transfers should wait for another link.
    case metered
    /// Traffic is not metered.
    case unmetered
    /// Nothing says either way; treated as unmetered, as NetworkManager and Android do.
    case unknown

    /// `metered`, `unmetered` or `unknown`.
    public var description: String { rawValue }
}

/// Where a link's cost was learnt, from the most to the least authoritative.
public enum LinkCostSource: String, Sendable, Hashable, Codable, CustomStringConvertible {
    /// The `[network] metered` / `unmetered` globs of the configuration.
    case configuration
    /// NetworkManager's `Metered` property of the device (its profile, DHCP option 43, the
    /// Wi-Fi network-cost element, or its own guess from the device type).
    case networkManager = "networkmanager"
    /// systemd-networkd's DHCP lease for the link: vendor option 43 containing `ANDROID_METERED`.
    case dhcpLease = "dhcp_lease"
    /// A guess from the kind of link: a WWAN modem, PPP, USB tethering, Bluetooth PAN.
    case linkType = "link_type"
    /// No source said anything.
    case none

    /// The source in words for a status line, e.g. `guessed from the link type`.
    public var description: String {
        switch self {
        case .configuration: "set in the configuration"
        case .networkManager: "from NetworkManager"
        case .dhcpLease: "from the DHCP lease"
        case .linkType: "guessed from the link type"
        case .none: "no source"
        }
    }
}

/// A link's cost and where it came from.
public struct LinkCostAssessment: Sendable, Hashable, Codable, CustomStringConvertible {
    /// Metered, unmetered or unknown.
    public var cost: LinkCost
    /// Who said so.
    public var source: LinkCostSource
    /// The evidence in words, e.g. `glob "wwan*"`, `Metered=guess-yes`, `driver rndis_host`.
    public var detail: String?

    /// A cost, its source and the evidence.
    public init(_ cost: LinkCost, source: LinkCostSource, detail: String? = nil) {
        self.cost = cost
        self.source = source
        self.detail = detail
    }

    /// Nothing known about the link.
    public static let unknown = LinkCostAssessment(.unknown, source: .none)

    /// This assessment, or `nil` when nothing is known (``unknown``): what status reports carry.
    public var known: LinkCostAssessment? { self == .unknown ? nil : self }

    /// Whether bulk transfers should hold back: only a metered link says so.
    public var isMetered: Bool { cost == .metered }

    /// For logs and status, e.g. `metered, guessed from the link type (driver rndis_host)`.
    public var description: String {
        guard cost != .unknown || source != .none else { return "unknown cost" }
        return "\(cost), \(source)" + (detail.map { " (\($0))" } ?? "")
    }
}
