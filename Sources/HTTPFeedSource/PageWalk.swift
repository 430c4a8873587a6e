import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import NIOHTTPCompression
import NIOPosix
import NIOSSL
import Synchronization
import SyncCore

/// A backfill's older pages over one keep-alive connection of SwiftNIO's own.
///
/// A backfill is a chain: every page's request needs the `Link` header of the page before. Over
/// AsyncHTTPClient, each link of that chain went from the response's read to the caller's task,
/// through the coordinator's actor and the request's tasks, into the pool and down to the
/// socket: ~150 µs a page on loopback, as long in all as the server's own answers
/// (BENCHMARKS.md). Here the handler tells the caller a success's links as its headers are read;
/// the backfill's next request, started from there, runs right after that read on the same
/// thread and is written to the connection at once (or as the response ends, if it is still
/// being read), with no pool, timeout task or other thread on the way.
///
/// The next request goes out as soon as a response is complete on the wire, before its body is
/// decompressed and handed on: the server works on the next page while this one is decoded
/// (a backfill of 100,000 items over loopback took ~10% less time; BENCHMARKS.md). Still only one
/// request is on the connection at a time (no pipelining), so any HTTP/1.1 server works, and
/// nothing is ever asked for that a caller did not ask for. Only a success is
/// answered here: a redirect is handed back to the caller, which follows it over
/// AsyncHTTPClient like any other request; other statuses become the same ``FeedError``s. All
/// state lives on one event loop.
final class PageWalk: Sendable {
    /// What a walked request gave.
    enum Answer: Sendable {
        /// A 2xx response: its body (decompressed), its `Link` headers and all its header fields.
        case page(ByteBuffer, links: [WebLink], headers: HTTPHeaders)
        /// A 3xx: the caller asks again through the pool, which follows redirects by its rules.
        case redirect
    }

    /// What every request carries and what the connection needs: the same for all of a feed's pages.
    struct Settings: Sendable {
        var origin: String
        var host: String
        var port: Int
        /// The `Host` header: the host, bracketed if IPv6, and the port unless the scheme's own.
        var hostHeader: String
        /// The TLS context for https; `nil` for http.
        var tls: NIOSSLContext?
        var connectTimeout: TimeAmount
        var idleTimeout: TimeAmount
        var maxBodyBytes: Int
        var decompressionLimit: Int?
        /// From when a request goes out until its response has ended.
        var requestTimeout: Duration
    }

    private let loop: any EventLoop
    private let state: NIOLoopBoundBox<WalkState?>
    let settings: Settings
    /// Set when the client shut down: the walk opens no connection any more.
    private let retired = Atomic<Bool>(false)

    /// A walk for `url`'s origin, or `nil` for a scheme other than http and https, or a TLS
    /// configuration NIOSSL refuses (the pool then reports why, on the first request).
    init?(
        for url: URL, tls: TLSConfiguration?, options: HTTPFeedClient.Options, maxBodyBytes: Int, requestTimeout: Duration,
        loop: any EventLoop
    ) {
        guard let scheme = url.scheme?.lowercased(), let host = url.host, !host.isEmpty else { return nil }
        var context: NIOSSLContext?
        switch scheme {
        case "http": context = nil
        case "https":
            var configuration = tls ?? TLSDefaults.client()
            // This connection speaks HTTP/1.1 only; the pool may negotiate HTTP/2.
            configuration.applicationProtocols = ["http/1.1"]
            guard let made = try? NIOSSLContext(configuration: configuration) else { return nil }
            context = made
        default: return nil
        }
        let defaultPort = scheme == "https" ? 443 : 80
        let port = url.port ?? defaultPort
        let bracketed = host.contains(":") ? "[\(host)]" : host
        settings = Settings(
            origin: url.origin, host: host, port: port, hostHeader: port == defaultPort ? bracketed : "\(bracketed):\(port)", tls: context,
            connectTimeout: TimeAmount(options.connectTimeout), idleTimeout: TimeAmount(options.idleTimeout),
            maxBodyBytes: maxBodyBytes, decompressionLimit: options.decompression ? options.maxDecompressedBytes : nil,
            requestTimeout: requestTimeout)
        self.loop = loop
        state = NIOLoopBoundBox.makeEmptyBox(valueType: WalkState.self, eventLoop: loop)
    }

