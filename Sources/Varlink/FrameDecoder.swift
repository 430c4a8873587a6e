import NIOCore

/// One NUL-terminated message, or the note that a message outgrew the limit.
enum VarlinkFrame: Sendable {
    case message(ByteBuffer)
    case tooLarge

    /// The bytes read from the socket that the frame stands for, as counted against the
    /// queue bounds: the message and its NUL. A too-large message's bytes were thrown away
    /// (and counted off) as they came.
    var byteCount: Int {
        switch self {
        case .message(let buffer): buffer.readableBytes + 1
        case .tooLarge: 0
        }
    }
}

/// Splits the byte stream at NUL bytes, refusing to buffer more than `maxMessageSize` bytes of
/// an unfinished message so a peer cannot make us hold unbounded memory.
struct VarlinkFrameDecoder: ByteToMessageDecoder {
    typealias InboundOut = VarlinkFrame

    let maxMessageSize: Int
    /// A server connection's account of what it holds, told of each frame cut and each byte
    /// thrown away; `nil` on the client side.
    let lifecycle: ConnectionLifecycle?
    private var overflowed = false

    init(maxMessageSize: Int, lifecycle: ConnectionLifecycle? = nil) {
        self.maxMessageSize = maxMessageSize
        self.lifecycle = lifecycle
    }

    mutating func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
        if overflowed {
            // After an oversized message nothing more is read: the stream is out of sync.
            discardAll(&buffer)
            return .needMoreData
        }
        let view = buffer.readableBytesView
        if let nul = view.firstIndex(of: 0) {
            let length = nul - view.startIndex
            if length > maxMessageSize {
                return overflow(context: context, buffer: &buffer)
            }
            // A copy, not a slice: a slice would keep the whole read buffer alive while the call
            // waits in the queue, so the queue's bounds would not bound the memory held. From the
            // channel's allocator, as the buffers it is read into (``ConnectionBuffers``).
            var message = context.channel.allocator.buffer(capacity: length)
            message.writeBytes(buffer.readableBytesView.prefix(length))
            buffer.moveReaderIndex(forwardBy: length + 1)
            lifecycle?.framed()
            context.fireChannelRead(wrapInboundOut(.message(message)))
            return .continue
        }
        if buffer.readableBytes > maxMessageSize {
            return overflow(context: context, buffer: &buffer)
        }
        Self.shrink(&buffer, allocator: context.channel.allocator)
        return .needMoreData
    }

    /// Moves the start of the next message into a buffer of its own size when the one it is in
    /// is more than twice that. NIO keeps the buffer it gathers bytes in while it has readable
    /// bytes, and grows it by doubling: the few bytes read past a large call would otherwise
    /// keep that call's storage (128 KiB past a 64 KiB call) for as long as the next message
    /// takes to come, on every connection that sent one.
    static func shrink(_ buffer: inout ByteBuffer, allocator: ByteBufferAllocator) {
        let readable = buffer.readableBytes
        guard readable > 0, buffer.storageCapacity > 2 * max(readable, smallestBuffer) else { return }
        var moved = allocator.buffer(capacity: readable)
        moved.writeBuffer(&buffer)
        buffer = moved
    }

    /// A buffer this small is not worth moving.
    static let smallestBuffer = 4096

    mutating func decodeLast(context: ChannelHandlerContext, buffer: inout ByteBuffer, seenEOF: Bool) throws -> DecodingState {
        while try decode(context: context, buffer: &buffer) == .continue {}
        // A trailing message without its NUL is incomplete: drop it.
        discardAll(&buffer)
        return .needMoreData
    }

    private mutating func overflow(context: ChannelHandlerContext, buffer: inout ByteBuffer) -> DecodingState {
        overflowed = true
        lifecycle?.overflowed()
        discardAll(&buffer)
        lifecycle?.framed()
        context.fireChannelRead(wrapInboundOut(.tooLarge))
        return .needMoreData
    }

    private func discardAll(_ buffer: inout ByteBuffer) {
        lifecycle?.discarded(bytes: buffer.readableBytes)
        buffer.moveReaderIndex(forwardBy: buffer.readableBytes)
    }
}
