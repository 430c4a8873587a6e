import Foundation
import Logging
import ServiceLifecycle
import SyncCore
import Varlink

/// Serves `io.syncd` (and `org.varlink.service`) for a ``SyncControlHandler``.
///
/// A swift-service-lifecycle `Service`: ``run()`` serves until graceful shutdown or cancellation.
///
/// ```swift
/// let server = SyncControlServer(handler: daemon, configuration: .init(version: "0.1.0"), logger: logger)
/// try await withThrowingDiscardingTaskGroup { group in
///     group.addTask { try await server.run() }     // until cancelled
///     await server.waitUntilListening()
///     notify("READY=1")
/// }
/// ```
public final class SyncControlServer: Sendable, Service {
    /// Where and how the control socket listens, and its limits.
    public struct Configuration: Sendable {
        /// Used when syncd was not socket-activated.
        public var socketPath: String
        /// Group whose members may call Refresh, LoadOlder and Retry (besides root); a name or
        /// a numeric gid. `nil` or an unknown group: root only.
        public var controlGroup: String?
        /// Take the listening socket from systemd (`syncd.socket`) when one was passed.
        public var useSocketActivation: Bool
        /// Connections served at once; past this, new ones wait in the listen backlog.
        public var maxConnections: Int
        /// Largest accepted call, in bytes.
        public var maxMessageSize: Int
        /// Upper bound for `ListItems`' `limit`, which keeps replies bounded too.
        public var maxItemsPerPage: Int
        /// Used when a `ListItems` call gives no limit.
        public var defaultItemsPerPage: Int
        /// Reported by `org.varlink.service.GetInfo`.
        public var version: String

        /// syncd's bound for `ListItems`' `limit` (1 up to this), as documented in the IDL.
        public static let standardMaxItemsPerPage = 500
        /// syncd's page size when `ListItems` gives no `limit`.
        public static let standardItemsPerPage = 50
        /// Idle connections (no call running, nothing received) are closed after this.
        public var idleTimeout: Duration

        /// A configuration; the defaults are syncd's.
        public init(
            socketPath: String = SyncControlClient.defaultSocketPath,
            controlGroup: String? = "syncd",
            useSocketActivation: Bool = true,
            maxConnections: Int = 64,
            maxMessageSize: Int = 64 * 1024,
            maxItemsPerPage: Int = Configuration.standardMaxItemsPerPage,
            defaultItemsPerPage: Int = Configuration.standardItemsPerPage,
            version: String,
            idleTimeout: Duration = .seconds(60)
        ) {
            self.socketPath = socketPath
            self.controlGroup = controlGroup
            self.useSocketActivation = useSocketActivation
            self.maxConnections = maxConnections
            self.maxMessageSize = maxMessageSize
            self.maxItemsPerPage = maxItemsPerPage
            self.defaultItemsPerPage = defaultItemsPerPage
            self.version = version
            self.idleTimeout = idleTimeout
        }
    }

    private let server: VarlinkServer
    /// Who may call the methods that change state.
    public let policy: ControlAccessPolicy

    /// - Parameter policy: overrides the policy derived from `configuration.controlGroup`.
    public init(handler: some SyncControlHandler, configuration: Configuration, policy: ControlAccessPolicy? = nil, logger: Logger) {
        let policy = policy ?? ControlAccessPolicy(groupName: configuration.controlGroup)
        if let group = configuration.controlGroup, policy.privilegedGroups.isEmpty {
            logger.warning("control group '\(group)' does not exist: only root may change state")
        }
        self.policy = policy
        let interface = Self.makeInterface(handler: handler, policy: policy, configuration: configuration, logger: logger)
        let service = VarlinkService(
            info: VarlinkServiceInfo(vendor: "syncd", product: "syncd", version: configuration.version, url: "https://github.com/syncd/syncd"),
            interfaces: [interface]
        )
        let listen: VarlinkServer.Listen
        if configuration.useSocketActivation, let fd = SocketActivation.unixListener(named: "varlink") {
            listen = .fileDescriptor(fd)
        } else {
            listen = .path(configuration.socketPath, mode: 0o666)
        }
        var serverConfiguration = VarlinkServer.Configuration(
            listen: listen, maxConnections: configuration.maxConnections, maxMessageSize: configuration.maxMessageSize, idleTimeout: configuration.idleTimeout
        )
        serverConfiguration.floodError = VarlinkError("io.syncd.TooManyCalls", parameters: [
            "max_calls": .int(Int64(serverConfiguration.maxQueuedCalls)), "max_bytes": .int(Int64(serverConfiguration.maxQueuedBytes)),
        ])
        server = VarlinkServer(service: service, configuration: serverConfiguration, logger: logger)
    }

    /// Listens and serves until graceful shutdown or cancellation; then stops accepting, ends
    /// every connection and removes the socket file it created. Throws when it cannot listen.
    public func run() async throws {
        let server = self.server
        try await cancelWhenGracefulShutdown { try await server.run() }
    }

    /// Returns `true` once clients can connect, `false` when ``run()`` failed to listen (for
    /// instance because another instance serves the socket).
    @discardableResult
    public func waitUntilListening() async -> Bool {
        await server.waitUntilListening()
    }

    /// Connections being served now (each holds one slot).
    public var connectionCount: Int { server.connectionCount }

