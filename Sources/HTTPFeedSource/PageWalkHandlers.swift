import NIOCore
import NIOHTTP1

/// Holds a response's body parts, as read (compressed), until its end: tells the walk that the
/// response is complete on the wire, so the next request goes out, then passes them on to be
/// decompressed and read.
///
/// A body longer than `holdLimit` is passed on as it comes, so the walk's own limits see it as
/// before and nothing grows without bound here; its next request then goes out after it.
final class FramedResponseHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPClientResponsePart
    typealias InboundOut = HTTPClientResponsePart

    private let box: NIOLoopBoundBox<WalkState?>
    private let connection: PageWalkMachine.ConnectionID
    private let holdLimit: Int
    private var held: [ByteBuffer] = []
    private var heldBytes = 0
    /// This response's body goes on as it comes.
    private var passing = false

    /// A handler for the walk's `connection`, told through `box`.
    init(box: NIOLoopBoundBox<WalkState?>, connection: PageWalkMachine.ConnectionID, holdLimit: Int) {
        self.box = box
        self.connection = connection
        self.holdLimit = holdLimit
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head:
            passing = false
            context.fireChannelRead(data)
        case .body(let part):
            if passing {
                context.fireChannelRead(data)
                return
            }
            held.append(part)
            heldBytes += part.readableBytes
            if heldBytes > holdLimit {
                passing = true
                passOn(context)
            }
        case .end:
            if !passing { box.value?.responseFramed(on: connection) }
            passOn(context)
            context.fireChannelRead(data)
        }
    }

    private func passOn(_ context: ChannelHandlerContext) {
        let parts = held
        held = []
        heldBytes = 0
        for part in parts { context.fireChannelRead(wrapInboundOut(.body(part))) }
    }
}

/// Hands the responses and the connection's end to the walk.
final class WalkHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPClientResponsePart

    private let box: NIOLoopBoundBox<WalkState?>
    private let connection: PageWalkMachine.ConnectionID
    private var ended = false

    /// A handler for the walk's `connection`, told through `box`.
    init(box: NIOLoopBoundBox<WalkState?>, connection: PageWalkMachine.ConnectionID) {
        self.box = box
        self.connection = connection
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        box.value?.received(unwrapInboundIn(data), on: connection)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        end(error)
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        end(ChannelError.eof)
    }

    private func end(_ error: any Error) {
        guard !ended else { return }
        ended = true
        box.value?.failed(error, on: connection)
    }
}
