#if canImport(Glibc)
import CSocket
import Glibc
#endif
import Foundation
import Logging
import NIOCore
import NIOPosix
import Synchronization

/// A Varlink server on an AF_UNIX stream socket.
///
/// Each connection is served by its own task: a malformed or oversized message costs that
/// client an error reply (and, when oversized, the connection), never the other clients.
/// Calls on one connection are answered in order, as the protocol requires.
public final class VarlinkServer: Sendable {
    /// Where to listen.
    public enum Listen: Sendable, Hashable {
        /// Bind a socket file at this path with this mode (replacing a stale socket file).
        case path(String, mode: UInt32 = 0o666)
        /// Use an already listening socket, e.g. from systemd socket activation. The server
        /// takes ownership and closes it when done.
        case fileDescriptor(Int32)
    }

    /// Where the server listens and the limits that protect it.
    public struct Configuration: Sendable {
        /// The socket to serve.
        public var listen: Listen
        /// Connections beyond this are closed as soon as they are accepted.
        public var maxConnections: Int
        /// Largest accepted message, without its NUL. Calls are small; this stops a client from
        /// making the server buffer without bound.
        public var maxMessageSize: Int
        /// Connections one non-root user may hold at once, so that one user's idle connections
        /// cannot lock every other user out of a world-connectable socket.
        public var maxConnectionsPerUser: Int
        /// Connections only root may take: an administrator can always get in.
        public var reservedForRoot: Int
        /// A connection with no call running and nothing received for this long is closed, so
        /// a client that connects and goes quiet cannot keep its slot; so is one whose peer
        /// leaves a reply unread this long, a stream's included.
        public var idleTimeout: Duration
        /// Calls one connection may have read but not yet answered. Past this (or
        /// ``maxQueuedBytes``) the server stops reading the connection until a call is
        /// answered, so a pipelining client waits instead of making the server buffer.
        public var maxQueuedCalls: Int
        /// Bytes of calls one connection may have read but not yet answered.
        public var maxQueuedBytes: Int
        /// Bytes of calls the connections of one user may hold together, with what the
        /// connections themselves cost (``connectionCost``).
        public var maxQueuedBytesPerUser: Int
        /// What an open connection costs the server before it sends anything (its channel,
        /// handlers, tasks and stream), charged to a non-root user's ``maxQueuedBytesPerUser``
        /// while it is open, so that bound is on all the memory a user's connections hold, not
        /// only on their calls. The server charges less when a user holding every slot it may
        /// hold would otherwise have no room left for one message of ``maxMessageSize``.
        public var connectionCost: Int
        /// The error sent before a connection closes for queueing calls behind a stream beyond
        /// the bounds (such calls would never run). Name it in the served interface.
        public var floodError: VarlinkError
        /// A refused client is logged once per user per this interval, with the count refused
        /// since, so a connect flood cannot flood the journal.
        public var refusalLogInterval: Duration

        /// A configuration; per-user and root-reserved slots default to a quarter and a sixteenth
        /// of `maxConnections`.
        public init(
            listen: Listen,
            maxConnections: Int = 64,
            maxMessageSize: Int = 64 * 1024,
            maxConnectionsPerUser: Int? = nil,
            reservedForRoot: Int? = nil,
            idleTimeout: Duration = .seconds(60),
            maxQueuedCalls: Int = 128,
            maxQueuedBytes: Int = 256 * 1024,
            maxQueuedBytesPerUser: Int = 1024 * 1024,
            connectionCost: Int = 36 * 1024,
            floodError: VarlinkError = VarlinkError("org.varlink.service.InvalidParameter", parameters: ["parameter": .string("pipelined calls")]),
            refusalLogInterval: Duration = .seconds(10)
        ) {
            self.listen = listen
            self.maxConnections = maxConnections
            self.maxMessageSize = maxMessageSize
            self.maxConnectionsPerUser = max(1, maxConnectionsPerUser ?? maxConnections / 4)
            self.reservedForRoot = max(0, min(maxConnections - 1, reservedForRoot ?? maxConnections / 16))
            self.idleTimeout = idleTimeout
            self.maxQueuedCalls = max(1, maxQueuedCalls)
            self.maxQueuedBytes = max(1, maxQueuedBytes)
            self.maxQueuedBytesPerUser = max(1, maxQueuedBytesPerUser)
            self.connectionCost = max(0, connectionCost)
            self.floodError = floodError
            self.refusalLogInterval = refusalLogInterval
        }
    }