    /// Whether `host` is an IPv4 or IPv6 address rather than a name.
    static func isAddressLiteral(_ host: String) -> Bool {
        host.contains(":") || host.allSatisfy { $0.isASCII && ($0.isNumber || $0 == ".") }
    }

    deinit {
        let state = self.state
        loop.execute { state.value?.close() }
    }

    /// Closes the connection for good (the client shut down), failing what is on it or
    /// waiting, and waits until it is closed.
    func close() async {
        retired.store(true, ordering: .sequentiallyConsistent)
        let state = self.state, loop = self.loop
        let closed = loop.flatSubmit { state.value?.close() ?? loop.makeSucceededVoidFuture() }
        try? await closed.get()
    }

    /// The event loop the walk reads its responses on, where it tells a success's links.
    var executor: any SerialExecutor { loop.executor }

    /// Requests waiting behind the one on the connection.
    func waiting() async -> Int {
        let state = self.state
        return (try? await loop.submit { state.value?.waitingCount ?? 0 }.get()) ?? 0
    }

    /// Tells `links` to `onLinks` on the walk's event loop, as the walk itself does: for an
    /// answer that came through the pool instead.
    func tell(_ links: [WebLink], to onLinks: @escaping @Sendable ([WebLink]) -> Void) {
        if loop.inEventLoop { onLinks(links) } else { loop.execute { onLinks(links) } }
    }

    /// Tells `cursor` to `known` on the walk's event loop and returns once it has: for an older
    /// cursor known only once the body is read.
    func tellNow(_ cursor: String?, to known: @escaping @Sendable (String?) -> Void) async throws {
        if loop.inEventLoop { known(cursor) } else { try await loop.submit { known(cursor) }.get() }
    }

    /// Whether `url` is on this walk's origin.
    func serves(_ url: URL) -> Bool { url.origin == settings.origin }

    /// GETs `url` on the walk's connection (opened when there is none), with `headers`.
    ///
    /// - Parameter onLinks: told the links of a success as soon as its headers are in. It may
    ///   run on the event loop, inside the read of the response: it must only start work.
    /// - Throws: ``FeedError`` for an error status or a body over the limit, the channel's error
    ///   when the connection fails, `CancellationError` when the task is cancelled (which closes
    ///   the connection, as AsyncHTTPClient does for a cancelled request).
    /// - Parameter onWireBytes: told the response's size on the wire (``WireSize``) once it has
    ///   ended, whatever its status.
    func fetch(
        _ url: URL, headers: HTTPHeaders, label: RequestLabel, onLinks: (@Sendable ([WebLink]) -> Void)?,
        onWireBytes: (@Sendable (Int) -> Void)? = nil
    ) async throws -> Answer {
        // What the pool answers once shut down.
        if retired.load(ordering: .sequentiallyConsistent) { throw HTTPClientError.alreadyShutdown }
        let promise = loop.makePromise(of: Answer.self)
        let ask = Ask(url: url, headers: headers, label: label, onLinks: onLinks, onWireBytes: onWireBytes, promise: promise)
        let state = self.state, settings = self.settings, loop = self.loop
        @Sendable func start() {
            // Checked again on the loop, where the shutdown's close ran: no connection opens after it.
            if self.retired.load(ordering: .sequentiallyConsistent) {
                promise.fail(HTTPClientError.alreadyShutdown)
                return
            }
            if state.value == nil { state.value = WalkState(settings: settings, loop: loop, box: state) }
            state.value?.ask(ask)
        }
        // In place when the caller already runs on the loop: the chain stays on its thread.
        if loop.inEventLoop { start() } else { loop.execute(start) }
        return try await withTaskCancellationHandler {
            try await promise.futureResult.get()
        } onCancel: {
            loop.execute { state.value?.cancel(promise) }
        }
    }
}

