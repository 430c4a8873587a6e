import ConnectivityPolicy
import Foundation

/// The kernel's answer as iproute2 prints it: `ip -j route get ADDRESS` run in a namespace, an
/// oracle that shares no code with the monitor (its own netlink request, its own parser).
public enum IPRouteGet: Sendable, Equatable, CustomStringConvertible {
    /// The route leaves through `device` (`lo` for a local address).
    case via(device: String, gateway: String?)
    /// The kernel refused: iproute2's message, e.g. "RTNETLINK answers: Network is unreachable".
    case refused(String)

    /// Asks `ip route get` in `namespace`.
    public static func ask(_ address: IPAddress, in namespace: NetworkNamespace) async throws -> IPRouteGet {
        do {
            let output = try await namespace.ip("-j", "route", "get", address.description)
            guard let routes = try JSONSerialization.jsonObject(with: Data(output.utf8)) as? [[String: Any]],
                  let route = routes.first, let device = route["dev"] as? String
            else { return .refused("unparseable answer: \(output)") }
            return .via(device: device, gateway: route["gateway"] as? String)
        } catch let failure as CommandFailed {
            return .refused(failure.stderr.trimmingCharacters(in: .whitespacesAndNewlines))
        }
    }

    /// Whether `verdict` (for this one address) says what the kernel says, given the links and
    /// addresses of `snapshot`: a refusal must be offline; a path through a link with carrier and
    /// a usable address of the family must be online through that link; a path through a link
    /// without them must be offline.
    public func agrees(with verdict: Verdict, for address: IPAddress, in snapshot: NetworkSnapshot) -> Bool {
        switch self {
        case .refused:
            if case .offline = verdict { return true }
            return false
        case .via(let device, _):
            if address.isLoopback || device == "lo" { return verdict.isOnline }
            guard let link = snapshot.link(named: device), link.hasCarrier,
                  snapshot.addresses.contains(where: { $0.linkIndex == link.index && $0.address.family == address.family && $0.isUsable })
            else {
                if case .offline = verdict { return true }
                return false
            }
            if case .online(let path) = verdict { return path.link == device }
            return false
        }
    }

    public var description: String {
        switch self {
        case .via(let device, let gateway): "dev \(device)" + (gateway.map { " via \($0)" } ?? "")
        case .refused(let message): message
        }
    }
}
