import Foundation
import Logging
import NIOCore
import Synchronization

/// Serves the calls of one connection, in order.
///
/// A streaming call runs in a child task while the connection keeps reading, so a client that
/// hangs up ends its stream at once instead of holding a connection slot until the next
/// update fails to send.
struct VarlinkServerConnection: Sendable {
    let service: VarlinkService
    let peer: VarlinkPeer
    let outbound: NIOAsyncChannelOutboundWriter<ByteBuffer>
    let logger: Logger
    let maxMessageSize: Int

    func serve(_ inbound: NIOAsyncChannelInboundStream<VarlinkFrame>) async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            var streaming = false
            for try await frame in inbound {
                if streaming {
                    // Replies must stay in call order: the next call waits for the stream.
                    _ = try? await group.next()
                    streaming = false
                }
                switch frame {
                case .tooLarge:
                    logger.notice("varlink: message larger than \(maxMessageSize) bytes, closing connection")
                    try await send(VarlinkReply(error: .invalidParameter("message exceeds \(maxMessageSize) bytes")))
                    group.cancelAll()
                    return
                case .message(let buffer):
                    let call: VarlinkCall
                    do throws(VarlinkError) {
                        call = try VarlinkCall.decode(buffer.readableBytesView)
                    } catch {
                        logger.notice("varlink: malformed call: \(error)")
                        try await send(VarlinkReply(error: error))
                        continue
                    }
                    if try await dispatch(call, group: &group) { streaming = true }
                }
            }
            // End of input: nobody is left to read a stream.
            group.cancelAll()
        }
    }

    /// Runs one call; returns whether a streaming child task was started.
    private func dispatch(_ call: VarlinkCall, group: inout ThrowingTaskGroup<Void, any Error>) async throws -> Bool {
        if call.upgrade {
            try await reply(to: call, VarlinkReply(error: .invalidParameter("upgrade")))
            return false
        }
        let request = VarlinkRequest(call: call, peer: peer)
        switch service.route(call) {
        case .failure(let error):
            try await reply(to: call, VarlinkReply(error: error))
            return false
        case .success(.single(let handler)):
            let reply: VarlinkReply
            do {
                reply = VarlinkReply(parameters: try await handler(request))
            } catch {
                reply = VarlinkReply(error: mapError(error, call: call))
            }
            try await self.reply(to: call, reply)
            return false
        case .success(.streaming(let handler)):
            guard call.more else {
                try await reply(to: call, VarlinkReply(error: .expectedMore))
                return false
            }
            group.addTask {
                let progress = StreamProgress()
                let writer = VarlinkReplyWriter { reply in
                    progress.record(continues: reply.continues)
                    try await self.reply(to: call, reply)
                }
                do {
                    try await handler(request, writer)
                } catch is CancellationError {
                    return
                } catch {
                    try await self.reply(to: call, VarlinkReply(error: mapError(error, call: call)))
                    return
                }
                switch progress.state {
                case .none:
                    try await self.reply(to: call, VarlinkReply())
                case .continued:
                    // The stream ended without a final reply: end-of-file tells the client it is over.
                    outbound.finish()
                case .finished:
                    break
                }
            }
            return true
        }
    }

    private func reply(to call: VarlinkCall, _ reply: VarlinkReply) async throws {
        guard !call.oneway else { return }
        try await send(reply)
    }

    private func send(_ reply: VarlinkReply) async throws {
        var buffer = ByteBuffer(bytes: try reply.encoded())
        buffer.writeInteger(UInt8(0))
        try await outbound.write(buffer)
    }

    private func mapError(_ error: any Error, call: VarlinkCall) -> VarlinkError {
        if let error = error as? VarlinkError { return error }
        logger.error("varlink: \(call.method) failed: \(error)")
        return VarlinkError("\(call.interface).InternalError", parameters: ["message": .string(String(describing: error))])
    }
}

/// What a streaming handler has sent so far, to close its call properly when it returns.
private final class StreamProgress: Sendable {
    enum State { case none, continued, finished }
    private let value = Mutex(State.none)

    func record(continues: Bool) { value.withLock { $0 = continues ? .continued : .finished } }
    var state: State { value.withLock { $0 } }
}
