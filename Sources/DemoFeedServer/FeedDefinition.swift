/// How one demo feed is generated and paged.
public struct FeedDefinition: Sendable, Hashable {
    /// The feed's name, used in its path (`/feeds/{name}`); letters, digits, `-`, `_` and `.`.
    public var name: String
    /// Items present when the server starts.
    public var initialCount: Int
    /// New items appended per second while the server runs (0: only on request).
    public var itemsPerSecond: Double
    /// Digits of the zero-padded ids; string order equals numeric order up to this width.
    public var idWidth: Int
    /// The JSON key that carries the id (clients configure the same key).
    public var idField: String
    /// Page size when the request gives no `limit`.
    public var defaultLimit: Int
    /// Largest `limit` honoured; larger requests are clamped, as Mastodon does.
    public var maxLimit: Int
    /// Whether `rel="next"` is left out on the page that reaches the oldest item. When `false`
    /// the server behaves like Mastodon, which always links to the next page and ends the feed
    /// with an empty page.
    public var omitNextAtEnd: Bool
    /// How pages are addressed: Mastodon's cursors, or GitHub's page numbers.
    public var pagination: Pagination

    /// The paging protocol a feed speaks.
    public enum Pagination: String, Sendable, Hashable, CaseIterable {
        /// `limit`, `max_id`/`min_id`/`since_id`, Link `next`/`prev` (Mastodon).
        case cursor
        /// `page`, `per_page`, Link `first`/`prev`/`next`/`last` (no `prev` on page 1), and an
        /// `ETag` answered with 304 on `If-None-Match` (GitHub).
        case page
    }

    /// A feed; validates the limits (1 ≤ default limit ≤ max limit).
    public init(
        name: String,
        initialCount: Int = 1000,
        itemsPerSecond: Double = 0,
        idWidth: Int = 10,
        idField: String = "id",
        defaultLimit: Int = 20,
        maxLimit: Int = 100,
        omitNextAtEnd: Bool = true,
        pagination: Pagination = .cursor
    ) {
        self.name = name
        self.initialCount = initialCount
        self.itemsPerSecond = itemsPerSecond
        self.idWidth = idWidth
        self.idField = idField
        self.defaultLimit = defaultLimit
        self.maxLimit = maxLimit
        self.omitNextAtEnd = omitNextAtEnd
        self.pagination = pagination
    }

    /// Parses `NAME[:INITIAL[:PER_SECOND[:PAGINATION]]]`, the `--feed` flag's syntax
    /// (`PAGINATION` is `cursor` or `page`).
    public init(spec: String) throws(DemoFeedServerError) {
        let parts = spec.split(separator: ":", omittingEmptySubsequences: false).map(String.init)
        guard (1...4).contains(parts.count) else {
            throw .invalidArgument("feed '\(spec)': expected NAME[:INITIAL[:PER_SECOND[:PAGINATION]]]")
        }
        self.init(name: parts[0])
        if parts.count > 1 {
            guard let count = Int(parts[1]), count >= 0 else {
                throw .invalidArgument("feed '\(spec)': INITIAL must be a non-negative integer")
            }
            initialCount = count
        }
        if parts.count > 2 {
            guard let rate = Double(parts[2]), rate >= 0, rate.isFinite else {
                throw .invalidArgument("feed '\(spec)': PER_SECOND must be a non-negative number")
            }
            itemsPerSecond = rate
        }
        if parts.count > 3 {
            guard let mode = Pagination(rawValue: parts[3]) else {
                throw .invalidArgument("feed '\(spec)': PAGINATION must be cursor or page")
            }
            pagination = mode
        }
        try validate()
    }

    /// Rejects definitions the server could not serve correctly.
    public func validate() throws(DemoFeedServerError) {
        let allowed = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.")
        guard !name.isEmpty, name.allSatisfy({ allowed.contains($0) }) else {
            throw .invalidArgument("feed name '\(name)': use letters, digits, '-', '_' or '.'")
        }
        guard initialCount >= 0, itemsPerSecond >= 0, itemsPerSecond.isFinite else {
            throw .invalidArgument("feed '\(name)': counts and rates must be non-negative")
        }
        guard (1...40).contains(idWidth) else { throw .invalidArgument("feed '\(name)': idWidth must be 1...40") }
        guard !idField.isEmpty else { throw .invalidArgument("feed '\(name)': idField must not be empty") }
        guard defaultLimit >= 1, maxLimit >= defaultLimit else {
            throw .invalidArgument("feed '\(name)': need 1 <= defaultLimit <= maxLimit")
        }
    }
}

/// Errors from configuring or running the demo feed server.
public enum DemoFeedServerError: Error, Sendable, Hashable, CustomStringConvertible {
    /// A flag, spec or parameter is invalid (the message says which).
    case invalidArgument(String)
    /// No feed has this name.
    case unknownFeed(String)
    /// The server is not running.
    case notRunning
    /// `start()` was called twice.
    case alreadyStarted
    /// The server could not bind or start (the message says why).
    case startFailed(String)

    /// The error in words, as the command line prints it.
    public var description: String {
        switch self {
        case .invalidArgument(let message): return message
        case .unknownFeed(let name): return "no feed named '\(name)'"
        case .notRunning: return "the demo feed server is not running"
        case .alreadyStarted: return "the demo feed server was already started"
        case .startFailed(let message): return "the demo feed server could not start: \(message)"
        }
    }
}
