import Foundation
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import ServiceLifecycle
import Synchronization

/// An HTTP endpoint serving `GET /metrics` to a Prometheus (or anything that scrapes), over TCP
/// or a Unix socket.
///
/// A swift-service-lifecycle `Service`: ``run()`` listens until graceful shutdown or
/// cancellation, then closes the listener and every connection. Each scrape asks `collect` for
/// the exposition in the format the `Accept` header prefers (``ExpositionFormat/negotiate(accept:)``).
/// Bounded per client: at most ``Configuration/maxConnections`` connections at once (more are
/// closed at once), a connection with nothing to read for ``Configuration/idleTimeout`` is
/// closed, request bodies are discarded as they come, and the HTTP parser bounds a request's head.
public struct MetricsEndpoint: Service {
    /// Where the endpoint listens.
    public enum Address: Sendable, Hashable, CustomStringConvertible {
        /// A TCP address and port (`127.0.0.1:9559`, `[::1]:9559`, `localhost:9559`).
        case tcp(host: String, port: Int)
        /// A Unix socket path (an absolute path).
        case unix(path: String)

        /// Reads `listen`'s syntax: an absolute path is a Unix socket, else `HOST:PORT` with an
        /// IPv6 host in brackets; `nil` when it is neither.
        public init?(parsing text: String) {
            if text.hasPrefix("/") {
                self = .unix(path: text)
                return
            }
            guard let colon = text.lastIndex(of: ":"), let port = Int(text[text.index(after: colon)...]), (1...65535).contains(port) else {
                return nil
            }
            var host = String(text[..<colon])
            if host.hasPrefix("[") && host.hasSuffix("]") {
                host = String(host.dropFirst().dropLast())
            } else if host.contains(":") {
                return nil
            }
            guard !host.isEmpty else { return nil }
            self = .tcp(host: host, port: port)
        }

        /// As `listen` spells it.
        public var description: String {
            switch self {
            case .tcp(let host, let port): host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
            case .unix(let path): path
            }
        }
    }

    /// Where it listens and its limits.
    public struct Configuration: Sendable {
        /// Where to listen.
        public var address: Address
        /// Connections served at once; a connection past this is closed as it is accepted.
        public var maxConnections: Int = 8
        /// A connection with nothing to read this long is closed.
        public var idleTimeout: Duration = .seconds(30)

        /// An endpoint at `address` with the default limits.
        public init(address: Address) {
            self.address = address
        }
    }

    /// The exposition in a format, made when a scrape asks.
    public typealias Collect = @Sendable (ExpositionFormat) async -> [UInt8]

    /// Where it listens and its limits.
    public let configuration: Configuration
    private let collect: Collect
    private let logger: Logger
    private let bound = BindSignal()
    private let open = OpenConnections()

    /// An endpoint at `configuration.address` that answers with what `collect` makes.
    public init(configuration: Configuration, logger: Logger, collect: @escaping Collect) {
        self.configuration = configuration
        self.collect = collect
        self.logger = logger
    }

    /// Connections being served now.
    public var connectionCount: Int { open.count.load(ordering: .relaxed) }

    /// The address listened on once ``run()`` has bound (a port of 0 is resolved here); `nil`
    /// when it failed to bind.
    public func waitUntilListening() async -> SocketAddress? {
        await bound.wait()
    }

    /// Listens and serves until graceful shutdown or cancellation. Throws when it cannot listen,
    /// with the address in the error.
    public func run() async throws {
        let idle = TimeAmount(configuration.idleTimeout)
        let initializer: @Sendable (any Channel) -> EventLoopFuture<NIOAsyncChannel<HTTPServerRequestPart, HTTPServerResponsePart>> = { channel in
            channel.eventLoop.makeCompletedFuture {
                try channel.pipeline.syncOperations.addHandler(IdleStateHandler(readTimeout: idle))
                try channel.pipeline.syncOperations.addHandler(CloseWhenIdle())
                try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
                return try NIOAsyncChannel<HTTPServerRequestPart, HTTPServerResponsePart>(wrappingChannelSynchronously: channel)
            }
        }
        let bootstrap = ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.backlog, value: 32)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
        let server: NIOAsyncChannel<NIOAsyncChannel<HTTPServerRequestPart, HTTPServerResponsePart>, Never>
        do {
            switch configuration.address {
            case .tcp(let host, let port):
                server = try await bootstrap.bind(host: host, port: port, childChannelInitializer: initializer)
            case .unix(let path):
                // A socket left by a crashed instance would make the bind fail.
                server = try await bootstrap.bind(unixDomainSocketPath: path, cleanupExistingSocketFile: true, childChannelInitializer: initializer)
            }
        } catch {
            bound.settle(nil)
            throw MetricsEndpointError(address: configuration.address, reason: "\(error)")
        }
        defer {
            bound.settle(nil)
            if case .unix(let path) = configuration.address { unlink(path) }
        }
        if case .unix(let path) = configuration.address {
            // Whoever may read the status may read the metrics (the control socket is 0666 too);
            // the daemon's umask (the unit's is 0077) would leave it to syncd's own user.
            chmod(path, 0o666)
        }
        let address = server.channel.localAddress
        bound.settle(address)
        logger.info("metrics endpoint listening", metadata: ["address": "\(configuration.address)"])

