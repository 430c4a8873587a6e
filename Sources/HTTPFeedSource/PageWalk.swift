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
/// socket, which on loopback cost about as much as the server's own answers (measured:
/// BENCHMARKS.md, sync against the wire's floor). Here the handler tells the caller a success's links as its headers are read;
/// the backfill's next request, started from there, runs right after that read on the same
/// thread and is written to the connection at once (or as the response ends, if it is still
/// being read), with no pool, timeout task or other thread on the way.
///
/// The next request goes out as soon as a response is complete on the wire, before its body is
/// decompressed and handed on: the server works on the next page while this one is decoded.
/// Still only one
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

        /// Builds a connection's pipeline to the origin: TLS for https, then `beforeHTTP` (it sees
        /// the bytes NIO's HTTP/1 decoder will read), NIO's HTTP/1 client handlers, `wire` (it
        /// sees the response's parts as they came, still compressed), the decompressor when the
        /// client decompresses, and `reader`, which takes the response.
        func configure(
            _ operations: ChannelPipeline.SynchronousOperations, beforeHTTP: (any ChannelHandler)? = nil, wire: any ChannelHandler,
            reader: any ChannelHandler
        ) throws {
            if let tls {
                // An address is not a name to send or to check: NIOSSL then checks the
                // certificate's IP entries against the address connected to, as the pool does.
                let name = PageWalk.isAddressLiteral(host) ? nil : host
                try operations.addHandler(NIOSSLClientHandler(context: tls, serverHostname: name))
            }
            if let beforeHTTP { try operations.addHandler(beforeHTTP) }
            try operations.addHTTPClientHandlers()
            try operations.addHandler(wire)
            if let decompressionLimit {
                try operations.addHandler(NIOHTTPResponseDecompressor(limit: .size(decompressionLimit)))
            }
            try operations.addHandler(reader)
        }
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

/// The walk's I/O on its event loop only: performs what its ``PageWalkMachine`` decides, and
/// keeps what the machine's ids stand for (callers, responses, channels, timers).
final class WalkState {
    private typealias Machine = PageWalkMachine

    /// A caller's request and what has been read of its response.
    private struct Exchange {
        var ask: Ask
        var response = PageWalkResponse()
    }

    private let settings: PageWalk.Settings
    private let loop: any EventLoop
    private let box: NIOLoopBoundBox<WalkState?>
    private var machine: Machine
    private var exchanges: [Machine.RequestID: Exchange] = [:]
    private var channels: [Machine.ConnectionID: any Channel] = [:]
    private var timers: [Machine.Timer: Scheduled<Void>] = [:]

    init(settings: PageWalk.Settings, loop: any EventLoop, box: NIOLoopBoundBox<WalkState?>) {
        self.settings = settings
        self.loop = loop
        self.box = box
        machine = Machine(requestTimeout: TimeAmount(settings.requestTimeout), idleTimeout: settings.idleTimeout)
    }

    /// Requests asked for and not yet written.
    var waitingCount: Int { machine.waiting }

    /// A caller's request: it goes out now, or once the connection is free or made.
    func ask(_ ask: Ask) {
        let (id, actions) = machine.ask(at: .now())
        exchanges[id] = Exchange(ask: ask)
        perform(actions)
    }

    /// A caller gave up (its task was cancelled, or its deadline passed).
    func cancel(_ promise: EventLoopPromise<PageWalk.Answer>) {
        guard let id = exchanges.first(where: { $0.value.ask.promise.futureResult === promise.futureResult })?.key else { return }
        perform(machine.cancel(id))
    }

    /// Closes the connection: every request on it or waiting fails. Completes once it is closed.
    @discardableResult
    func close() -> EventLoopFuture<Void> {
        EventLoopFuture.andAllComplete(perform(machine.close()), on: loop)
    }

    // MARK: From the connection and its handlers

    /// The response being read on `connection` is complete on the wire.
    func responseFramed(on connection: PageWalkMachine.ConnectionID) {
        perform(machine.framed(on: connection, at: .now()))
    }

    /// A part of the response read on `connection`; one that belongs to no caller is dropped.
    func received(_ part: HTTPClientResponsePart, on connection: PageWalkMachine.ConnectionID) {
        guard let id = machine.reading(on: connection), exchanges[id] != nil else { return }
        switch part {
        case .head(let head):
            guard let ask = exchanges[id]?.ask else { return }
            exchanges[id]?.response.head = head
            machine.head(on: connection, status: Int(head.status.code), keepAlive: head.isKeepAlive)
            guard (200..<300).contains(head.status.code) else { return }
            if let failure = HTTPFeedSource.declaredTooLarge(head.headers, limit: settings.maxBodyBytes, label: ask.label) {
                refuse(id, on: connection, failure)
                return
            }
            let links = LinkHeader.parse(head.headers["link"], base: ask.url)
            exchanges[id]?.response.links = links
            // May ask for the next page, which then goes out as this response ends.
            ask.onLinks?(links)
        case .body(var part):
            guard exchanges[id]?.response.read(&part, limit: settings.maxBodyBytes) == false, let label = exchanges[id]?.ask.label else { return }
            refuse(id, on: connection, FeedError(.tooLarge, "\(label): the body exceeds the limit of \(settings.maxBodyBytes) bytes"))
        case .end:
            if let head = exchanges[id]?.response.head, let bytesRead = exchanges[id]?.response.bodyBytesRead {
                exchanges[id]?.ask.onWireBytes?(WireSize.response(status: head.status, headers: head.headers, bodyBytesRead: bytesRead))
            }
            perform(machine.ended(on: connection, at: .now()))
        }
    }

