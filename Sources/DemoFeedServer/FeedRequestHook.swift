import NIOCore

/// The extension point of ``DemoFeedServer``: something that sees every feed request and may
/// delay it, answer it otherwise, or act on its connection, and may add `/admin/…` endpoints.
///
/// The demo server has none. Development tooling plugs in here: the tests' fault injection
/// (`SyncdTesting.FaultInjector`) answers with errors, broken bodies, stalls and resets through
/// it. Every requirement has a default that does nothing, so a hook implements only what it uses.
///
/// The server calls, for one feed request, in this order: ``validate(parameters:)`` as it reads
/// the query (before the bearer token is checked); then, for a request that passed both,
/// ``intervention(for:)``, whose answer is recorded in the request log
/// (``RequestRecord/intervention``) and carried out.
public protocol FeedRequestHook: Sendable {
    /// Query parameters the hook reads. The server leaves them out of the `Link` URLs it writes,
    /// so they apply to the one request that carries them, not to the pages it links to.
    var queryParameters: Set<String> { get }

    /// Checks a feed request's query parameters; an error is the client's, answered with 400
    /// and the error's description, and the request is logged without an intervention.
    func validate(parameters: [String: String]) throws(DemoFeedServerError)

    /// What to do with one feed request that passed validation and authorization; `nil` to
    /// serve it as usual.
    func intervention(for request: FeedRequest) async -> FeedIntervention?

    /// More endpoints under `/admin/`, which, as the server's own, answer loopback peers only.
    func adminRoutes() -> [AdminRoute]

    /// Requests the hook holds right now (their connections open, no answer yet): the
    /// `stalled` count of `GET /admin/feeds`.
    func heldRequestCount() async -> Int

    /// The server is stopping: release every request held, now and later, so its graceful
    /// shutdown, which waits for the requests in flight, can end.
    func serverStopping() async
}

extension FeedRequestHook {
    /// None.
    public var queryParameters: Set<String> { [] }
    /// Accepts everything.
    public func validate(parameters: [String: String]) throws(DemoFeedServerError) {}
    /// Serves every request as usual.
    public func intervention(for request: FeedRequest) async -> FeedIntervention? { nil }
    /// None.
    public func adminRoutes() -> [AdminRoute] { [] }
    /// None held.
    public func heldRequestCount() async -> Int { 0 }
    /// Nothing to release.
    public func serverStopping() async {}
}

/// One feed request as a ``FeedRequestHook`` sees it.
public struct FeedRequest: Sendable, Hashable {
    /// The feed requested.
    public var feed: String
    /// Which way the request pages.
    public var kind: RequestKind
    /// The query parameters, decoded (the last of a repeated one).
    public var parameters: [String: String]

    /// A request to `feed`, paging `kind`, with these parameters.
    public init(feed: String, kind: RequestKind, parameters: [String: String]) {
        self.feed = feed
        self.kind = kind
        self.parameters = parameters
    }
}

/// What a ``FeedRequestHook`` does to one feed request: a pause, then an answer of its own, an
/// act on the connection, or the page with another body.
public struct FeedIntervention: Sendable {
    /// Names the intervention in the request log (``RequestRecord/intervention``) and in the
    /// `fault` field of `GET /admin/feeds/{name}/requests`.
    public var label: String
    /// How long the server waits before it does anything else (after the configured latency).
    public var delay: Duration
    /// What the server does then.
    public var action: Action

    /// What the server does with the request after the delay.
    public enum Action: Sendable {
        /// Serve the page as usual (the delay was the whole intervention).
        case servePage
        /// Answer with this status, these header fields and this body, sent as
        /// `application/json`, instead of the page.
        case respond(status: Int, headers: [String: String], body: [UInt8])
        /// Send nothing: hand the connection to the closure (to reset, hold or close it); the
        /// server writes no response on it afterwards.
        case abandon(@Sendable (any Channel) async -> Void)
        /// Answer 200 with the page's `Link` header, but send what the closure makes of the
        /// page's body (its JSON array, neither compressed nor in another format).
        case replacePageBody(@Sendable ([UInt8]) -> PageDelivery)
    }

    /// An intervention named `label`: wait `delay`, then `action`.
    public init(label: String, delay: Duration = .zero, action: Action) {
        self.label = label
        self.delay = delay
        self.action = action
    }
}

/// How the body of a page answered through ``FeedIntervention/Action/replacePageBody(_:)`` is sent.
public enum PageDelivery: Sendable {
    /// All of it at once, with a `Content-Length`.
    case whole([UInt8])
    /// In writes of 64 KiB, with a `Content-Length` when `declaringLength`, else chunked.
    case streamed([UInt8], declaringLength: Bool)
    /// A `Content-Length` for all of it, the first `sending` bytes, then the connection handed to
    /// `then` (to reset, hold or close it); the rest is never sent.
    case partial([UInt8], sending: Int, then: @Sendable (any Channel) async -> Void)
}

/// An endpoint a ``FeedRequestHook`` adds under `/admin/`.
public struct AdminRoute: Sendable {
    /// The HTTP method it answers.
    public enum Method: Sendable, Hashable {
        /// `GET`.
        case get
        /// `POST`.
        case post
        /// `DELETE`.
        case delete
    }

    /// The HTTP method it answers.
    public var method: Method
    /// The path below `/admin/`, e.g. `faults`.
    public var path: String
    /// Answers a request from its query parameters with a JSON document (sent with status
    /// 200); ``DemoFeedServerError/unknownFeed(_:)`` is answered with 404, any other error of
    /// the server's with 400, both with the error's description.
    public var handle: @Sendable ([String: String]) async throws(DemoFeedServerError) -> String

    /// `method /admin/path`, answered by `handle`.
    public init(_ method: Method, _ path: String, handle: @escaping @Sendable ([String: String]) async throws(DemoFeedServerError) -> String) {
        self.method = method
        self.path = path
        self.handle = handle
    }

    /// The positive integer in `parameters[key]`, `value` when it is absent; anything else is
    /// the client's error.
    public static func positiveInteger(_ parameters: [String: String], _ key: String, default value: Int) throws(DemoFeedServerError) -> Int {
        guard let raw = parameters[key] else { return value }
        guard let parsed = Int(raw), parsed > 0 else {
            throw .invalidArgument("\(key) must be a positive integer, got '\(raw)'")
        }
        return parsed
    }

    /// `value` as a JSON string literal (RFC 8259 escapes), for the documents routes answer with.
    public static func json(string value: String) -> String { jsonString(value) }
}
