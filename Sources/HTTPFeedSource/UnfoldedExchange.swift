import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import SyncCore

/// Replaces each obs-fold in a response's header section with one space, as RFC 9112 §5.2 asks
/// of a user agent, then passes every later byte through untouched.
///
/// NIO's HTTP parser (llhttp, strict) refuses a header field continued on the next line with
/// leading whitespace, which some servers still send (a long `Link` header split over two
/// lines). Framing after the header section is left to the parser behind this stage; it only
/// works on a connection that carries one response (``UnfoldedExchange`` sends
/// `Connection: close`), as it cannot tell where a body ends and the next header section starts.
struct HeaderUnfolder: ByteToMessageDecoder {
    typealias InboundOut = ByteBuffer

    /// The longest header section accepted: more is refused as the parser would.
    static let maxHeaderBytes = 64 << 10

    private var headerRead = false

    mutating func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
        if headerRead {
            guard buffer.readableBytes > 0, let rest = buffer.readSlice(length: buffer.readableBytes) else { return .needMoreData }
            context.fireChannelRead(wrapInboundOut(rest))
            return .continue
        }
        guard let end = Self.headerEnd(in: buffer.readableBytesView) else {
            if buffer.readableBytes > Self.maxHeaderBytes { throw HTTPParserError.headerOverflow }
            return .needMoreData
        }
        let length = end - buffer.readerIndex
        let head = buffer.readBytes(length: length) ?? []
        headerRead = true
        context.fireChannelRead(wrapInboundOut(context.channel.allocator.buffer(bytes: Self.unfold(head))))
        return .continue
    }

    mutating func decodeLast(context: ChannelHandlerContext, buffer: inout ByteBuffer, seenEOF: Bool) throws -> DecodingState {
        if !headerRead, Self.headerEnd(in: buffer.readableBytesView) == nil {
            // A header section cut short: passed on as it is, for the parser to report.
            headerRead = true
        }
        return try decode(context: context, buffer: &buffer)
    }

    /// The index just past the blank line that ends the header section (CRLF CRLF, or bare LFs).
    static func headerEnd(in bytes: ByteBufferView) -> Int? {
        var previousWasLF = false
        for index in bytes.indices {
            switch bytes[index] {
            case UInt8(ascii: "\n"):
                if previousWasLF { return index + 1 }
                previousWasLF = true
            case UInt8(ascii: "\r"):
                continue
            default:
                previousWasLF = false
            }
        }
        return nil
    }

    /// `head` with every line break that is followed by a space or tab, and that whitespace,
    /// replaced by one space. The status line is never continued: only breaks after it count.
    static func unfold(_ head: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(head.count)
        var index = 0
        var pastStatusLine = false
        while index < head.count {
            let byte = head[index]
            guard byte == UInt8(ascii: "\r") || byte == UInt8(ascii: "\n") else {
                out.append(byte)
                index += 1
                continue
            }
            // A line break: CRLF or a bare LF.
            var next = index + 1
            if byte == UInt8(ascii: "\r"), next < head.count, head[next] == UInt8(ascii: "\n") { next += 1 }
            if pastStatusLine, next < head.count, head[next] == UInt8(ascii: " ") || head[next] == UInt8(ascii: "\t") {
                while next < head.count, head[next] == UInt8(ascii: " ") || head[next] == UInt8(ascii: "\t") { next += 1 }
                // Trailing whitespace of the line above goes too: one space joins the two parts.
                while let last = out.last, last == UInt8(ascii: " ") || last == UInt8(ascii: "\t") { out.removeLast() }
                out.append(UInt8(ascii: " "))
            } else {
                out.append(contentsOf: head[index..<next])
                pastStatusLine = true
            }
            index = next
        }
        return out
    }
}

/// One GET on a connection of its own, read through ``HeaderUnfolder``: how a source asks again
/// a server whose response the parser refused for a folded header line.
///
/// The request carries `Connection: close`, so the connection holds one response; its body is
/// decompressed, bounded and timed as a walked page's (``PageWalk/Settings``).
enum UnfoldedExchange {
    /// A response: its head and its whole body (decompressed).
    struct Response {
        var head: HTTPResponseHead
        var body: ByteBuffer
        /// Body bytes as they came on the wire, before decompression.
        var bodyBytesRead: Int
    }

