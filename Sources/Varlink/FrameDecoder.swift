import NIOCore

/// One NUL-terminated message, or the note that a message outgrew the limit.
enum VarlinkFrame: Sendable {
    case message(ByteBuffer)
    case tooLarge

    /// The bytes the frame holds, as counted against the queue bounds.
    var byteCount: Int {
        switch self {
        case .message(let buffer): buffer.readableBytes
        case .tooLarge: 0
        }
    }
}

/// Splits the byte stream at NUL bytes, refusing to buffer more than `maxMessageSize` bytes of
/// an unfinished message so a peer cannot make us hold unbounded memory.
struct VarlinkFrameDecoder: ByteToMessageDecoder {
    typealias InboundOut = VarlinkFrame

    let maxMessageSize: Int
    private var overflowed = false

    init(maxMessageSize: Int) {
        self.maxMessageSize = maxMessageSize
    }

    mutating func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
        if overflowed {
            // After an oversized message nothing more is read: the stream is out of sync.
            buffer.moveReaderIndex(forwardBy: buffer.readableBytes)
            return .needMoreData
        }
        let view = buffer.readableBytesView
        if let nul = view.firstIndex(of: 0) {
            let length = nul - view.startIndex
            if length > maxMessageSize {
                return overflow(context: context, buffer: &buffer)
            }
            // A copy, not a slice: a slice would keep the whole read buffer alive while the call
            // waits in the queue, so the queue's bounds would not bound the memory held.
            let message = ByteBuffer(bytes: buffer.readableBytesView.prefix(length))
            buffer.moveReaderIndex(forwardBy: length + 1)
            context.fireChannelRead(wrapInboundOut(.message(message)))
            return .continue
        }
        if buffer.readableBytes > maxMessageSize {
            return overflow(context: context, buffer: &buffer)
        }
        return .needMoreData
    }

    mutating func decodeLast(context: ChannelHandlerContext, buffer: inout ByteBuffer, seenEOF: Bool) throws -> DecodingState {
        while try decode(context: context, buffer: &buffer) == .continue {}
        // A trailing message without its NUL is incomplete: drop it.
        buffer.moveReaderIndex(forwardBy: buffer.readableBytes)
        return .needMoreData
    }

    private mutating func overflow(context: ChannelHandlerContext, buffer: inout ByteBuffer) -> DecodingState {
        overflowed = true
        buffer.moveReaderIndex(forwardBy: buffer.readableBytes)
        context.fireChannelRead(wrapInboundOut(.tooLarge))
        return .needMoreData
    }
}
