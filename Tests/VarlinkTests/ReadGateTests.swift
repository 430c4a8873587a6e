import Foundation
import NIOCore
import NIOEmbedded
import TestSupport
import Testing
@testable import Varlink

/// What a user can make the server hold counts every byte read, not only whole calls: the part
/// of a message the decoder gathers is bounded by the user's share too, and what the server does
/// not read stays in the kernel, where the client's writes stop.
@Suite("Varlink read gate", .timeLimit(.minutes(2)))
struct ReadGateTests {
    /// What the kernel alone takes from a sender with a send buffer of `size` when nobody reads:
    /// the part of a client's sends that the server did not read.
    static func kernelAllowance(sendBuffer size: Int32) throws -> Int {
        var fds: [Int32] = [0, 0]
        try #require(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &fds) == 0, "socketpair: errno \(errno)")
        defer { fds.forEach { close($0) } }
        var value = size
        setsockopt(fds[0], SOL_SOCKET, SO_SNDBUF, &value, socklen_t(MemoryLayout<Int32>.size))
        let chunk = [UInt8](repeating: UInt8(ascii: "p"), count: 64 * 1024)
        var total = 0
        while true {
            let sent = chunk.withUnsafeBytes { send(fds[0], $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT)) }
            if sent < 0 && errno == EINTR { continue }
            if sent <= 0 { return total }
            total += sent
        }
    }

    /// Five connections of one user each start a call that waits, then send most of a 63 KiB
    /// message and never finish it. The server used to read every byte of the five (315 KiB,
    /// counted nowhere: no call was whole); now it reads no more than the user's 128 KiB, the
    /// client's writes stop, and once the clients go quiet the idle timeout closes the
    /// connections and gives back all they held.
    @Test func unfinishedMessagesCountAgainstTheUsersShare() async throws {
        let userShare = 128 * 1024
        let fixture = try QueueBoundTests.Fixture(configuration: { path in
            VarlinkServer.Configuration(
                listen: .path(path), idleTimeout: .seconds(2), maxQueuedBytes: 64 * 1024, maxQueuedBytesPerUser: userShare,
                floodError: QueueBoundTests.floodError)
        })
        let sendBuffer: Int32 = 4096
        let allowance = try Self.kernelAllowance(sendBuffer: sendBuffer)
        try await fixture.run {
            let sockets = try (0..<5).map { _ in try RawSocket(path: fixture.path) }
            for socket in sockets {
                socket.limitSendBuffer(to: sendBuffer)
                try socket.send(QueueBoundTests.call("Hold"))
            }
            // Most of one Echo call: its NUL never comes.
            var unfinished = QueueBoundTests.call("Echo", pad: 63 * 1024)
            unfinished.removeLast(2)
            var sent = Array(repeating: 0, count: sockets.count)
            var most = 0
            // Sends what each socket takes, again and again while the server reads, until a
            // second passes with nothing more taken (or all was sent: the old server).
            var quietSince = ContinuousClock.now
            try await waitUntil("the clients' sends stop or end", timeout: hangGuard, interval: .milliseconds(5)) {
                var progressed = false
                for (index, socket) in sockets.enumerated() where sent[index] < unfinished.count {
                    let taken = try socket.sendWithoutWaiting(unfinished[sent[index]...])
                    sent[index] += taken
                    progressed = progressed || taken > 0
                }
                most = max(most, fixture.server.statistics.queuedBytes)
                if progressed { quietSince = .now }
                return sent.allSatisfy { $0 == unfinished.count } || ContinuousClock.now - quietSince > .seconds(1)
            }
            let total = sent.reduce(0, +)
            #expect(most <= userShare, "the server counted \(most) bytes held for the user, past its share of \(userShare)")
            #expect(
                total <= userShare + sockets.count * allowance,
                "the server read about \(total - sockets.count * allowance) bytes of unfinished calls (\(total) sent, the kernel takes \(allowance) a socket), past the user's \(userShare)")

            fixture.gate.publish(true)
            try await waitUntil("the idle connections are closed") { fixture.server.connectionCount == 0 }
            #expect(fixture.server.statistics.queuedBytes == 0, "bytes still counted after every connection closed")
            withExtendedLifetime(sockets) {}
        }
    }

    /// A large call and the first bytes of the next one, read together, sit in a buffer NIO grew
    /// by doubling (128 KiB past a 64 KiB call). Once the call is cut, the few bytes left must not
    /// keep that storage while the next message takes its time: the decoder moves them into a
    /// buffer of their own size, bytes unchanged.
    @Test func bytesLeftAfterALargeCallDoNotKeepItsBuffer() throws {
        let channel = EmbeddedChannel()
        defer { _ = try? channel.finish() }
        try channel.pipeline.syncOperations.addHandler(PassThrough())
        let context = try channel.pipeline.syncOperations.context(handlerType: PassThrough.self)
        var decoder = VarlinkFrameDecoder(maxMessageSize: 64 * 1024)
        let call = QueueBoundTests.call("Echo", pad: 63 * 1024)
        let next = Array(#"{"method":"io.test.Echo","#.utf8) + Array(repeating: UInt8(ascii: " "), count: 2_000)
        var buffer = ByteBufferAllocator().buffer(capacity: 128 * 1024)
        buffer.writeBytes(call + next)
        #expect(buffer.storageCapacity == 128 * 1024, "the test's premise: NIO's buffer after doubling")

        #expect(try decoder.decode(context: context, buffer: &buffer) == .continue)
        #expect(try decoder.decode(context: context, buffer: &buffer) == .needMoreData)

        #expect(Array(buffer.readableBytesView) == next, "the start of the next message changed")
        #expect(
            buffer.storageCapacity <= 2 * max(next.count, VarlinkFrameDecoder.smallestBuffer),
            "\(next.count) bytes of the next message keep a buffer of \(buffer.storageCapacity) bytes")
        let frame = try #require(try channel.readInbound(as: VarlinkFrame.self))
        guard case .message(let message) = frame else {
            Issue.record("the call was not cut: \(frame)")
            return
        }
        #expect(message.readableBytes == call.count - 1)
    }
}

/// A handler whose context lets a test call a decoder directly; what it fires reaches the
/// embedded channel's inbound queue.
private final class PassThrough: ChannelInboundHandler {
    typealias InboundIn = VarlinkFrame
}