    /// What the server was made with.
    public let configuration: Configuration
    private let service: VarlinkService
    private let logger: Logger
    private let eventLoopGroup: any EventLoopGroup
    private let state: Mutex<State>
    private let budget: QueueBudget

    private struct State {
        var listenFD: Int32?
        var connections = 0
        var connectionsByUser: [UInt32: Int] = [:]
        var stopping = false
        var readyWaiters: [CheckedContinuation<Bool, Never>] = []
        /// `nil` until ``run()`` either listens (`true`) or fails to (`false`).
        var listening: Bool?
        var accepted = 0
        var refused: [Refusal: Int] = [:]
        var refusalLog: RefusalLog
    }

    /// Why a client was refused as it connected.
    public enum Refusal: String, Sendable, Hashable, CaseIterable {
        /// The server is stopping.
        case stopping
        /// Every slot (or every slot not reserved for root) is taken.
        case connectionLimit = "connection_limit"
        /// The client's user holds its share of slots.
        case userLimit = "user_limit"

        /// In words, as the log says it.
        var message: String {
            switch self {
            case .stopping: "stopping"
            case .connectionLimit: "connection limit reached"
            case .userLimit: "per-user connection limit reached"
            }
        }
    }

    /// Connections served now, accepted and refused (by why) since the server was made.
    public struct Statistics: Sendable, Hashable {
        /// Connections being served now.
        public var open: Int
        /// Connections accepted so far.
        public var accepted: Int
        /// Connections refused so far, by why.
        public var refused: [Refusal: Int]
        /// Bytes of calls read and not yet answered, over all connections.
        public var queuedBytes: Int
        /// What the open connections are charged to their users' bounds
        /// (``Configuration/connectionCost``), over all users.
        public var chargedBytes: Int
    }

    /// A server for `service`; `run()` starts it.
    public init(
        service: VarlinkService,
        configuration: Configuration,
        logger: Logger = Logger(label: "varlink"),
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) {
        self.service = service
        self.configuration = configuration
        self.logger = logger
        self.eventLoopGroup = eventLoopGroup
        self.budget = QueueBudget(bytesPerUser: configuration.maxQueuedBytesPerUser)
        self.state = Mutex(State(refusalLog: RefusalLog(interval: configuration.refusalLogInterval)))
    }

    /// The number of connections being served now.
    public var connectionCount: Int { state.withLock { $0.connections } }

    /// The connection counts now.
    public var statistics: Statistics {
        state.withLock { Statistics(open: $0.connections, accepted: $0.accepted, refused: $0.refused, queuedBytes: budget.total, chargedBytes: budget.charges) }
    }

    /// Returns once the socket is listening (`true`) or ``run()`` has failed to listen
    /// (`false`), so callers report readiness (`sd_notify READY=1`) only when clients can
    /// connect, and never when another instance holds the socket.
    @discardableResult
    public func waitUntilListening() async -> Bool {
        await withCheckedContinuation { continuation in
            let listening = state.withLock { state -> Bool? in
                if let listening = state.listening { return listening }
                state.readyWaiters.append(continuation)
                return nil
            }
            if let listening { continuation.resume(returning: listening) }
        }
    }

    /// Listens and serves until the calling task is cancelled; then stops accepting, ends every
    /// connection, closes the socket and removes the socket file it created.
    public func run() async throws {
        let listenFD: Int32
        let ownedPath: String?
        do {
            switch configuration.listen {
            case .path(let path, let mode):
                listenFD = try UnixSocket.listen(path: path, mode: mode_t(mode), backlog: Int32(max(16, configuration.maxConnections)))
                ownedPath = path
            case .fileDescriptor(let fd):
                guard UnixSocket.isListeningUnixStream(fd) else {
                    throw VarlinkSocketError(operation: "inherited descriptor \(fd) is not a listening AF_UNIX stream socket", errno: ENOTSOCK)
                }
                listenFD = fd
                ownedPath = nil
            }
        } catch {
            markReady(listening: false)
            throw error
        }
        state.withLock { $0.listenFD = listenFD }
        logger.info("varlink: listening", metadata: ["socket": "\(ownedPath ?? "fd \(listenFD)")"])

        let (accepted, acceptedContinuation) = AsyncStream.makeStream(of: AcceptedSocket.self)
        let acceptorDone = ExitSignal()
        let acceptor = Thread { [self] in
            acceptLoop(listenFD: listenFD, into: acceptedContinuation)
            close(listenFD)
            if let ownedPath { unlink(ownedPath) }
            acceptorDone.signal()
        }
        acceptor.name = "varlink-accept"
        acceptor.start()
        markReady(listening: true)

        await withTaskCancellationHandler {
            await withDiscardingTaskGroup { group in
                for await socket in accepted {
                    group.addTask { await self.serve(socket) }
                }
                group.cancelAll()
            }
        } onCancel: {
            self.stopAccepting()
        }
        stopAccepting()
        await acceptorDone.wait()
        logger.info("varlink: stopped")
    }

