import Hummingbird
import Logging
import NIOCore
import ServiceLifecycle
import Synchronization
import UnixSignals

/// A reference feed server speaking the Mastodon-style Link-header protocol, for the demo and
/// the end-to-end tests.
///
/// ```swift
/// let server = try DemoFeedServer(configuration: .init(feeds: [.init(name: "home", initialCount: 5000)]))
/// let port = try await server.start()
/// // … sync from server.feedURL("home") …
/// await server.stop()
/// ```
///
/// URL layout (the same feed under two paths):
/// - `GET /feeds/{name}` and `GET /api/v1/timelines/{name}`: a page, newest first, with
///   `limit`, `max_id` (older), `min_id` (immediately newer), `since_id` (newest newer).
/// - `/admin/…` (loopback peers only): `GET feeds`, `GET feeds/{name}`, `POST feeds/{name}/items?count=N`,
///   `POST feeds/{name}/delete?ids=A,B`, `POST feeds/{name}/edit?ids=A,B`, `GET feeds/{name}/requests`,
///   `DELETE requests`, and the request hook's own (``FeedRequestHook/adminRoutes()``).
/// - `GET /health`.
///
/// A ``FeedRequestHook`` given at creation sees every feed request and may delay it, answer it
/// otherwise or act on its connection: the tests' fault injection plugs in there.
public final class DemoFeedServer: Sendable {
    /// What the server was started with.
    public let configuration: Configuration
    /// The hook every feed request goes through, if any.
    public let requestHook: (any FeedRequestHook)?
    private let state: FeedServerState
    private let logger: Logger
    private let runtime = Mutex<Runtime>(.idle)

    private enum Runtime {
        case idle
        case running(port: Int, group: ServiceGroup, task: Task<Void, any Error>)
        case stopped
    }

    /// Creates a server whose feed requests go through `hook` when one is given; nothing
    /// listens until ``start()`` or ``run(handlingSignals:onListening:)``.
    public init(
        configuration: Configuration = Configuration(), hook: (any FeedRequestHook)? = nil, logger: Logger = Logger(label: "demo-feed")
    ) throws(DemoFeedServerError) {
        try configuration.validate()
        self.configuration = configuration
        self.requestHook = hook
        self.logger = logger
        self.state = FeedServerState(feeds: configuration.feeds)
    }

    // MARK: Lifecycle

    /// Binds and starts serving in the background; returns the bound port (useful with port 0).
    @discardableResult
    public func start() async throws -> Int {
        try await launch(signals: [])
    }

    /// Serves until SIGINT or SIGTERM (when `handlingSignals`) or ``stop()``, then shuts down
    /// gracefully. `onListening` gets the bound port once the socket is listening.
    public func run(handlingSignals: Bool = true, onListening: @Sendable (Int) -> Void = { _ in }) async throws {
        let port = try await launch(signals: handlingSignals ? [.sigterm, .sigint] : [])
        onListening(port)
        let task: Task<Void, any Error>? = runtime.withLock {
            if case .running(_, _, let task) = $0 { return task }
            return nil
        }
        try await task?.value
        runtime.withLock { $0 = .stopped }
    }

    /// Stops gracefully: tells the request hook (which releases the requests it holds), stops
    /// accepting, waits for in-flight requests.
    public func stop() async {
        let running: (ServiceGroup, Task<Void, any Error>)? = runtime.withLock {
            guard case .running(_, let group, let task) = $0 else { return nil }
            $0 = .stopped
            return (group, task)
        }
        guard let (group, task) = running else { return }
        await requestHook?.serverStopping()
        await group.triggerGracefulShutdown()
        do {
            try await task.value
        } catch {
            logger.warning("demo feed server stopped with an error", metadata: ["error": "\(error)"])
        }
    }

    /// The bound port, once started.
    public var port: Int? {
        runtime.withLock {
            if case .running(let port, _, _) = $0 { return port }
            return nil
        }
    }

    /// `http://host:port`, once started.
    public var baseURL: String? {
        guard let port else { return nil }
        let host = configuration.host.contains(":") ? "[\(configuration.host)]" : configuration.host
        return "http://\(host):\(port)"
    }

