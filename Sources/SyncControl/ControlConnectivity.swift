import ConnectivityPolicy
import Foundation

/// Why feeds cannot reach their hosts, as carried on the wire (Varlink enum values cannot hold
/// dashes): the offline reasons (no usable path) and the limited ones (a path, but no answer
/// above it).
public enum ControlOfflineReason: String, Sendable, Hashable, Codable, CustomStringConvertible {
    /// No link that routes the host has carrier.
    case noCarrier = "no_carrier"
    /// Links have carrier, but none holds a usable address of the family.
    case noAddress = "no_address"
    /// No route to the host through a usable link.
    case noRoute = "no_route"
    /// A reject route or policy rule refuses the host.
    case blocked
    /// Limited: the host name does not resolve.
    case dnsFailed = "dns_failed"
    /// Limited: a captive portal answers in place of the internet.
    case portal
    /// Limited: the route exists but the server does not answer.
    case serverUnreachable = "server_unreachable"
    /// syncd has not seen the network tables yet.
    case unknown

    /// The wire form of an offline reason of the policy.
    public init(_ reason: OfflineReason) {
        switch reason {
        case .noCarrier: self = .noCarrier
        case .noAddress: self = .noAddress
        case .noRoute: self = .noRoute
        case .blocked: self = .blocked
        }
    }

    /// The wire form of a limited reason of the policy.
    public init(_ reason: LimitedReason) {
        switch reason {
        case .dnsFailed: self = .dnsFailed
        case .portal: self = .portal
        case .serverUnreachable: self = .serverUnreachable
        }
    }

    /// The wire form of either rung's reason.
    public init(_ problem: ConnectivityProblem) {
        switch problem {
        case .offline(let reason): self.init(reason)
        case .limited(let reason): self.init(reason)
        }
    }

    /// The policy's reason this stands for; `nil` for ``unknown``.
    public var problem: ConnectivityProblem? {
        switch self {
        case .noCarrier: .offline(.noCarrier)
        case .noAddress: .offline(.noAddress)
        case .noRoute: .offline(.noRoute)
        case .blocked: .offline(.blocked)
        case .dnsFailed: .limited(.dnsFailed)
        case .portal: .limited(.portal)
        case .serverUnreachable: .limited(.serverUnreachable)
        case .unknown: nil
        }
    }

    /// A reason of the limited rung.
    public var isLimited: Bool { self == .dnsFailed || self == .portal || self == .serverUnreachable }

    /// The reason in words, e.g. "no carrier", as syncctl shows it: the policy's own words.
    public var description: String { problem?.description ?? "not yet known" }

    /// How far from reachable: no carrier is the furthest, so it is named first.
    var severity: Int {
        switch self {
        case .noCarrier: 7
        case .noAddress: 6
        case .noRoute: 5
        case .blocked: 4
        case .dnsFailed: 3
        case .portal: 2
        case .serverUnreachable: 1
        case .unknown: 0
        }
    }
}

/// Connectivity as syncd sees it, a ladder: online through a link; limited (routed through a
/// link, but the name does not resolve, a portal intercepts, or the server does not answer) with
/// the evidence; or offline with a reason.
public enum ControlConnectivity: Sendable, Hashable, CustomStringConvertible {
    /// Reachable through `link` over `family`, since `since` when known; `cost` when something
    /// says what the link costs.
    case online(link: String, family: AddressFamily, since: Date?, cost: LinkCostAssessment? = nil)
    /// `detail` is the evidence: the name and the resolver's words, the portal's URL, or the
    /// server and its failure.
    case limited(reason: ControlOfflineReason, detail: String, link: String?, family: AddressFamily?, since: Date?)
    /// Not reachable, for `reason`, since `since` when known.
    case offline(reason: ControlOfflineReason, since: Date?)

    /// Maps a policy verdict; `since` is when the verdict last changed between online and not.
    public init(_ verdict: Verdict, since: Date?) {
        switch verdict {
        case .online(let path):
            self = .online(link: path.link, family: path.family, since: since, cost: path.cost.known)
        case .limited(let limitation):
            self = .limited(
                reason: ControlOfflineReason(limitation.reason), detail: limitation.detail,
                link: limitation.path?.link, family: limitation.path?.family, since: since
            )
        case .offline(let reason): self = .offline(reason: ControlOfflineReason(reason), since: since)
        }
    }

    /// Whether this is `online`.
    public var isOnline: Bool {
        if case .online = self { return true }
        return false
    }

    /// Why the host cannot be used, limited or offline; `nil` online.
    public var reason: ControlOfflineReason? {
        switch self {
        case .online: nil
        case .limited(let reason, _, _, _, _), .offline(let reason, _): reason
        }
    }

