import SyncCore

/// What syncd implements to serve the `io.syncd` interface.
///
/// Permission checks, parameter validation and the wire format are done by
/// ``SyncControlServer``; a handler only answers. Throw ``SyncControlError`` for the
/// interface's own errors; anything else becomes `io.syncd.InternalError` (and is logged).
public protocol SyncControlHandler: Sendable {
    /// The current status.
    func status() async throws -> ControlStatus

    /// The current status first, then a new value whenever anything changes.
    ///
    /// A stream per call, each subscriber getting the latest value first (syncd's own handler
    /// subscribes to a broadcast of its status). The server keeps only the newest undelivered
    /// value per client, so a slow client never makes it buffer more.
    func statusUpdates() async -> AsyncStream<ControlStatus>

    /// Starts loading newer items of `feed`, or of every feed when `nil`; returns the feeds
    /// whose load was triggered (a load already running counts).
    func refresh(feed: String?) async throws -> [String]

    /// Starts loading the next older page of `feed` (or every feed).
    func loadOlder(feed: String?) async throws -> [String]

    /// Retries failed loads of `feed` (or every feed) now, skipping the backoff wait.
    func retry(feed: String?) async throws -> [String]

    /// Marks `feed` (or every feed) as seen: its new-items notice clears.
    func markSeen(feed: String?) async throws -> [String]

    /// Stored items of `feed`, newest first, after the item with id `after`, as the store holds
    /// them: the server sends each payload's bytes as they are (after checking they are one
    /// JSON object) instead of decoding and encoding it again.
    /// `limit` is already clamped to 1...``SyncControlServer/Configuration/maxItemsPerPage``.
    func items(feed: String, limit: Int, after: String?) async throws -> StoredItemPage

    /// The metrics in Prometheus's text format (`GetMetrics`).
    func metrics() async throws -> String

    /// The changes of `feed`'s stored items after `since` (from the start when `nil`), then each
    /// change as it is committed, until the consumer stops (`WatchItems`). Throw
    /// ``SyncControlError/feedNotFound(_:)`` for an unknown feed.
    func itemChanges(feed: String, since: ChangePoint?) async throws -> AsyncThrowingStream<ItemChange, any Error>
}

extension SyncControlHandler {
    /// A handler without metrics answers `GetMetrics` with NotReady.
    public func metrics() async throws -> String {
        throw SyncControlError.notReady(feed: "*", reason: "this server exports no metrics")
    }

    /// A handler without a change log answers `WatchItems` with NotReady.
    public func itemChanges(feed: String, since: ChangePoint?) async throws -> AsyncThrowingStream<ItemChange, any Error> {
        throw SyncControlError.notReady(feed: feed, reason: "this server keeps no change log")
    }
}

/// Errors of the `io.syncd` interface, on both sides of the socket.
public enum SyncControlError: Error, Sendable, Hashable, CustomStringConvertible {
    /// No feed of that name is configured.
    case feedNotFound(String)
    /// `after` does not name an item of the feed.
    case invalidCursor(String)
    /// The feed cannot do that now (e.g. load older before the first load succeeded).
    case notReady(feed: String, reason: String)
    /// The caller is neither root nor in the control group (client side only).
    case permissionDenied(method: String)
    /// syncd is not reachable (client side only).
    case unreachable(socket: String, reason: String)
    /// The socket exists but this user may not connect to it (EACCES; client side only).
    case socketAccessDenied(socket: String)
    /// Any other error reply (client side only).
    case remote(VarlinkErrorDescription)

    /// The error in words, as syncctl prints it.
    public var description: String {
        switch self {
        case .feedNotFound(let feed): "no feed named '\(feed)'"
        case .invalidCursor(let after): "'\(after)' is not an item of this feed"
        case .notReady(let feed, let reason): "feed '\(feed)' is not ready: \(reason)"
        case .permissionDenied(let method): "permission denied: \(method) needs root or membership in syncd's control group"
        case .unreachable(let socket, let reason): "syncd is not running (cannot connect to \(socket): \(reason))"
        case .socketAccessDenied(let socket): "permission denied: cannot connect to \(socket) (Permission denied); run as root or as a user allowed to use the socket"
        case .remote(let error): error.text
        }
    }
}

/// A Varlink error rendered for people, kept apart from `VarlinkError` so
/// ``SyncControlError`` needs no knowledge of the protocol module's types.
public struct VarlinkErrorDescription: Sendable, Hashable {
    /// The Varlink error name, e.g. `org.varlink.service.InvalidParameter`.
    public var name: String
    /// The error in words.
    public var text: String

    /// An error description.
    public init(name: String, text: String) {
        self.name = name
        self.text = text
    }
}