    private func markReady(listening: Bool) {
        let waiters = state.withLock { state in
            state.listening = listening
            defer { state.readyWaiters = [] }
            return state.readyWaiters
        }
        for waiter in waiters { waiter.resume(returning: listening) }
    }

    /// Wakes the blocking `accept` (Linux returns EINVAL after `shutdown` on a listener).
    private func stopAccepting() {
        let fd = state.withLock { state -> Int32? in
            guard !state.stopping else { return nil }
            state.stopping = true
            return state.listenFD
        }
        if let fd { shutdown(fd, Int32(SHUT_RDWR)) }
    }

    private struct AcceptedSocket: Sendable {
        var fd: Int32
        var peer: VarlinkPeer
    }

    private func acceptLoop(listenFD: Int32, into continuation: AsyncStream<AcceptedSocket>.Continuation) {
        defer { continuation.finish() }
        while !state.withLock({ $0.stopping }) {
            // Close-on-exec from the start: a child spawned by another thread of the process
            // before a later fcntl would keep the client's connection open for its whole life.
            let fd = accept4(listenFD, nil, nil, Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue))
            if fd < 0 {
                switch errno {
                case EINTR, ECONNABORTED, EAGAIN:
                    continue
                case EMFILE, ENFILE, ENOBUFS, ENOMEM:
                    // Out of resources: back off instead of spinning; existing clients go on.
                    logger.warning("varlink: accept failed: \(String(cString: strerror(errno)))")
                    usleep(100_000)
                    continue
                default:
                    return
                }
            }
            let peer: VarlinkPeer
            do {
                peer = try UnixSocket.peerCredentials(of: fd)
            } catch {
                logger.warning("varlink: \(error)")
                close(fd)
                continue
            }
            let now = ContinuousClock.now
            let refusal = state.withLock { state -> (Refusal, toLog: Int?)? in
                guard let refusal = Self.refusal(of: peer, in: state, configuration: configuration) else {
                    state.connections += 1
                    state.accepted += 1
                    state.connectionsByUser[peer.uid, default: 0] += 1
                    return nil
                }
                state.refused[refusal, default: 0] += 1
                return (refusal, state.refusalLog.refused(peer.uid, at: now))
            }
            if let (refusal, unlogged) = refusal {
                if let unlogged {
                    let since = unlogged > 0 ? "; \(unlogged) more refused in the \(configuration.refusalLogInterval) before" : ""
                    logger.warning("varlink: \(refusal.message), refusing a client of uid \(peer.uid)\(since)", metadata: [
                        "uid": "\(peer.uid)", "limit": "\(configuration.maxConnections)", "perUser": "\(configuration.maxConnectionsPerUser)",
                    ])
                }
                close(fd)
                continue
            }
            continuation.yield(AcceptedSocket(fd: fd, peer: peer))
        }
    }

    /// The most one read the gate lets through brings in, and in how many reads of the socket.
    private static let maxReadSize = 16 * 1024
    private static let readsPerWakeUp = 4

    /// What a connection of `uid` is charged: the configured cost, or less when a user with
    /// every slot it may hold would otherwise have no room for one largest message and a read.
    /// Root is not charged: its slots go up to every connection.
    static func connectionCharge(for uid: UInt32, _ configuration: Configuration, readSize: Int) -> Int {
        guard uid != 0 else { return 0 }
        let room = configuration.maxQueuedBytesPerUser - configuration.maxMessageSize - 1 - readSize
        return max(0, min(configuration.connectionCost, room / configuration.maxConnectionsPerUser))
    }

    /// Why `peer` may not have a slot now, or `nil` when it may.
    private static func refusal(of peer: VarlinkPeer, in state: State, configuration: Configuration) -> Refusal? {
        if state.stopping { return .stopping }
        let isRoot = peer.uid == 0
        let limit = isRoot ? configuration.maxConnections : configuration.maxConnections - configuration.reservedForRoot
        guard state.connections < limit else { return .connectionLimit }
        guard isRoot || state.connectionsByUser[peer.uid, default: 0] < configuration.maxConnectionsPerUser else { return .userLimit }
        return nil
    }

    private func serve(_ socket: AcceptedSocket) async {
        // The one place a slot is given back: every path out of serve passes here, once.
        defer {
            state.withLock { state in
                state.connections -= 1
                let remaining = state.connectionsByUser[socket.peer.uid, default: 1] - 1
                state.connectionsByUser[socket.peer.uid] = remaining > 0 ? remaining : nil
            }
        }
        var logger = self.logger
        logger[metadataKey: "peer"] = "pid=\(socket.peer.pid) uid=\(socket.peer.uid)"
        let configuration = self.configuration
        // A read must fit the user's bound, or a user's first read could never be made.
        let readSize = max(64 * Self.readsPerWakeUp, min(Self.maxReadSize, configuration.maxQueuedBytesPerUser))
        let lifecycle = ConnectionLifecycle(
            logger: logger, maxQueuedCalls: configuration.maxQueuedCalls, maxQueuedBytes: configuration.maxQueuedBytes,
            budget: budget, uid: socket.peer.uid,
            connectionCharge: Self.connectionCharge(for: socket.peer.uid, configuration, readSize: readSize))
        // What it held goes back to the user's budget on every path out, whatever was read, and
        // only after the channel closed: until then NIO still holds the buffers the bytes are in.
        defer { lifecycle.releaseQueue() }
        let channel: NIOAsyncChannel<VarlinkFrame, ByteBuffer>
        do {
            channel = try await ClientBootstrap(group: eventLoopGroup)
                .channelOption(.allowRemoteHalfClosure, value: true)
                // At most `readSize` per read the gate lets through, in up to four reads of a
                // quarter of it: the gate reserves room for all of it. Several reads per wake-up
                // take a short burst whole (an oversized message is read to its end before the
                // error reply's close, so the client sees end-of-file, not a reset).
                .channelOption(.recvAllocator, value: AdaptiveRecvByteBufferAllocator(
                    minimum: 64, initial: min(2048, readSize / Self.readsPerWakeUp), maximum: readSize / Self.readsPerWakeUp))
                .channelOption(.maxMessagesPerRead, value: UInt(Self.readsPerWakeUp))
                // What is read, gathered and cut into calls costs the pages it fills and goes
                // back to the kernel when it is let go, so the budget bounds resident memory.
                .channelOption(.allocator, value: ConnectionBuffers.allocator)
                .withConnectedSocket(socket.fd) { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(ReadGate(lifecycle: lifecycle, readSize: readSize))
                        try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(
                            VarlinkFrameDecoder(maxMessageSize: configuration.maxMessageSize, lifecycle: lifecycle)))
                        // Half-closure lets a finished stream end with EOF while the client may still talk.
                        // NIO buffers no more than a frame ahead of the reader; the gate counts
                        // it with everything else read.
                        return try NIOAsyncChannel<VarlinkFrame, ByteBuffer>(
                            wrappingChannelSynchronously: channel,
                            configuration: .init(backPressureStrategy: .init(lowWatermark: 1, highWatermark: 1), isOutboundHalfClosureEnabled: true)
                        )
                    }
                }
        } catch {
            logger.warning("varlink: cannot set up connection: \(error)")
            close(socket.fd)
            return
        }
        do {
            try await channel.executeThenClose { inbound, outbound in
                let connection = VarlinkServerConnection(
                    service: service, peer: socket.peer, outbound: outbound, logger: logger,
                    maxMessageSize: configuration.maxMessageSize, idleTimeout: configuration.idleTimeout,
                    lifecycle: lifecycle, floodError: configuration.floodError
                )
                try await connection.serve(inbound)
            }
        } catch is CancellationError {
        } catch {
            logger.debug("varlink: connection ended: \(error)")
        }
    }
}

/// A one-shot signal that an async caller can wait for from any thread.
private final class ExitSignal: Sendable {
    private let state = Mutex<(done: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))

    func signal() {
        let waiters = state.withLock { state in
            state.done = true
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    func wait() async {
        await withCheckedContinuation { continuation in
            let done = state.withLock { state in
                if state.done { return true }
                state.waiters.append(continuation)
                return false
            }
            if done { continuation.resume() }
        }
    }
}