/// One caller's request.
struct Ask {
    var url: URL
    var headers: HTTPHeaders
    var label: RequestLabel
    var onLinks: (@Sendable ([WebLink]) -> Void)?
    var onWireBytes: (@Sendable (Int) -> Void)?
    var promise: EventLoopPromise<PageWalk.Answer>
}

/// The walk's connection and requests, on its event loop only.
final class WalkState {
    /// A request on the connection, or waiting for it.
    final class Request {
        /// The caller waiting for it; `nil` once it gave up.
        var ask: Ask?
        var links: [WebLink]?
        var status: HTTPResponseStatus?
        var responseHeaders = HTTPHeaders()
        var body = ByteBuffer()
        /// Body bytes read, kept or not (after content decoding).
        var bodyBytesRead = 0
        var failure: (any Error)?
        /// The server closes the connection after this response (`Connection: close`, or HTTP/1.0).
        var closesConnection = false
        /// Sent on a connection that had answered before: a close before any answer is the
        /// server dropping an idle connection as the request went out, and is retried once.
        var onReusedConnection = false
        var retried = false
        /// Ends the request if its response has not ended within the request timeout.
        var deadline: Scheduled<Void>?
        /// Its number among the requests written, which its timer names.
        var serial = 0

        init(_ ask: Ask) {
            self.ask = ask
        }
    }

    private let settings: PageWalk.Settings
    private let loop: any EventLoop
    private let box: NIOLoopBoundBox<WalkState?>
    /// Tells this state from those before it in the box, for a connection or a timer that
    /// completes late; numbers, because a new object may have an old one's address.
    private let generation = WalkState.generations.add(1, ordering: .relaxed).newValue
    private static let generations = Atomic<Int>(0)
    /// Tells a request's timer from another's, for the same reason.
    private var requestsWritten = 0
    private var channel: (any Channel)?
    private var connecting = false
    private var answered = 0
    /// The request on the connection; its deadline goes with it.
    private var current: Request? {
        didSet { if oldValue !== current { oldValue?.deadline?.cancel() } }
    }
    /// Asked for, to go out after `current`, in order.
    private var queue: [Request] = []
    /// Written once `current`'s response was complete on the wire, before its body was decoded:
    /// current next. Set only while that response is handed through the pipeline.
    private var writtenEarly: Request?
    /// Closes the connection once it has been idle for the idle timeout. Armed once and moved
    /// on when it fires, not re-armed for every request: a backfill's connection goes idle
    /// between every two pages, for microseconds.
    private var idleTimer: Scheduled<Void>?
    /// When the connection last went idle.
    private var idleSince = NIODeadline.now()

    init(settings: PageWalk.Settings, loop: any EventLoop, box: NIOLoopBoundBox<WalkState?>) {
        self.settings = settings
        self.loop = loop
        self.box = box
    }

    /// Requests asked for and not yet written.
    var waitingCount: Int { queue.count }

    func ask(_ ask: Ask) {
        queue.append(Request(ask))
        sendNext()
    }

    /// A caller gave up (its task was cancelled, or its deadline passed).
    func cancel(_ promise: EventLoopPromise<PageWalk.Answer>) {
        let matches = { (request: Request) in request.ask?.promise.futureResult === promise.futureResult }
        if let index = queue.firstIndex(where: matches) {
            queue.remove(at: index)
        } else if let request = [current, writtenEarly].compactMap({ $0 }).first(where: matches) {
            request.ask = nil
            // A request nobody waits for holds the connection until it ends; a stalled server
            // would hold it forever. Closing it is what AsyncHTTPClient does too; the requests
            // other callers wait for go out on a new one.
            dropConnection()
        } else {
            return
        }
        promise.fail(CancellationError())
    }

