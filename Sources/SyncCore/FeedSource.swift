import Foundation

/// One record of a feed, stored exactly as the server sent it.
///
/// Two items are equal when their ids have the same bytes and their payloads are equal: ids that
/// are merely canonically equivalent (NFC and NFD spellings) are different items.
public struct FeedItem: Sendable, Hashable, Codable {
    /// The item's identifier (servers such as Mastodon and GitHub use strings).
    public var id: String
    /// The item's JSON object, byte for byte as received.
    public var payload: Data
    /// The item's version or modification time as the server states it (the feed descriptor's
    /// `updated`), when the feed has one: a stored item is replaced by a fetched one only when
    /// the fetched version is newer (``isNewer(_:than:)``). Derived from the payload, so not
    /// part of equality.
    public var version: String?

    /// An item with its server-given id, its JSON object as received and its version, if any.
    public init(id: String, payload: Data, version: String? = nil) {
        self.id = id
        self.payload = payload
        self.version = version
    }

    /// Whether version `fetched` is newer than `stored`: as numbers when both are integers (a
    /// revision, a Unix time), else as text, which orders RFC 3339 times written the same way
    /// (the way one server writes them). A missing version is never newer, and anything is newer
    /// than a missing one.
    public static func isNewer(_ fetched: String?, than stored: String?) -> Bool {
        guard let fetched else { return false }
        guard let stored else { return true }
        if let a = Int64(fetched), let b = Int64(stored) { return a > b }
        return fetched > stored
    }

    /// Equal when ids (byte for byte, see ``ExactID``) and payloads are.
    public static func == (lhs: FeedItem, rhs: FeedItem) -> Bool {
        lhs.id.isExactly(rhs.id) && lhs.payload == rhs.payload
    }

    /// Hashes what ``==`` compares.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(ExactID(id))
        hasher.combine(payload)
    }
}

/// One page of a feed as returned by a ``FeedSource``.
///
/// Items are newest first, as servers page them.
public struct FeedPage: Sendable, Hashable {
    /// The page's items, newest first.
    public var items: [FeedItem]
    /// Where to continue towards older items; `nil` when the feed's end has been reached.
    public var olderCursor: String?
    /// Where to continue towards newer items; `nil` when the server gave none, in which case
    /// the previous newer cursor stays valid.
    public var newerCursor: String?
    /// For page-numbered feeds, whose newer pages cannot start just above a stored item: where
    /// the items just older than this page continue (its `next` link). When a newer page shares
    /// no item with the store, the items between it and the stored ones are a gap, which the
    /// store records with this cursor and the machine loads until a page meets a stored item.
    /// `nil` for cursor feeds (`min_id`), whose newer pages join the stored items by construction.
    public var continuation: String?
    /// The older cursor names this page's last item (a keyset cursor such as `max_id` or
    /// `starting_after`): the older page starts right after that item whatever changed above it,
    /// so a revalidation joins the two pages without reading this one again. `false` (the safe
    /// answer) for positional cursors (page numbers, offsets) and opaque ones.
    public var olderContinuesAfterLastItem: Bool
    /// Ids the page says the server deleted (Atom's `at:deleted-entry`, items carrying the feed's
    /// deletion mark): a commit of the page removes those it stores, at once.
    public var deletedIDs: [String]

    /// A page with its cursors; `continuation` carries a page feed's next page within one load.
    public init(
        items: [FeedItem], olderCursor: String?, newerCursor: String?, continuation: String? = nil,
        olderContinuesAfterLastItem: Bool = false, deletedIDs: [String] = []
    ) {
        self.items = items
        self.olderCursor = olderCursor
        self.newerCursor = newerCursor
        self.continuation = continuation
        self.olderContinuesAfterLastItem = olderContinuesAfterLastItem
        self.deletedIDs = deletedIDs
    }
}