    /// When it last changed between reachable and not, when known.
    public var since: Date? {
        switch self {
        case .online(_, _, let since, _), .offline(_, let since), .limited(_, _, _, _, let since): since
        }
    }

    /// `online via eth0 (ipv4)`, `online via wwan0 (ipv4, metered, guessed from the link type)`,
    /// `limited (captive portal: http://…) via eth0`, `offline (no route to host)`.
    public var description: String {
        switch self {
        case .online(let link, let family, _, let cost):
            "online via \(link) (\(family.rawValue)" + (cost.map { ", \($0.cost), \($0.source)" } ?? "") + ")"
        case .limited(let reason, let detail, let link, _, _): "limited (\(reason): \(detail))" + (link.map { " via \($0)" } ?? "")
        case .offline(let reason, _): "offline (\(reason))"
        }
    }
}

extension ControlConnectivity: Codable {
    private enum CodingKeys: String, CodingKey { case state, link, family, reason, detail, since, cost }
    private enum State: String, Codable { case online, limited, offline }

    /// Decodes the wire form: `state` with `link`, `family`, `reason`, `detail`, `since` and `cost`.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let since = try container.decodeIfPresent(Date.self, forKey: .since)
        switch try container.decode(State.self, forKey: .state) {
        case .online:
            self = .online(
                link: try container.decode(String.self, forKey: .link),
                family: try container.decodeIfPresent(AddressFamily.self, forKey: .family) ?? .ipv4,
                since: since,
                cost: try container.decodeIfPresent(LinkCostAssessment.self, forKey: .cost)
            )
        case .limited:
            self = .limited(
                reason: try container.decodeIfPresent(ControlOfflineReason.self, forKey: .reason) ?? .unknown,
                detail: try container.decodeIfPresent(String.self, forKey: .detail) ?? "",
                link: try container.decodeIfPresent(String.self, forKey: .link),
                family: try container.decodeIfPresent(AddressFamily.self, forKey: .family),
                since: since
            )
        case .offline:
            self = .offline(reason: try container.decodeIfPresent(ControlOfflineReason.self, forKey: .reason) ?? .unknown, since: since)
        }
    }

    /// Encodes the wire form the interface describes.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        switch self {
        case .online(let link, let family, let since, let cost):
            try container.encode(State.online, forKey: .state)
            try container.encode(link, forKey: .link)
            try container.encode(family, forKey: .family)
            try container.encodeIfPresent(since, forKey: .since)
            try container.encodeIfPresent(cost, forKey: .cost)
        case .limited(let reason, let detail, let link, let family, let since):
            try container.encode(State.limited, forKey: .state)
            try container.encode(reason, forKey: .reason)
            try container.encode(detail, forKey: .detail)
            try container.encodeIfPresent(link, forKey: .link)
            try container.encodeIfPresent(family, forKey: .family)
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
    /// A sentence for the user: what is wrong and, for a limited network, what to do.
    public var message: String
    /// The feeds it applies to, when not every feed (`nil` on a single feed's own banner).
    public var feeds: [String]?
    /// The evidence of a limited reason: the portal's URL, the name that did not resolve, the
    /// server and its failure.
    public var detail: String?

    /// A banner for `reason` since `since`; `message` is computed from the reason when `nil`.
    public init(reason: ControlOfflineReason, since: Date, message: String? = nil, feeds: [String]? = nil, detail: String? = nil) {
        self.reason = reason
        self.since = since
        self.feeds = feeds
        self.detail = detail
        let scope = feeds.flatMap { $0.isEmpty ? nil : " for " + $0.joined(separator: ", ") } ?? ""
        if let message {
            self.message = message
        } else if reason.isLimited, let detail {
            // A limited network has something the user can do, or at least someone to ask.
            switch reason {
            case .portal:
                self.message = "Sign in to the network at \(detail)\(scope): syncing is paused until the network lets it through."
            case .dnsFailed:
                self.message = "Can't resolve \(detail)\(scope): syncing is paused and resumes when the name resolves."
            default:
                self.message = "Can't reach \(detail)\(scope): syncing is paused and resumes when the server answers."
            }
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
        let affected = feeds.compactMap { feed -> (name: String, connectivity: ControlConnectivity)? in
            guard let connectivity = feed.connectivity, !connectivity.isOnline else { return nil }
            return (feed.name, connectivity)
        }
        guard let worst = affected.max(by: { ($0.connectivity.reason?.severity ?? 0) < ($1.connectivity.reason?.severity ?? 0) }),
              let reason = worst.connectivity.reason
        else { return nil }
        var detail: String?
        if case .limited(_, let evidence, _, _, _) = worst.connectivity { detail = evidence }
        let since = affected.compactMap(\.connectivity.since).min() ?? Date()
        self.init(reason: reason, since: since, feeds: affected.count == feeds.count ? nil : affected.map(\.name), detail: detail)
    }
}

