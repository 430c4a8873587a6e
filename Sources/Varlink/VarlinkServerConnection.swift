import EventLoopClock
import Foundation
import Logging
import NIOCore
import Synchronization

/// Serves the calls of one connection, in order.
///
/// Three tasks share the connection, coordinated by a ``ConnectionLifecycle``: a reader that
/// reads whenever the bounds allow (so a hang-up is seen even while a call or stream runs), a
/// processor that answers calls one after another, and an idle timer; a fourth ends the others
/// when the lifecycle closes the connection. The connection ends, and its slot is given back,
/// when the processor has answered everything and the peer has ended its side, when the peer
/// hangs up during a stream, when it stays idle past the timeout, or on a protocol violation.
struct VarlinkServerConnection: Sendable {
    let service: VarlinkService
    let peer: VarlinkPeer
    let outbound: NIOAsyncChannelOutboundWriter<ByteBuffer>
    let logger: Logger
    let maxMessageSize: Int
    let idleTimeout: Duration
    /// Where the connection's reader, processor, idle timer and read gate agree on what happens
    /// next, and what it may hold; made before the channel, whose read gate and decoder report
    /// to it.
    let lifecycle: ConnectionLifecycle
    /// The error a client gets before its connection closes for flooding.
    let floodError: VarlinkError

    /// Why one of the connection's tasks ended.
    private enum Ending: Sendable {
        /// The peer ended its side; queued calls are still answered.
        case inputEnded
        /// Every call has been answered and no more will come, or the processor gave up.
        case processorDone
        case idle
        /// The peer queued calls behind a stream beyond the bounds.
        case flooding
    }

    /// The peer hung up while a stream was running.
    private struct HungUp: Error {}

    func serve(_ inbound: NIOAsyncChannelInboundStream<VarlinkFrame>) async throws {
        let (frames, queue) = AsyncStream.makeStream(of: VarlinkFrame.self)
        // What the connection held goes back to its user's budget in `VarlinkServer.serve`, once
        // the channel, and the buffers NIO kept for it, are gone.
        defer { lifecycle.close(because: "connection ended") }
        try await withThrowingTaskGroup(of: Ending.self) { group in
            group.addTask {
                defer { queue.finish() }
                // The read gate bounds the bytes; this bounds the calls: a full queue stops the
                // reading too, and the kernel holds the rest while the peer's writes block.
                for try await frame in inbound {
                    admitting: while true {
                        switch lifecycle.admit() {
                        case .queued:
                            queue.yield(frame)
                            break admitting
                        case .full:
                            await lifecycle.waitForRoom()
                            try Task.checkCancellation()
                        case .flooding:
                            return .flooding
                        case .closing:
                            return .processorDone
                        }
                    }
                }
                if lifecycle.inputEnded() { throw HungUp() }
                return .inputEnded
            }
            group.addTask {
                await process(frames)
                return .processorDone
            }
            group.addTask {
                while true {
                    try await EventLoopClock().sleep(until: lifecycle.idleDeadline(timeout: idleTimeout))
                    if lifecycle.closeIfIdle(timeout: idleTimeout) { return .idle }
                }
            }
            group.addTask {
                // The read gate may close the connection while the reader waits for bytes it
                // will no longer let in.
                await lifecycle.closed()
                return lifecycle.isFlooded ? .flooding : .processorDone
            }
            // The first task to end ends the others, unless it only saw the peer's end of input:
            // the processor still answers what was queued.
            while let ending = try await group.next() {
                if case .inputEnded = ending { continue }
                break
            }
            group.cancelAll()
        }
        // The reader or the read gate may have seen the flood, and another task may have
        // ended the group first; either way the lifecycle knows.
        if lifecycle.isFlooded {
            logger.notice("varlink: calls queued behind a stream beyond \(lifecycle.maxQueuedCalls) calls or \(lifecycle.maxQueuedBytes) bytes, closing connection")
            await sendFarewell(VarlinkReply(error: floodError))
        }
    }