    /// Closes the connection under the request on it, which nobody waits for any more, and
    /// sends the waiting ones on a new connection.
    private func dropConnection() {
        let channel = detachChannel()
        current = nil
        requeueWrittenEarly()
        channel?.close(promise: nil)
        sendNext()
        if self.channel == nil, !connecting { box.value = nil }
    }

    /// Closes the connection: every request on it or waiting fails.
    @discardableResult
    func close() -> EventLoopFuture<Void> {
        let channel = detachChannel()
        fail(current, with: ChannelError.ioOnClosedChannel)
        current = nil
        // As if it had waited: it fails with the others.
        requeueWrittenEarly()
        let waiting = queue
        queue = []
        for request in waiting { fail(request, with: CancellationError()) }
        // A connection still being made is closed as it completes: it finds another state, or none.
        box.value = nil
        guard let channel else { return loop.makeSucceededVoidFuture() }
        let closed = loop.makePromise(of: Void.self)
        channel.close(promise: closed)
        // Closed already (by the server, say) is closed.
        return closed.futureResult.recover { _ in }
    }

    // MARK: The connection

    /// Takes the connection off this state, with its idle timer, for the caller to close.
    private func detachChannel() -> (any Channel)? {
        idleTimer?.cancel()
        idleTimer = nil
        defer { channel = nil }
        return channel
    }

    /// `current`'s response is complete on the wire, its body not yet decompressed or handed on:
    /// after a success that keeps the connection, the next request goes out now.
    func responseFramed(on reading: any Channel) {
        guard reading === channel, let request = current, writtenEarly == nil, request.ask != nil, request.failure == nil,
              !request.closesConnection, let status = request.status, (200..<300).contains(status.code),
              let channel, !queue.isEmpty
        else { return }
        let next = queue.removeFirst()
        writtenEarly = next
        write(next, on: channel, asCurrent: false)
        // The connection has answered: one that closes before answering this is an idle drop.
        next.onReusedConnection = true
    }

    /// The request written early goes first again, on the next connection: the one it went out
    /// on is gone before its answer (a GET, so asking again is safe), unless nobody waits for it.
    private func requeueWrittenEarly() {
        guard let early = writtenEarly else { return }
        writtenEarly = nil
        early.deadline?.cancel()
        early.deadline = nil
        if early.ask != nil { queue.insert(early, at: 0) }
    }

    private func sendNext() {
        guard current == nil, !connecting else { return }
        if let early = writtenEarly {
            // On the connection already: it only becomes the one whose answer comes next.
            writtenEarly = nil
            current = early
            return
        }
        guard let channel else {
            if !queue.isEmpty { connect() }
            return
        }
        guard !queue.isEmpty else {
            armIdleTimerIfIdle()
            return
        }
        let request = queue.removeFirst()
        write(request, on: channel)
    }

    private func write(_ request: Request, on channel: any Channel, asCurrent: Bool = true) {
        guard let ask = request.ask else { return }
        if asCurrent { current = request }
        requestsWritten += 1
        request.serial = requestsWritten
        let box = self.box, generation = self.generation, serial = request.serial
        request.deadline = loop.scheduleTask(in: TimeAmount(settings.requestTimeout)) {
            guard let state = box.value, state.generation == generation else { return }
            state.timedOut(serial)
        }
        request.onReusedConnection = answered > 0
        var head = HTTPRequestHead(version: .http1_1, method: .GET, uri: Self.target(ask.url))
        head.headers = ask.headers
        head.headers.replaceOrAdd(name: "Host", value: settings.hostHeader)
        channel.write(HTTPClientRequestPart.head(head), promise: nil)
        channel.writeAndFlush(HTTPClientRequestPart.end(nil), promise: nil)
    }

