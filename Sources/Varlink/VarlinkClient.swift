#if canImport(Glibc)
import Glibc
#endif
import Foundation
import NIOCore
import NIOPosix

/// The service could not be reached at all (as opposed to answering with an error).
public struct VarlinkConnectError: Error, Sendable, CustomStringConvertible {
    /// The socket path that could not be reached.
    public var path: String
    /// The operating system's explanation, e.g. "No such file or directory".
    public var reason: String
    /// The `errno` behind it, when one is known.
    public var errno: Int32?

    /// "cannot connect to PATH: REASON".
    public var description: String { "cannot connect to \(path): \(reason)" }
}

/// A Varlink client for an AF_UNIX socket.
///
/// Each ``withConnection(_:)`` opens one connection; calls on it are made one after another.
public struct VarlinkClient: Sendable {
    /// The service's socket.
    public var socketPath: String
    /// Largest reply accepted, without its NUL.
    public var maxMessageSize: Int
    private let eventLoopGroup: any EventLoopGroup

    /// A client of the service at `socketPath`, on NIO's shared event loops by default.
    public init(socketPath: String, maxMessageSize: Int = 16 * 1024 * 1024, eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton) {
        self.socketPath = socketPath
        self.maxMessageSize = maxMessageSize
        self.eventLoopGroup = eventLoopGroup
    }

    /// Connects, runs `body` with the connection and closes it.
    public func withConnection<Result: Sendable>(
        _ body: (VarlinkConnection) async throws -> Result
    ) async throws -> Result {
        let maxMessageSize = self.maxMessageSize
        let channel: NIOAsyncChannel<VarlinkFrame, ByteBuffer>
        do {
            channel = try await ClientBootstrap(group: eventLoopGroup)
                .connect(unixDomainSocketPath: socketPath) { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(VarlinkFrameDecoder(maxMessageSize: maxMessageSize)))
                        return try NIOAsyncChannel<VarlinkFrame, ByteBuffer>(wrappingChannelSynchronously: channel)
                    }
                }
        } catch {
            throw Self.connectError(error, path: socketPath)
        }
        return try await channel.executeThenClose { inbound, outbound in
            let connection = VarlinkConnection(inbound: inbound, outbound: outbound, maxMessageSize: maxMessageSize)
            return try await body(connection)
        }
    }

    /// One call on a fresh connection.
    public func call(_ method: String, parameters: [String: JSONValue] = [:]) async throws -> [String: JSONValue] {
        try await withConnection { try await $0.call(method, parameters: parameters) }
    }

    /// One typed call on a fresh connection.
    public func call<Parameters: Encodable & Sendable, Result: Decodable & Sendable>(
        _ method: String, parameters: Parameters, returning: Result.Type
    ) async throws -> Result {
        let encoded = try VarlinkCoding.jsonValue(from: parameters).objectValue ?? [:]
        let reply = try await call(method, parameters: encoded)
        return try VarlinkCoding.decode(Result.self, from: .object(reply))
    }

    private static func connectError(_ error: any Error, path: String) -> VarlinkConnectError {
        if let io = error as? IOError {
            return VarlinkConnectError(path: path, reason: String(cString: strerror(io.errnoCode)), errno: io.errnoCode)
        }
        if let connection = error as? NIOConnectionError, let io = connection.connectionErrors.first?.error as? IOError {
            return VarlinkConnectError(path: path, reason: String(cString: strerror(io.errnoCode)), errno: io.errnoCode)
        }
        // NIO checks the path before connecting; report the state of the file the way
        // connect(2) would have.
        if access(path, F_OK) != 0 {
            let code = errno
            return VarlinkConnectError(path: path, reason: String(cString: strerror(code)), errno: code)
        }
        return VarlinkConnectError(path: path, reason: String(describing: error), errno: nil)
    }
}

/// An open connection. Not shared between tasks: the protocol answers calls in order, so one
/// caller at a time.
public final class VarlinkConnection {
    private var inbound: NIOAsyncChannelInboundStream<VarlinkFrame>.AsyncIterator
    private let outbound: NIOAsyncChannelOutboundWriter<ByteBuffer>
    private let maxMessageSize: Int

    init(inbound: NIOAsyncChannelInboundStream<VarlinkFrame>, outbound: NIOAsyncChannelOutboundWriter<ByteBuffer>, maxMessageSize: Int) {
        self.inbound = inbound.makeAsyncIterator()
        self.outbound = outbound
        self.maxMessageSize = maxMessageSize
    }

    /// Calls a method and returns its reply parameters; an error reply throws ``VarlinkError``.
    public func call(_ method: String, parameters: [String: JSONValue] = [:]) async throws -> [String: JSONValue] {
        try await send(VarlinkCall(method: method, parameters: parameters))
        let reply = try await receive()
        if let error = reply.varlinkError { throw error }
        return reply.parameters
    }

    /// Calls a method with `more` and hands each reply to `onReply` until the service sends
    /// its last one (or `onReply` returns `false`, which ends the call from this side).
    public func callMore(
        _ method: String,
        parameters: [String: JSONValue] = [:],
        _ onReply: ([String: JSONValue]) async throws -> Bool
    ) async throws {
        try await send(VarlinkCall(method: method, parameters: parameters, more: true))
        while true {
            let reply = try await receive()
            if let error = reply.varlinkError { throw error }
            guard try await onReply(reply.parameters), reply.continues else { return }
        }
    }

    /// Sends raw bytes followed by NUL: for tests of malformed input.
    public func sendRaw(_ bytes: [UInt8]) async throws {
        var buffer = ByteBuffer(bytes: bytes)
        buffer.writeInteger(UInt8(0))
        try await outbound.write(buffer)
    }

    /// Receives the next reply.
    public func receive() async throws -> VarlinkReply {
        switch try await inbound.next() {
        case .message(let buffer)?:
            return try VarlinkReply.decode(buffer.readableBytesView)
        case .tooLarge?:
            throw VarlinkProtocolError.messageTooLarge(limit: maxMessageSize)
        case nil:
            throw VarlinkProtocolError.connectionClosed
        }
    }

    private func send(_ call: VarlinkCall) async throws {
        try await sendRaw(Array(call.encoded()))
    }
}