    /// Connections served now, accepted and refused since the server was made.
    public var statistics: VarlinkServer.Statistics { server.statistics }

    // MARK: Wire shapes

    struct FeedParameter: Codable, Sendable { var feed: String? }
    struct FeedsResult: Codable, Sendable { var feeds: [String] }
    struct StatusResult: Codable, Sendable { var status: ControlStatus }
    struct MetricsResult: Codable, Sendable { var text: String }
    struct WatchItemsParameters: Codable, Sendable {
        var feed: String
        var since: String?
    }
    struct ListItemsParameters: Codable, Sendable {
        var feed: String
        var limit: Int?
        var after: String?
    }

    /// The `io.syncd` interface bound to `handler` with `policy` applied.
    static func makeInterface(handler: some SyncControlHandler, policy: ControlAccessPolicy, configuration: Configuration, logger: Logger) -> VarlinkInterface {
        // The description is a compiled-in constant checked by the tests.
        var interface = try! VarlinkInterface(description: SyncdInterface.description)

        interface.method("GetStatus") { _ in
            try await mapped { StatusResult(status: try await handler.status()) }
        }
        interface.streamingMethod("Watch", parameters: VarlinkEmpty.self) { (_, _, yield: @Sendable (StatusResult) async throws -> Void) in
            try await relayNewest(from: await handler.statusUpdates()) { status in
                try await yield(StatusResult(status: status))
            }
        }
        interface.method("GetMetrics") { _ in
            try await mapped { MetricsResult(text: try await handler.metrics()) }
        }
        let bulk = BulkWorkers()
        interface.encodedMethod("ListItems", parameters: ListItemsParameters.self) { parameters, _ in
            let limit = parameters.limit ?? configuration.defaultItemsPerPage
            guard (1...configuration.maxItemsPerPage).contains(limit) else {
                throw VarlinkError.invalidParameter("limit")
            }
            let page = try await mapped { try await handler.items(feed: parameters.feed, limit: limit, after: parameters.after) }
            return try await bulk.run { page.encoded() }
        }

        interface.register("WatchItems", .streaming { request, writer in
            let parameters = try request.decodeParameters(WatchItemsParameters.self)
            var since: ChangePoint?
            if let text = parameters.since {
                guard let point = ChangePoint(text) else { throw VarlinkError.invalidParameter("since") }
                since = point
            }
            let changes = try await mapped { try await handler.itemChanges(feed: parameters.feed, since: since) }
            // One reply per change, each written before the next is read: a client that reads
            // slowly holds the store's batch, not a queue of replies.
            for try await change in changes {
                try await writer.reply(encoded: encodedChange(change), continues: true)
            }
        })

        let mutations: [(String, @Sendable (String?) async throws -> [String])] = [
            ("Refresh", { try await handler.refresh(feed: $0) }),
            ("LoadOlder", { try await handler.loadOlder(feed: $0) }),
            ("Retry", { try await handler.retry(feed: $0) }),
            ("MarkSeen", { try await handler.markSeen(feed: $0) }),
        ]
        for (member, action) in mutations {
            interface.method(member, parameters: FeedParameter.self) { parameters, request in
                guard policy.mayChangeState(request.peer) else {
                    logger.notice("denied \(request.call.method) to uid \(request.peer.uid) (pid \(request.peer.pid))")
                    throw VarlinkError.permissionDenied
                }
                let feeds = try await mapped { try await action(parameters.feed) }
                // Logged once the handler has matched the name to a configured feed: a name the
                // caller made up (control characters, a megabyte of it) never reaches the journal.
                logger.info("\(request.call.method)", metadata: [
                    "feed": "\(parameters.feed == nil ? "*" : feeds.joined(separator: ","))", "uid": "\(request.peer.uid)",
                ])
                return FeedsResult(feeds: feeds)
            }
        }
        return interface
    }

    /// Turns the handler's ``SyncControlError`` into the interface's Varlink errors.
    static func mapped<T>(_ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch let error as SyncControlError {
            switch error {
            case .feedNotFound(let feed): throw VarlinkError("io.syncd.FeedNotFound", parameters: ["feed": .string(feed)])
            case .invalidCursor(let after): throw VarlinkError("io.syncd.InvalidCursor", parameters: ["after": .string(after)])
            case .notReady(let feed, let reason): throw VarlinkError("io.syncd.NotReady", parameters: ["feed": .string(feed), "reason": .string(reason)])
            case .permissionDenied: throw VarlinkError.permissionDenied
            case .unreachable, .socketAccessDenied, .remote: throw VarlinkError("io.syncd.InternalError", parameters: ["message": .string(error.description)])
            }
        }
    }

    /// Forwards `source` keeping only the newest value not yet sent, so a client that reads
    /// slowly sees the latest state instead of a growing backlog.
    static func relayNewest(from source: AsyncStream<ControlStatus>, _ send: @Sendable (ControlStatus) async throws -> Void) async throws {
        let (latest, continuation) = AsyncStream.makeStream(of: ControlStatus.self, bufferingPolicy: .bufferingNewest(1))
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                for await status in source { continuation.yield(status) }
                continuation.finish()
            }
            for await status in latest {
                try await send(status)
            }
            group.cancelAll()
        }
    }
}