    /// The URL of a feed's newest page, once started.
    public func feedURL(_ name: String, limit: Int? = nil) -> String? {
        guard let baseURL else { return nil }
        return "\(baseURL)/feeds/\(name)" + (limit.map { "?limit=\($0)" } ?? "")
    }

    private func launch(signals: [UnixSignal]) async throws -> Int {
        let alreadyStarted = runtime.withLock { state -> Bool in
            if case .idle = state { return false }
            return true
        }
        if alreadyStarted { throw DemoFeedServerError.alreadyStarted }

        let (ports, portContinuation) = AsyncStream.makeStream(of: Int.self)
        let app = Application(
            router: makeRouter(),
            configuration: .init(address: .hostname(configuration.host, port: configuration.port), serverName: "demo-feed"),
            onServerRunning: { channel in
                portContinuation.yield(channel.localAddress?.port ?? 0)
                portContinuation.finish()
            },
            logger: logger
        )
        let growth = FeedGrowthService(state: state, hook: requestHook, interval: configuration.tickInterval)
        let group = ServiceGroup(configuration: .init(
            services: [app, growth], gracefulShutdownSignals: signals, logger: logger))
        let task = Task {
            defer { portContinuation.finish() }
            try await group.run()
        }
        var iterator = ports.makeAsyncIterator()
        guard let port = await iterator.next() else {
            do {
                try await task.value
                throw DemoFeedServerError.startFailed("the server stopped before listening")
            } catch let error as DemoFeedServerError {
                throw error
            } catch {
                throw DemoFeedServerError.startFailed(String(describing: error))
            }
        }
        runtime.withLock { $0 = .running(port: port, group: group, task: task) }
        logger.info("demo feed server listening", metadata: ["host": "\(configuration.host)", "port": "\(port)"])
        return port
    }

    private func makeRouter() -> Router<FeedRequestContext> {
        let router = Router(context: FeedRequestContext.self)
        let feeds = FeedHandler(
            state: state, hook: requestHook,
            options: ServingOptions(
                gzip: configuration.gzip, latencyMilliseconds: configuration.latencyMilliseconds,
                bodyDelayMilliseconds: configuration.bodyDelayMilliseconds, bearerToken: configuration.bearerToken))
        router.get("feeds/:name") { request, context in
            try await feeds.respond(feed: context.parameters.require("name"), request: request, context: context)
        }
        router.get("api/v1/timelines/:name") { request, context in
            try await feeds.respond(feed: context.parameters.require("name"), request: request, context: context)
        }
        router.get("health") { _, _ in FeedHandler.json(.ok, Array("{\"status\":\"ok\"}\n".utf8)) }
        AdminHandler(state: state, hook: requestHook).register(on: router)
        return router
    }

    // MARK: In-process control (what the admin endpoints do)

    /// Appends `count` new items to a feed; returns its new item count.
    @discardableResult
    public func appendItems(feed: String, count: Int) async throws(DemoFeedServerError) -> Int {
        guard count >= 0 else { throw .invalidArgument("count must be non-negative") }
        return try await state.append(feed: feed, count: count)
    }

    /// Deletes the items with these ids from a feed, as a server whose users delete posts; the
    /// items below move up. Returns how many the feed had.
    @discardableResult
    public func deleteItems(feed: String, ids: [String]) async throws(DemoFeedServerError) -> Int {
        try await state.delete(feed: feed, ids: ids)
    }

    /// Edits the items with these ids in place (each becomes its next revision). Returns how many
    /// the feed had.
    @discardableResult
    public func editItems(feed: String, ids: [String]) async throws(DemoFeedServerError) -> Int {
        try await state.edit(feed: feed, ids: ids)
    }

    /// A feed's items, oldest first, exactly as served.
    public func items(feed: String) async throws(DemoFeedServerError) -> [DemoFeedItem] {
        try await state.items(feed: feed)
    }

    /// Feed requests received (every request to `/feeds/{name}`, whatever the hook did to it).
    public func requestCount(feed: String) async -> Int { await state.requestCount(feed: feed) }

    /// Feed requests received, in arrival order (the most recent 20 000 per feed).
    public func requests(feed: String) async -> [RequestRecord] { await state.requests(feed: feed) }

    /// Forgets all recorded requests.
    public func resetRequestLog() async { await state.resetRequestLog() }
}