    private func connect() {
        connecting = true
        answered = 0
        let settings = self.settings, box = self.box
        var bootstrap = ClientBootstrap(group: loop).connectTimeout(settings.connectTimeout)
        bootstrap = bootstrap.channelInitializer { channel in
            channel.eventLoop.makeCompletedFuture {
                let operations = channel.pipeline.syncOperations
                if let tls = settings.tls {
                    // An address is not a name to send or to check: NIOSSL then checks the
                    // certificate's IP entries against the address connected to, as the pool does.
                    let name = PageWalk.isAddressLiteral(settings.host) ? nil : settings.host
                    try operations.addHandler(NIOSSLClientHandler(context: tls, serverHostname: name))
                }
                try operations.addHTTPClientHandlers()
                try operations.addHandler(FramedResponseHandler(box: box, holdLimit: settings.maxBodyBytes))
                if let limit = settings.decompressionLimit {
                    try operations.addHandler(NIOHTTPResponseDecompressor(limit: .size(limit)))
                }
                try operations.addHandler(WalkHandler(box: box))
            }
        }
        let generation = self.generation
        bootstrap.connect(host: settings.host, port: settings.port).whenComplete { result in
            guard let state = box.value, state.generation == generation else {
                if case .success(let channel) = result { channel.close(promise: nil) }
                return
            }
            state.connected(result)
        }
    }

    private func connected(_ result: Result<any Channel, any Error>) {
        connecting = false
        switch result {
        case .success(let channel):
            self.channel = channel
            sendNext()
        case .failure(let error):
            // Every request waiting for this connection gets the reason it could not be made.
            let waiting = queue
            queue = []
            for request in waiting { fail(request, with: error) }
            box.value = nil
        }
    }

    private func armIdleTimerIfIdle() {
        guard current == nil, queue.isEmpty, channel != nil else { return }
        idleSince = .now()
        if idleTimer == nil { armIdleTimer(at: idleSince + settings.idleTimeout) }
    }

    private func armIdleTimer(at deadline: NIODeadline) {
        let box = self.box
        idleTimer = loop.scheduleTask(deadline: deadline) { box.value?.idleTimerFired() }
    }

    private func idleTimerFired() {
        idleTimer = nil
        guard current == nil, queue.isEmpty, channel != nil else { return }
        let deadline = idleSince + settings.idleTimeout
        if deadline > .now() { armIdleTimer(at: deadline) } else { close() }
    }

    // MARK: The response, from the handler

    func received(_ part: HTTPClientResponsePart, on reading: any Channel) {
        guard reading === channel, let request = current else { return }
        switch part {
        case .head(let head):
            request.status = head.status
            request.responseHeaders = head.headers
            request.closesConnection = !head.isKeepAlive
            guard (200..<300).contains(head.status.code) else { return }
            guard let ask = request.ask else { return }
            request.failure = HTTPFeedSource.declaredTooLarge(head.headers, limit: settings.maxBodyBytes, label: ask.label)
            guard request.failure == nil else { return }
            let links = LinkHeader.parse(head.headers["link"], base: ask.url)
            request.links = links
            // May ask for the next page, which then goes out as this response ends.
            ask.onLinks?(links)
        case .body(var part):
            request.bodyBytesRead += part.readableBytes
            guard let status = request.status, (200..<300).contains(status.code), request.failure == nil, let ask = request.ask else { return }
            if request.body.readableBytes + part.readableBytes > settings.maxBodyBytes {
                request.failure = FeedError(.tooLarge, "\(ask.label): the body exceeds the limit of \(settings.maxBodyBytes) bytes")
                return
            }
            request.body.writeBuffer(&part)
        case .end:
            answered += 1
            current = nil
            guard let ask = request.ask else { return }
            if let status = request.status {
                ask.onWireBytes?(WireSize.response(status: status, headers: request.responseHeaders, bodyBytesRead: request.bodyBytesRead))
            }
            let answer = answer(to: request, ask)
            if request.failure != nil {
                // The rest of an oversized body is not read: the connection goes with it.
                ask.promise.completeWith(answer)
                close()
                return
            }
            if request.closesConnection {
                // Nothing more goes on this connection: the next request opens a new one.
                detachChannel()?.close(promise: nil)
            }
            // The next request goes out before the caller hears of this answer: hearing of it
            // runs the caller's code, and the server would wait for that.
            sendNext()
            ask.promise.completeWith(answer)
        }
    }

