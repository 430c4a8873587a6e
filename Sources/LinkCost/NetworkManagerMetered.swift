import ConnectivityPolicy

/// NetworkManager's `NMMetered`: the value of a device's `Metered` property on D-Bus
/// (`org.freedesktop.NetworkManager.Device`), with NetworkManager's own numbers.
///
/// `yes` and `no` come from the connection profile or the network itself (DHCP option 43, the
/// Wi-Fi network-cost element); the guesses are NetworkManager's from the device type (a modem is
/// guessed metered).
public enum NetworkManagerMetered: UInt32, Sendable, Hashable, Codable, CustomStringConvertible {
    /// NetworkManager does not know.
    case unknown = 0
    /// Metered, as the profile or the network says.
    case yes = 1
    /// Not metered, as the profile or the network says.
    case no = 2
    /// Metered by NetworkManager's guess.
    case guessYes = 3
    /// Not metered by NetworkManager's guess.
    case guessNo = 4

    /// What the link costs: `yes` and `guessYes` are metered, `no` and `guessNo` unmetered,
    /// `unknown` unknown.
    public var cost: LinkCost {
        switch self {
        case .yes, .guessYes: .metered
        case .no, .guessNo: .unmetered
        case .unknown: .unknown
        }
    }

    /// NetworkManager's own word for the value (`yes`, `no`, `guess-yes`, `guess-no`, `unknown`),
    /// as `nmcli` shows it: the evidence a status line quotes, e.g. `Metered=guess-yes`.
    public var description: String {
        switch self {
        case .unknown: "unknown"
        case .yes: "yes"
        case .no: "no"
        case .guessYes: "guess-yes"
        case .guessNo: "guess-no"
        }
    }
}