/// A failed feed request, classified for the retry policy.
public struct FeedError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What kind of failure, which decides retrying and what the user is told.
    public enum Kind: Sendable, Hashable, Codable {
        /// Could not connect, connection reset, DNS failure.
        case transport
        /// Connect or request timed out.
        case timeout
        /// The server answered with a non-success status.
        case httpStatus(Int)
        /// The body was not a valid page (bad JSON, missing id, truncated).
        case malformed
        /// The body exceeded the configured size limit.
        case tooLarge
        /// The TLS handshake failed on the server's certificate (not trusted, wrong host name).
        case tls
        /// Any other failure.
        case other
    }

    /// What kind of failure it was.
    public var kind: Kind
    /// A human-readable explanation, safe to show and log (never contains credentials).
    public var message: String
    /// The server's `Retry-After`, as a delay from when the response arrived.
    public var retryAfter: Duration?
    /// No connection could be made and nothing answered (a connect timeout, host or network
    /// unreachable): evidence that the server, not the request, is the problem. A refused
    /// connection or any HTTP answer is not.
    public var serverDidNotAnswer: Bool
    /// The answer will stay the same until someone acts, whatever its kind: a login page served
    /// in place of the feed. Such a failure is not retried automatically (``isPermanent``).
    public var needsAction: Bool

    /// A failure of `kind`, explained by `message`; `retryAfter` is the server's `Retry-After`.
    public init(_ kind: Kind, _ message: String, retryAfter: Duration? = nil, serverDidNotAnswer: Bool = false, needsAction: Bool = false) {
        self.kind = kind
        self.message = message
        self.retryAfter = retryAfter
        self.serverDidNotAnswer = serverDidNotAnswer
        self.needsAction = needsAction
    }

    /// Errors that repeating the same request will not fix: 4xx other than 408 and 429, redirects
    /// that are not followed (a feed that moved for good, another origin), TLS failures
    /// (an untrusted certificate, a host name mismatch) until the configuration changes, and
    /// answers that ``needsAction``.
    /// They are retried only on request, never automatically.
    public var isPermanent: Bool {
        if needsAction { return true }
        switch kind {
        case .httpStatus(let code):
            return (300..<400).contains(code) || ((400..<500).contains(code) && code != 408 && code != 429)
        case .tls:
            return true
        default:
            return false
        }
    }

    /// The message.
    public var description: String { message }

    /// Wraps any error thrown by a source into a `FeedError`.
    public init(wrapping error: any Error) {
        if let feedError = error as? FeedError {
            self = feedError
        } else {
            self.init(.other, String(describing: error))
        }
    }
}

/// A remote, paginated, newest-first feed.
///
/// Implementations: `HTTPFeedSource` (RFC 8288 Link headers), test doubles, or any client's own.
/// Calls may be cancelled (going offline cancels in-flight requests); an implementation should
/// stop promptly and throw `CancellationError`.
public protocol FeedSource: Sendable {
    /// The newest page: the first load.
    func fetchInitial() async throws -> FeedPage
    /// The page of items just older than `cursor`.
    func fetchOlder(cursor: String) async throws -> FeedPage
    /// The page of items immediately newer than `cursor` (no gap); an empty page means caught up.
    func fetchNewer(cursor: String) async throws -> FeedPage
    /// ``fetchOlder(cursor:)``, calling `olderCursorKnown` with the page's older cursor as soon as
    /// it is known (an HTTP source knows it from the response's headers, before the body is read
    /// and parsed), so backfill can ask for the next page while this one is still coming in.
    ///
    /// The page returned carries that same older cursor. `olderCursorKnown` is called at most
    /// once, and may not be called at all when the request fails.
    func fetchOlder(cursor: String, olderCursorKnown: @escaping @Sendable (String?) -> Void) async throws -> FeedPage
    /// The serial executor on which this source calls `olderCursorKnown`, always, when it has one
    /// (an HTTP source: the event loop that reads its responses); `nil` when it calls it anywhere.
    ///
    /// A coordinator of this source runs its actor on that executor, so it hears of the older
    /// cursor in place, while the headers are read, and the next page's request goes out as this
    /// response ends, instead of after a hand-over queued behind the rest of the response. The
    /// promise is checked as the callback enters (`assumeIsolated`): a source that names an
    /// executor and calls `olderCursorKnown` elsewhere stops the process.
    var executor: (any SerialExecutor)? { get }
    /// Bytes received so far from the network for this source's requests, answers and failures
    /// alike, as close to what crossed the wire as the source can tell (an HTTP source: status
    /// line, headers and body before content decoding). Only grows; a coordinator charges what it
    /// grew by against the feed's ``SyncConfiguration/meteredBudget`` while the link is metered.
    var bytesReceived: Int64 { get }
    /// The source's server lists items oldest first, and its pages are handed over as such
    /// pages are: the first load is the oldest page, nothing is older, and newer pages, each the
    /// one just after the last, are loaded at once after it until the newest
    /// (``SyncConfiguration/listsOldestFirst``). Pages still carry their items newest first.
    var listsOldestFirst: Bool { get }
}

extension FeedSource {
    /// Newest first, as most feeds are.
    public var listsOldestFirst: Bool { false }

    /// None: a coordinator of this source is an ordinary actor.
    public var executor: (any SerialExecutor)? { nil }

    /// Zero: a source that does not count never uses up a byte budget.
    public var bytesReceived: Int64 { 0 }

    /// Tells the older cursor once the whole page is in.
    public func fetchOlder(cursor: String, olderCursorKnown: @escaping @Sendable (String?) -> Void) async throws -> FeedPage {
        let page = try await fetchOlder(cursor: cursor)
        olderCursorKnown(page.olderCursor)
        return page
    }
}
