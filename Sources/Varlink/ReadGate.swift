import NIOCore

/// The first handler of a server connection: counts every byte read against the connection's
/// and its user's bounds, and lets a read through only while they have room.
///
/// Counting at the socket, rather than when a whole call reaches the queue, is what bounds the
/// memory a client can make the server hold: the part of a message the decoder has gathered,
/// the call NIO buffers ahead of the reader and the call the reader holds all count. A withheld
/// read leaves the bytes in the kernel, where the client's writes block; the gate reads again
/// when the lifecycle says bytes were released (``ConnectionLifecycle/onRoom(_:)``).
final class ReadGate: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let lifecycle: ConnectionLifecycle
    /// The most one `read()` can bring in: the channel's reads per wake-up times its receive
    /// allocator's maximum.
    private let readSize: Int
    /// A read was asked for and withheld.
    private var readWanted = false
    private var context: ChannelHandlerContext?

    init(lifecycle: ConnectionLifecycle, readSize: Int) {
        self.lifecycle = lifecycle
        self.readSize = readSize
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        let loop = context.eventLoop
        let gate = NIOLoopBound(self, eventLoop: loop)
        lifecycle.onRoom { loop.execute { gate.value.readIfRoom() } }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        lifecycle.onRoom(nil)
        self.context = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        lifecycle.read(bytes: unwrapInboundIn(data).readableBytes)
        context.fireChannelRead(data)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        lifecycle.readEnded()
        context.fireChannelReadComplete()
    }

    func read(context: ChannelHandlerContext) {
        if lifecycle.mayRead(readSize) {
            context.read()
        } else {
            readWanted = true
        }
    }

    /// Passes on the read that was withheld, once there is room.
    private func readIfRoom() {
        guard readWanted, let context, lifecycle.mayRead(readSize) else { return }
        readWanted = false
        context.read()
    }
}