/// The feed hosts' reachability summed over the feeds: what the daemon's top line says.
///
/// Each feed follows the verdict for its own host, so this is a count of those verdicts, not a
/// verdict of its own: with only a route to the feed host the feeds are online though the
/// internet at large is not, and a blackhole to one host takes one feed offline, not all.
public struct ControlConnectivitySummary: Sendable, Hashable, Codable, CustomStringConvertible {
    /// How many feeds reach their hosts.
    public enum State: String, Sendable, Hashable, Codable {
        /// Every feed reaches its host.
        case online
        /// Some feeds do, some do not.
        case partial
        /// No feed reaches its host, and some are limited (routed, but no answer above the route).
        case limited
        /// No feed reaches its host, and none is routed.
        case offline
        /// No verdict yet, or no feeds.
        case unknown
    }

    /// The summary in one word.
    public var state: State
    /// Feeds in all.
    public var feeds: Int
    /// Feeds that cannot reach their host (offline or limited).
    public var offline: Int
    /// Of those, the feeds whose host is routed but does not answer above the route.
    public var limited: Int
    /// Why, for those: each reason once, the furthest from reachable first.
    public var reasons: [ControlOfflineReason]
    /// The one link every reachable feed leaves through, when there is one.
    public var link: String?
    /// Online: since the last feed came online. Otherwise: since the first feed went offline.
    public var since: Date?

    /// A summary with the given counts.
    public init(state: State, feeds: Int, offline: Int = 0, limited: Int = 0, reasons: [ControlOfflineReason] = [], link: String? = nil, since: Date? = nil) {
        self.state = state
        self.feeds = feeds
        self.offline = offline
        self.limited = limited
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
            case .online(let link, _, let since, _)?: online.append((link, since))
            case .offline(let reason, let since)?, .limited(let reason, _, _, _, let since)?: offline.append((reason, since))
            case nil: break
            }
        }
        let limited = offline.filter(\.reason.isLimited).count
        let state: State
        if feeds.isEmpty || online.count + offline.count < feeds.count && offline.isEmpty {
            state = .unknown
        } else if offline.isEmpty {
            state = .online
        } else if online.isEmpty && offline.count == feeds.count {
            state = limited > 0 ? .limited : .offline
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
            limited: limited,
            reasons: reasons,
            link: links.count == 1 ? links.first : nil,
            since: offline.isEmpty ? online.compactMap(\.since).max() : offline.compactMap(\.since).min()
        )
    }

    /// Every feed reaches its host.
    public var isOnline: Bool { state == .online }

    /// How the feeds that cannot reach their host are described: offline, limited, or both.
    public var unreachableWord: String {
        limited == 0 ? "offline" : limited == offline ? "limited" : "unreachable"
    }

    /// How a status line is written.
    public enum LineStyle: Sendable {
        /// A few words for a one-line status (`STATUS=`, the Varlink summary's text).
        case compact
        /// With the feed counts, for a table (`syncctl status`'s State row).
        case counted
    }

    /// The one status line of the feeds' connectivity, in `style`; `paint` colours the state's
    /// word (the identity for plain text).
    ///
    /// Compact: `online via eth0`, `1 of 2 feeds offline (no route to host)`, `offline (no
    /// carrier)`. Counted: `online via eth0 (2 of 2 feeds reachable)`, `partial: 1 of 2 feeds
    /// limited (captive portal)`, `offline: 2 of 2 feeds (no carrier)`.
    public func line(_ style: LineStyle, paint: (String) -> String = { $0 }) -> String {
        let why = reasons.map(\.description).joined(separator: ", ")
        let count = "\(feeds) feed\(feeds == 1 ? "" : "s")"
        switch (state, style) {
        case (.online, .compact):
            return paint("online") + (link.map { " via \($0)" } ?? "")
        case (.online, .counted):
            return paint("online") + (link.map { " via \($0)" } ?? "") + " (\(feeds) of \(count) reachable)"
        case (.offline, .compact), (.limited, .compact):
            return paint(state.rawValue) + " (\(why))"
        case (.offline, .counted), (.limited, .counted):
            return paint(state.rawValue) + ": \(offline) of \(count) (\(why))"
        case (.partial, .compact):
            return "\(offline) of \(count) " + paint(unreachableWord) + " (\(why))"
        case (.partial, .counted):
            return paint("partial") + ": \(offline) of \(count) \(unreachableWord) (\(why))"
        case (.unknown, _):
            return paint(feeds == 0 ? "no feeds" : "not yet known")
        }
    }

    /// The compact ``line(_:paint:)``.
    public var description: String { line(.compact) }
}