    /// Sends a last error reply, giving up after a second when the peer does not read: the
    /// connection closes either way.
    private func sendFarewell(_ reply: VarlinkReply) async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { try? await send(reply) }
            group.addTask { try? await EventLoopClock().sleep(for: .seconds(1)) }
            await group.next()
            group.cancelAll()
        }
    }

    /// Answers calls in order until the queue ends or the connection must close.
    private func process(_ frames: AsyncStream<VarlinkFrame>) async {
        for await frame in frames {
            lifecycle.dequeued(bytes: frame.byteCount)
            do {
                guard try await handle(frame) else { return }
            } catch {
                // Cancellation or a failed write: the peer is gone or the server stops.
                lifecycle.close(because: "\(error)")
                return
            }
        }
    }

    /// Handles one message; returns whether the connection goes on.
    private func handle(_ frame: VarlinkFrame) async throws -> Bool {
        switch frame {
        case .tooLarge:
            logger.notice("varlink: message larger than \(maxMessageSize) bytes, closing connection")
            try await send(VarlinkReply(error: .invalidParameter("message exceeds \(maxMessageSize) bytes")))
            lifecycle.close(because: "message too large")
            return false
        case .message(let buffer):
            let call: VarlinkCall
            do throws(VarlinkError) {
                call = try VarlinkCall.decode(buffer.readableBytesView)
            } catch {
                logger.notice("varlink: malformed call: \(error)")
                try await send(VarlinkReply(error: error))
                return true
            }
            guard lifecycle.beginCall(call.method) else { return false }
            let goesOn = try await dispatch(call)
            lifecycle.endCall(call.method)
            return goesOn
        }
    }

    /// Runs one call to its end; returns whether the connection goes on.
    private func dispatch(_ call: VarlinkCall) async throws -> Bool {
        if call.oneway && call.more {
            // "No reply" and "several replies" contradict each other; sd-varlink rejects the
            // combination as invalid too. One error reply, then the connection closes, so the
            // reply cannot be mistaken for the answer to a later pipelined call.
            logger.notice("varlink: \(call.method) with both oneway and more, closing connection")
            try await send(VarlinkReply(error: .invalidParameter("oneway")))
            lifecycle.close(because: "oneway and more together")
            return false
        }
        if call.upgrade {
            try await reply(to: call, VarlinkReply(error: .invalidParameter("upgrade")))
            return true
        }
        let request = VarlinkRequest(call: call, peer: peer)
        switch service.route(call) {
        case .failure(let error):
            try await reply(to: call, VarlinkReply(error: error))
            return true
        case .success(.single(let handler)):
            let reply: VarlinkReply
            do {
                reply = VarlinkReply(parameters: try await handler(request))
            } catch {
                reply = VarlinkReply(error: mapError(error, call: call))
            }
            try await self.reply(to: call, reply)
            return true
        case .success(.encoded(let handler)):
            let parameters: VarlinkEncodedParameters
            do {
                parameters = try await handler(request)
            } catch {
                try await reply(to: call, VarlinkReply(error: mapError(error, call: call)))
                return true
            }
            guard !call.oneway else { return true }
            var buffer = ByteBuffer()
            buffer.reserveCapacity(parameters.bytes.count + 16)
            buffer.writeString(#"{"parameters":"#)
            buffer.writeBytes(parameters.bytes)
            buffer.writeBytes([UInt8(ascii: "}"), 0])
            try await write(buffer)
            return true
        case .success(.streaming(let handler)):
            guard call.more else {
                try await reply(to: call, VarlinkReply(error: .expectedMore))
                return true
            }
            guard lifecycle.beginStream(call.method) else { return false }
            let progress = StreamProgress()
            let writer = VarlinkReplyWriter { reply in
                progress.record(continues: reply.continues)
                try await self.reply(to: call, reply)
            }
            do {
                try await handler(request, writer)
                // A handler may end quietly when cancelled (an async stream's loop ends): the
                // connection is closing, and whatever closes it has the last word.
                if Task.isCancelled { return false }
            } catch is CancellationError {
                return false
            } catch {
                try await self.reply(to: call, VarlinkReply(error: mapError(error, call: call)))
                return true
            }
            switch progress.state {
            case .none:
                try await self.reply(to: call, VarlinkReply())
                return true
            case .continued:
                // The stream ended without a final reply: end-of-file tells the client it is over.
                outbound.finish()
                lifecycle.close(because: "stream ended with end-of-file")
                return false
            case .finished:
                return true
            }
        }
    }

    private func reply(to call: VarlinkCall, _ reply: VarlinkReply) async throws {
        guard !call.oneway else { return }
        try await send(reply)
    }

    private func send(_ reply: VarlinkReply) async throws {
        var buffer = ByteBuffer(bytes: try reply.encoded())
        buffer.writeInteger(UInt8(0))
        try await write(buffer)
    }

    /// Writes one message; a peer that leaves it unread past the idle timeout loses the
    /// connection (the idle timer watches).
    private func write(_ buffer: ByteBuffer) async throws {
        lifecycle.writeBegan()
        defer { lifecycle.writeEnded() }
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