    /// The connection failed or closed.
    func failed(_ error: any Error, on connection: PageWalkMachine.ConnectionID) {
        perform(machine.failed(on: connection), error: error)
    }

    private func refuse(_ id: Machine.RequestID, on connection: Machine.ConnectionID, _ failure: FeedError) {
        exchanges[id]?.response.failure = failure
        machine.refused(on: connection)
    }

    private func connected(_ connection: Machine.ConnectionID, _ result: Result<any Channel, any Error>) {
        switch result {
        case .success(let channel):
            channels[connection] = channel
            perform(machine.connected(connection, at: .now()))
        case .failure(let error):
            perform(machine.connectFailed(connection), error: error)
        }
    }

    private func fired(_ timer: Machine.Timer) {
        timers[timer] = nil
        perform(machine.timerFired(timer, at: .now()))
    }

    // MARK: Performing

    /// Performs `actions` in order; `error` is the event's, for ``PageWalkMachine/Failure/connection``.
    /// Returns the closes of the connections closed, each complete once its channel is.
    @discardableResult
    private func perform(_ actions: [Machine.Action], error: (any Error)? = nil) -> [EventLoopFuture<Void>] {
        var closing: [EventLoopFuture<Void>] = []
        for action in actions {
            switch action {
            case .connect(let connection):
                connect(connection)
            case .write(let id, let connection):
                guard let channel = channels[connection], let ask = exchanges[id]?.ask else { continue }
                exchanges[id]?.response = PageWalkResponse()
                var head = HTTPRequestHead(version: .http1_1, method: .GET, uri: Self.target(ask.url))
                head.headers = ask.headers
                head.headers.replaceOrAdd(name: "Host", value: settings.hostHeader)
                channel.write(HTTPClientRequestPart.head(head), promise: nil)
                channel.writeAndFlush(HTTPClientRequestPart.end(nil), promise: nil)
            case .close(let connection):
                guard let channel = channels.removeValue(forKey: connection) else { continue }
                let closed = loop.makePromise(of: Void.self)
                channel.close(promise: closed)
                closing.append(closed.futureResult)
            case .arm(let timer, let deadline):
                let box = self.box
                timers[timer]?.cancel()
                timers[timer] = loop.scheduleTask(deadline: deadline) { box.value?.fired(timer) }
            case .disarm(let timer):
                timers.removeValue(forKey: timer)?.cancel()
            case .answer(let id):
                guard let exchange = exchanges.removeValue(forKey: id) else { continue }
                exchange.ask.promise.completeWith(exchange.response.answer(label: exchange.ask.label))
            case .fail(let id, let failure):
                guard let exchange = exchanges.removeValue(forKey: id) else { continue }
                exchange.ask.promise.fail(self.error(failure, exchange.ask, error))
            }
        }
        return closing
    }

    private func error(_ failure: Machine.Failure, _ ask: Ask, _ eventError: (any Error)?) -> any Error {
        switch failure {
        case .cancelled: CancellationError()
        case .closed: ChannelError.ioOnClosedChannel
        case .timedOut: HTTPFeedSource.timeoutError(ask.label, after: settings.requestTimeout)
        case .connection: eventError ?? ChannelError.ioOnClosedChannel
        }
    }

    private func connect(_ connection: Machine.ConnectionID) {
        let settings = self.settings, box = self.box
        var bootstrap = ClientBootstrap(group: loop).connectTimeout(settings.connectTimeout)
        bootstrap = bootstrap.channelInitializer { channel in
            channel.eventLoop.makeCompletedFuture {
                try settings.configure(
                    channel.pipeline.syncOperations,
                    wire: FramedResponseHandler(box: box, connection: connection, holdLimit: settings.maxBodyBytes),
                    reader: WalkHandler(box: box, connection: connection))
            }
        }
        bootstrap.connect(host: settings.host, port: settings.port).whenComplete { result in
            guard let state = box.value else {
                if case .success(let channel) = result { channel.close(promise: nil) }
                return
            }
            state.connected(connection, result)
        }
    }

    /// Path and query, as the request line wants them.
    static func target(_ url: URL) -> String {
        let path = url.path(percentEncoded: true)
        let query = url.query(percentEncoded: true)
        return (path.isEmpty ? "/" : path) + (query.map { "?" + $0 } ?? "")
    }
}