    /// Sends `GET url` with `headers` and reads the response; fails with the channel's or the
    /// parser's error, or ``FeedError`` (`.tooLarge`) for a body over the limit. Cancelling the
    /// task closes the connection.
    static func fetch(_ url: URL, headers: HTTPHeaders, label: RequestLabel, settings: PageWalk.Settings, loop: any EventLoop) async throws -> Response {
        let promise = loop.makePromise(of: Response.self)
        let bootstrap = ClientBootstrap(group: loop).connectTimeout(settings.connectTimeout).channelInitializer { channel in
            channel.eventLoop.makeCompletedFuture {
                try settings.configure(
                    channel.pipeline.syncOperations, beforeHTTP: ByteToMessageHandler(HeaderUnfolder()), wire: WireCounter(),
                    reader: ResponseCollector(promise: promise, limit: settings.maxBodyBytes, label: label))
            }
        }
        let channel: any Channel
        do {
            channel = try await bootstrap.connect(host: settings.host, port: settings.port).get()
        } catch {
            promise.fail(error)
            throw error
        }
        var head = HTTPRequestHead(version: .http1_1, method: .GET, uri: WalkState.target(url))
        head.headers = headers
        head.headers.replaceOrAdd(name: "Host", value: settings.hostHeader)
        head.headers.replaceOrAdd(name: "Connection", value: "close")
        channel.write(HTTPClientRequestPart.head(head), promise: nil)
        channel.writeAndFlush(HTTPClientRequestPart.end(nil), promise: nil)
        return try await withTaskCancellationHandler {
            defer { channel.close(promise: nil) }
            return try await promise.futureResult.get()
        } onCancel: {
            channel.close(promise: nil)
        }
    }
}

/// Counts a response's body bytes as they came, before the decompressor behind it.
private final class WireCounter: ChannelInboundHandler {
    typealias InboundIn = HTTPClientResponsePart
    typealias InboundOut = HTTPClientResponsePart

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .body(let part) = unwrapInboundIn(data) {
            context.fireUserInboundEventTriggered(WireBytes(count: part.readableBytes))
        }
        context.fireChannelRead(data)
    }
}

/// Body bytes read off the wire, from ``WireCounter`` to ``ResponseCollector``.
private struct WireBytes {
    var count: Int
}

/// Gathers one response and completes the promise with it, or with why there is none.
private final class ResponseCollector: ChannelInboundHandler {
    typealias InboundIn = HTTPClientResponsePart

    private let promise: EventLoopPromise<UnfoldedExchange.Response>
    private let limit: Int
    private let label: RequestLabel
    private var head: HTTPResponseHead?
    private var body = ByteBuffer()
    private var bodyBytesRead = 0
    private var done = false

    init(promise: EventLoopPromise<UnfoldedExchange.Response>, limit: Int, label: RequestLabel) {
        self.promise = promise
        self.limit = limit
        self.label = label
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !done else { return }
        switch unwrapInboundIn(data) {
        case .head(let received):
            head = received
        case .body(var part):
            guard body.readableBytes + part.readableBytes <= limit else {
                finish(.failure(FeedError(.tooLarge, "\(label): the body exceeds the limit of \(limit) bytes")), context)
                return
            }
            body.writeBuffer(&part)
        case .end:
            guard let head else {
                finish(.failure(ChannelError.eof), context)
                return
            }
            finish(.success(.init(head: head, body: body, bodyBytesRead: bodyBytesRead)), context)
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let wire = event as? WireBytes { bodyBytesRead += wire.count } else { context.fireUserInboundEventTriggered(event) }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        finish(.failure(error), context)
    }

    func channelInactive(context: ChannelHandlerContext) {
        finish(.failure(ChannelError.eof), context)
    }

    private func finish(_ result: Result<UnfoldedExchange.Response, any Error>, _ context: ChannelHandlerContext) {
        guard !done else { return }
        done = true
        promise.completeWith(result)
        context.close(promise: nil)
    }
}