        let open = self.open
        let limit = configuration.maxConnections
        let collect = self.collect
        do {
            try await serve(server, open: open, limit: limit, collect: collect)
        } catch is CancellationError {
            // Stopped for shutdown: the ending asked for.
        }
    }

    private func serve(
        _ server: NIOAsyncChannel<NIOAsyncChannel<HTTPServerRequestPart, HTTPServerResponsePart>, Never>,
        open: OpenConnections, limit: Int, collect: @escaping Collect
    ) async throws {
        try await cancelWhenGracefulShutdown {
            try await withThrowingDiscardingTaskGroup { group in
                try await server.executeThenClose { inbound in
                    for try await connection in inbound {
                        guard open.count.add(1, ordering: .relaxed).newValue <= limit else {
                            open.count.subtract(1, ordering: .relaxed)
                            // Through its writer, which must be finished before it goes.
                            try? await connection.executeThenClose { _, _ in }
                            continue
                        }
                        group.addTask {
                            defer { open.count.subtract(1, ordering: .relaxed) }
                            await Self.serve(connection, collect: collect)
                        }
                    }
                }
            }
        }
    }

    /// Answers one connection's requests, in order, until it closes or asks to close.
    private static func serve(_ connection: NIOAsyncChannel<HTTPServerRequestPart, HTTPServerResponsePart>, collect: Collect) async {
        try? await connection.executeThenClose { inbound, outbound in
            var head: HTTPRequestHead?
            for try await part in inbound {
                switch part {
                case .head(let request):
                    head = request
                case .body:
                    continue
                case .end:
                    guard let request = head else { continue }
                    head = nil
                    let answer = await respond(to: request, collect: collect)
                    var headers = HTTPHeaders()
                    headers.add(name: "Content-Type", value: answer.contentType)
                    headers.add(name: "Content-Length", value: String(answer.body.count))
                    if let allow = answer.allow { headers.add(name: "Allow", value: allow) }
                    try await outbound.write(.head(HTTPResponseHead(version: request.version, status: answer.status, headers: headers)))
                    if request.method != .HEAD {
                        try await outbound.write(.body(.byteBuffer(ByteBuffer(bytes: answer.body))))
                    }
                    try await outbound.write(.end(nil))
                    if !request.isKeepAlive { return }
                }
            }
        }
    }

    struct Answer {
        var status: HTTPResponseStatus
        var contentType: String
        var body: [UInt8]
        var allow: String?
    }

    /// The answer to `request`: the metrics for `GET` or `HEAD /metrics`, else why not.
    static func respond(to request: HTTPRequestHead, collect: Collect) async -> Answer {
        let path = request.uri.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? ""
        guard path == "/metrics" else {
            return Answer(status: .notFound, contentType: "text/plain; charset=utf-8", body: Array("not found: syncd serves /metrics\n".utf8))
        }
        guard request.method == .GET || request.method == .HEAD else {
            return Answer(status: .methodNotAllowed, contentType: "text/plain; charset=utf-8", body: Array("only GET and HEAD\n".utf8), allow: "GET, HEAD")
        }
        let format = ExpositionFormat.negotiate(accept: request.headers.first(name: "accept"))
        return Answer(status: .ok, contentType: format.contentType, body: await collect(format))
    }
}

/// Why the endpoint could not listen.
public struct MetricsEndpointError: Error, CustomStringConvertible, Sendable {
    /// Where it tried to listen.
    public var address: MetricsEndpoint.Address
    /// What went wrong.
    public var reason: String

    /// In words, with the address and what to do.
    public var description: String {
        "cannot serve metrics on \(address): \(reason) (check [metrics] listen: the address must be local to this machine and free)"
    }
}

/// Closes a connection when `IdleStateHandler` reports nothing read for its timeout.
private final class CloseWhenIdle: ChannelInboundHandler, Sendable {
    typealias InboundIn = NIOAny

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is IdleStateHandler.IdleStateEvent {
            context.close(promise: nil)
        } else {
            context.fireUserInboundEventTriggered(event)
        }
    }
}

/// Connections being served, shared by the accept loop and the connections' tasks.
private final class OpenConnections: Sendable {
    let count = Atomic<Int>(0)
}

/// The outcome of the bind, once: any number of waiters, before or after it is known.
private final class BindSignal: Sendable {
    private struct State {
        var address: SocketAddress??
        var waiters: [CheckedContinuation<SocketAddress?, Never>] = []
    }

    private let state = Mutex(State())

    /// Records the first outcome (a later one, such as the stop, is ignored) and wakes waiters.
    func settle(_ address: SocketAddress?) {
        let waiters = state.withLock { state -> [CheckedContinuation<SocketAddress?, Never>] in
            guard state.address == nil else { return [] }
            state.address = .some(address)
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume(returning: address) }
    }

    func wait() async -> SocketAddress? {
        await withCheckedContinuation { continuation in
            let known = state.withLock { state -> SocketAddress?? in
                if let address = state.address { return .some(address) }
                state.waiters.append(continuation)
                return nil
            }
            if let known { continuation.resume(returning: known) }
        }
    }
}