    private func answer(to request: Request, _ ask: Ask) -> Result<PageWalk.Answer, any Error> {
        if let failure = request.failure { return .failure(failure) }
        guard let status = request.status else { return .failure(ChannelError.ioOnClosedChannel) }
        switch status.code {
        case 200..<300: return .success(.page(request.body, links: request.links ?? [], headers: request.responseHeaders))
        case 300..<400: return .success(.redirect)
        default: return .failure(HTTPFeedSource.statusError(status, request.responseHeaders, label: ask.label))
        }
    }

    /// The request on the connection got no complete response in time: it fails as the pool's
    /// would, and the requests waiting behind it go out on a new connection, each with its full time.
    private func timedOut(_ serial: Int) {
        guard let request = current, request.serial == serial, let ask = request.ask else { return }
        request.ask = nil
        dropConnection()
        ask.promise.fail(HTTPFeedSource.timeoutError(ask.label, after: settings.requestTimeout))
    }

    /// The connection failed or closed under a request.
    func failed(_ error: any Error, on failing: any Channel) {
        guard failing === channel else { return }
        detachChannel()?.close(promise: nil)
        // Behind the failed one in the queue, where the retried one, if any, goes in front.
        requeueWrittenEarly()
        if let request = current {
            current = nil
            if request.status == nil, request.onReusedConnection, !request.retried, request.ask != nil {
                // The server closed an idle keep-alive connection as the request went out.
                request.retried = true
                queue.insert(request, at: 0)
            } else {
                fail(request, with: error)
            }
        }
        if queue.isEmpty { box.value = nil } else { sendNext() }
    }

    private func fail(_ request: Request?, with error: any Error) {
        request?.ask?.promise.fail(error)
        request?.ask = nil
    }

    /// Path and query, as the request line wants them.
    static func target(_ url: URL) -> String {
        let path = url.path(percentEncoded: true)
        let query = url.query(percentEncoded: true)
        return (path.isEmpty ? "/" : path) + (query.map { "?" + $0 } ?? "")
    }
}

/// Holds a response's body parts, as read (compressed), until its end: tells the walk that the
/// response is complete on the wire, so the next request goes out, then passes them on to be
/// decompressed and read.
///
/// A body longer than `holdLimit` is passed on as it comes, so the walk's own limits see it as
/// before and nothing grows without bound here; its next request then goes out after it.
private final class FramedResponseHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPClientResponsePart
    typealias InboundOut = HTTPClientResponsePart

    private let box: NIOLoopBoundBox<WalkState?>
    private let holdLimit: Int
    private var held: [ByteBuffer] = []
    private var heldBytes = 0
    /// This response's body goes on as it comes.
    private var passing = false

    init(box: NIOLoopBoundBox<WalkState?>, holdLimit: Int) {
        self.box = box
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
            if !passing { box.value?.responseFramed(on: context.channel) }
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
private final class WalkHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPClientResponsePart

    private let box: NIOLoopBoundBox<WalkState?>
    private var ended = false

    init(box: NIOLoopBoundBox<WalkState?>) {
        self.box = box
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        box.value?.received(unwrapInboundIn(data), on: context.channel)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        end(error, context.channel)
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        end(ChannelError.eof, context.channel)
    }

    private func end(_ error: any Error, _ channel: any Channel) {
        guard !ended else { return }
        ended = true
        box.value?.failed(error, on: channel)
    }
}
