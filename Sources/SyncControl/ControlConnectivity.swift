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

    /// Maps a feed machine's offline code (`no-carrier`, `no-route`, …); an unknown code is `.unknown`.
    public init(code: String) {
        self = ControlOfflineReason(rawValue: code.replacingOccurrences(of: "-", with: "_")) ?? .unknown
    }

    public var description: String {
        switch self {
        case .noCarrier: "no carrier"
        case .noAddress: "no address"
        case .noRoute: "no route to host"
        case .unknown: "not yet known"
        }
    }

    /// How far from reachable: no carrier is the furthest, so it is named first.
    var severity: Int {
        switch self {
        case .noCarrier: 3
        case .noAddress: 2
        case .noRoute: 1
        case .unknown: 0
        }
    }
}

/// Connectivity as syncd sees it: online through a link, or offline with a reason.
public enum ControlConnectivity: Sendable, Hashable, CustomStringConvertible {
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
    /// `online via eth0 (ipv4)`, `offline (no route to host)`.
    public var description: String {
        switch self {
        case .online(let link, let family, _): "online via \(link) (\(family.rawValue))"
        case .offline(let reason, _): "offline (\(reason))"
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

/// The banner a client shows while feeds cannot reach their hosts.
public struct ControlOfflineBanner: Sendable, Hashable, Codable {
    /// The worst reason among the feeds it applies to.
    public var reason: ControlOfflineReason
    /// When the first of them lost its host.
    public var since: Date
    /// A sentence for the user.
    public var message: String
    /// The feeds it applies to, when not every feed (`nil` on a single feed's own banner).
    public var feeds: [String]?

    public init(reason: ControlOfflineReason, since: Date, message: String? = nil, feeds: [String]? = nil) {
        self.reason = reason
        self.since = since
        self.feeds = feeds
        if let message {
            self.message = message
        } else if let feeds, !feeds.isEmpty {
            let names = feeds.joined(separator: ", ")
            self.message = "Offline (\(reason)) for \(names): \(feeds.count == 1 ? "its" : "their") syncing is paused "
                + "and resumes when \(feeds.count == 1 ? "its host is" : "their hosts are") reachable again."
        } else {
            self.message = "Offline (\(reason)): syncing is paused and resumes when the connection returns."
        }
    }

    /// The daemon-wide banner for `feeds`: present while any feed cannot reach its host, naming
    /// those feeds unless it is all of them.
    public init?(feeds: [ControlFeed]) {
        let offline = feeds.compactMap { feed -> (name: String, reason: ControlOfflineReason, since: Date?)? in
            guard case .offline(let reason, let since)? = feed.connectivity else { return nil }
            return (feed.name, reason, since)
        }
        guard let worst = offline.map(\.reason).max(by: { $0.severity < $1.severity }) else { return nil }
        let since = offline.compactMap(\.since).min() ?? Date()
        self.init(reason: worst, since: since, feeds: offline.count == feeds.count ? nil : offline.map(\.name))
    }
}

/// The feed hosts' reachability summed over the feeds: what the daemon's top line says.
///
/// Each feed follows the verdict for its own host, so this is a count of those verdicts, not a
/// verdict of its own: with only a route to the feed host the feeds are online though the
/// internet at large is not, and a blackhole to one host takes one feed offline, not all.
public struct ControlConnectivitySummary: Sendable, Hashable, Codable, CustomStringConvertible {
    public enum State: String, Sendable, Hashable, Codable {
        /// Every feed reaches its host.
        case online
        /// Some feeds do, some do not.
        case partial
        /// No feed reaches its host.
        case offline
        /// No verdict yet, or no feeds.
        case unknown
    }

    public var state: State
    /// Feeds in all.
    public var feeds: Int
    /// Feeds that cannot reach their host.
    public var offline: Int
    /// Why, for those: each reason once, the furthest from reachable first.
    public var reasons: [ControlOfflineReason]
    /// The one link every reachable feed leaves through, when there is one.
    public var link: String?
    /// Online: since the last feed came online. Otherwise: since the first feed went offline.
    public var since: Date?

    public init(state: State, feeds: Int, offline: Int = 0, reasons: [ControlOfflineReason] = [], link: String? = nil, since: Date? = nil) {
        self.state = state
        self.feeds = feeds
        self.offline = offline
        self.reasons = reasons
        self.link = link
        self.since = since
    }

    /// Sums the feeds' own connectivity.
    public init(feeds: [ControlFeed]) {
        var online: [(link: String, since: Date?)] = []
        var offline: [(reason: ControlOfflineReason, since: Date?)] = []
        for feed in feeds {
            switch feed.connectivity {
            case .online(let link, _, let since)?: online.append((link, since))
            case .offline(let reason, let since)?: offline.append((reason, since))
            case nil: break
            }
        }
        let state: State
        if feeds.isEmpty || online.count + offline.count < feeds.count && offline.isEmpty {
            state = .unknown
        } else if offline.isEmpty {
            state = .online
        } else if online.isEmpty && offline.count == feeds.count {
            state = .offline
        } else {
            state = .partial
        }
        var reasons: [ControlOfflineReason] = []
        for reason in offline.map(\.reason).sorted(by: { $0.severity > $1.severity }) where !reasons.contains(reason) {
            reasons.append(reason)
        }
        let links = Set(online.map(\.link))
        self.init(
            state: state,
            feeds: feeds.count,
            offline: offline.count,
            reasons: reasons,
            link: links.count == 1 ? links.first : nil,
            since: offline.isEmpty ? online.compactMap(\.since).max() : offline.compactMap(\.since).min()
        )
    }

    /// Every feed reaches its host.
    public var isOnline: Bool { state == .online }

    /// `online via eth0`, `1 of 2 feeds offline (no route to host)`, `offline (no carrier)`.
    public var description: String {
        let why = reasons.map(\.description).joined(separator: ", ")
        switch state {
        case .online:
            return "online" + (link.map { " via \($0)" } ?? "")
        case .offline:
            return "offline (\(why))"
        case .partial:
            return "\(offline) of \(feeds) feed\(feeds == 1 ? "" : "s") offline (\(why))"
        case .unknown:
            return feeds == 0 ? "no feeds" : "not yet known"
        }
    }
}
