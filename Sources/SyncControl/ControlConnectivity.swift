import ConnectivityPolicy
import Foundation

/// Why feeds are unreachable, as carried on the wire (Varlink enum values cannot hold dashes).
public enum ControlOfflineReason: String, Sendable, Hashable, Codable, CustomStringConvertible {
    case noCarrier = "no_carrier"
    case noAddress = "no_address"
    case noRoute = "no_route"
    /// syncd has not seen the network tables yet.
    case unknown

    public init(_ reason: OfflineReason) {
        switch reason {
        case .noCarrier: self = .noCarrier
        case .noAddress: self = .noAddress
        case .noRoute: self = .noRoute
        }
    }

    public var description: String {
        switch self {
        case .noCarrier: "no carrier"
        case .noAddress: "no address"
        case .noRoute: "no route to host"
        case .unknown: "not yet known"
        }
    }
}

/// Connectivity as syncd sees it: online through a link, or offline with a reason.
public enum ControlConnectivity: Sendable, Hashable {
    case online(link: String, family: AddressFamily, since: Date?)
    case offline(reason: ControlOfflineReason, since: Date?)

    /// Maps a policy verdict; `since` is when the verdict last changed between online and offline.
    public init(_ verdict: Verdict, since: Date?) {
        switch verdict {
        case .online(let path): self = .online(link: path.link, family: path.family, since: since)
        case .offline(let reason): self = .offline(reason: ControlOfflineReason(reason), since: since)
        }
    }

    public var isOnline: Bool {
        if case .online = self { return true }
        return false
    }

    public var since: Date? {
        switch self {
        case .online(_, _, let since), .offline(_, let since): since
        }
    }
}

extension ControlConnectivity: Codable {
    private enum CodingKeys: String, CodingKey { case state, link, family, reason, since }
    private enum State: String, Codable { case online, offline }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let since = try container.decodeIfPresent(Date.self, forKey: .since)
        switch try container.decode(State.self, forKey: .state) {
        case .online:
            self = .online(
                link: try container.decode(String.self, forKey: .link),
                family: try container.decodeIfPresent(AddressFamily.self, forKey: .family) ?? .ipv4,
                since: since
            )
        case .offline:
            self = .offline(reason: try container.decodeIfPresent(ControlOfflineReason.self, forKey: .reason) ?? .unknown, since: since)
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        switch self {
        case .online(let link, let family, let since):
            try container.encode(State.online, forKey: .state)
            try container.encode(link, forKey: .link)
            try container.encode(family, forKey: .family)
            try container.encodeIfPresent(since, forKey: .since)
        case .offline(let reason, let since):
            try container.encode(State.offline, forKey: .state)
            try container.encode(reason, forKey: .reason)
            try container.encodeIfPresent(since, forKey: .since)
        }
    }
}

/// The banner a client shows while offline.
public struct ControlOfflineBanner: Sendable, Hashable, Codable {
    public var reason: ControlOfflineReason
    public var since: Date
    public var message: String

    public init(reason: ControlOfflineReason, since: Date, message: String? = nil) {
        self.reason = reason
        self.since = since
        self.message = message ?? "Offline (\(reason)): syncing is paused and resumes when the connection returns."
    }
}
