// `http-walk MODE URL`: walks a feed's pages by their `Link: rel="next"` headers on one keep-alive
// connection and prints the pages, the wall time and this process's CPU time. Nothing is stored.
//
// - `nio`: SwiftNIO alone (HTTP/1.1 codec, gzip decompressor, one handler that sends the next
//   request when a response ends); the body is kept, not parsed.
// - `ahc`: AsyncHTTPClient configured as `HTTPFeedClient` configures it; the body is collected,
//   not parsed.
// - `source`: `HTTPFeedSource.fetchOlder`, page after page: AsyncHTTPClient plus the page parser
//   and the source's own checks, as syncd's backfill calls it (without its read-ahead).
// - `nio-store`: the `nio` walk, with each page parsed by `JSONPageParser` and committed into a
//   `SQLiteFeedStore` (at `$STORE`, default /tmp/http-walk.sqlite) in groups of `$GROUP` pages
//   (default 8), off the event loop: syncd's own work per page behind a chain with no hand-over
//   at all, a bound for what syncd's coordinator can reach.
//
// Like syncd, the process runs Swift Concurrency on NIO's event loops. With a `demo-feed` on
// loopback serving `bulk:100000:0` in pages of 100:
//   http-walk nio 'http://127.0.0.1:43333/feeds/bulk?limit=100'
import AsyncHTTPClient
import Foundation
import HTTPFeedSource
import NIOCore
import NIOHTTP1
import NIOHTTPCompression
import NIOPosix
import SyncCore
import SyncStore

@main
enum HTTPWalk {
    static func main() async throws {
        NIOSingletons.unsafeTryInstallSingletonPosixEventLoopGroupAsConcurrencyGlobalExecutor()
        let arguments = CommandLine.arguments
        guard arguments.count == 3, let url = URL(string: arguments[2]) else {
            FileHandle.standardError.write(Data("usage: http-walk nio|ahc|source|nio-store URL\n".utf8))
            exit(64)
        }
        let mode = arguments[1]
        let cpuBefore = cpuSeconds(), start = ContinuousClock.now
        let pages: Int
        switch mode {
        case "nio": pages = try await walkWithNIO(url)
        case "ahc": pages = try await walkWithAsyncHTTPClient(url)
        case "source": pages = try await walkWithFeedSource(url)
        case "nio-store": pages = try await walkAndStore(url)
        default:
            FileHandle.standardError.write(Data("unknown mode \(mode)\n".utf8))
            exit(64)
        }
        let wall = ContinuousClock.now - start
        let cpu = cpuSeconds() - cpuBefore
        print("\(mode): \(pages) pages, wall \(String(format: "%.3f", wall / .seconds(1))) s, cpu \(String(format: "%.3f", cpu)) s")
    }

    /// User plus system CPU time of this process so far, in seconds.
    static func cpuSeconds() -> Double {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        let seconds = usage.ru_utime.tv_sec + usage.ru_stime.tv_sec
        let micros = usage.ru_utime.tv_usec + usage.ru_stime.tv_usec
        return Double(seconds) + Double(micros) / 1e6
    }

    /// The `rel="next"` target among a response's `Link` headers, resolved against `base`: the
    /// parser `HTTPFeedSource` uses, so every walker pays the same for it.
    static func next(_ headers: HTTPHeaders, base: URL) -> URL? {
        LinkHeader.first("next", in: LinkHeader.parse(headers["link"], base: base))
    }

    static func walkWithFeedSource(_ url: URL) async throws -> Int {
        let client = HTTPFeedClient()
        let source = try HTTPFeedSource(configuration: HTTPFeedConfiguration(url: url), client: client)
        var pages = 1
        var page = try await source.fetchInitial()
        while let cursor = page.olderCursor, !page.items.isEmpty {
            page = try await source.fetchOlder(cursor: cursor)
            pages += 1
        }
        try await client.shutdown()
        return pages
    }

    static func walkWithAsyncHTTPClient(_ url: URL) async throws -> Int {
        var pool = HTTPClient.Configuration.ConnectionPool()
        pool.retryConnectionEstablishment = false
        let configuration = HTTPClient.Configuration(
            redirectConfiguration: .disallow, connectionPool: pool, decompression: .enabled(limit: .size(64 << 20)))
        let http = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
        var pages = 0
        var target: URL? = url
        do {
            while let current = target {
                var request = HTTPClientRequest(url: current.absoluteString)
                request.headers.add(name: "Accept-Encoding", value: "gzip")
                let response = try await http.execute(request, timeout: .seconds(30))
                target = next(response.headers, base: current)
                _ = try await response.body.collect(upTo: 64 << 20)
                pages += 1
            }
        } catch {
            try? await http.shutdown()
            throw error
        }
        try await http.shutdown()
        return pages
    }

    /// - Parameter sink: given each body with its `next` link as a response ends, and finished
    ///   when the walk ends, however it ends.
    static func walkWithNIO(_ url: URL, sink: AsyncStream<(body: ByteBuffer, older: String?)>.Continuation? = nil) async throws -> Int {
        guard let host = url.host, let port = url.port else {
            sink?.finish()
            throw WalkError("the URL needs a host and a port")
        }
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        let done = loop.makePromise(of: Int.self)
        let channel: any Channel
        do {
            channel = try await ClientBootstrap(group: loop)
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHTTPClientHandlers()
                        try channel.pipeline.syncOperations.addHandler(NIOHTTPResponseDecompressor(limit: .size(64 << 20)))
                        try channel.pipeline.syncOperations.addHandler(Walker(host: host, first: url, done: done, sink: sink))
                    }
                }
                .connect(host: host, port: port).get()
        } catch {
            sink?.finish()
            throw error
        }
        let pages = try await done.futureResult.get()
        try? await channel.close()
        return pages
    }

    /// The `nio` walk, its pages parsed and stored by a task of their own; the next request
    /// never waits for them.
    static func walkAndStore(_ url: URL) async throws -> Int {
        let environment = ProcessInfo.processInfo.environment
        let path = environment["STORE"] ?? "/tmp/http-walk.sqlite"
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
        let group = max(1, Int(environment["GROUP"] ?? "") ?? 8)
        let store = try SQLiteFeedStore(path: path)
        let (pages, arrivals) = AsyncStream.makeStream(of: (body: ByteBuffer, older: String?).self)
        async let walked = walkWithNIO(url, sink: arrivals)
        let parser = JSONPageParser()
        var batch: [FeedPage] = []
        var direction = Direction.initial
        var commit: Task<Void, any Error>?
        for await (body, older) in pages {
            batch.append(FeedPage(items: try parser.parse(Array(body.readableBytesView)), olderCursor: older, newerCursor: nil))
            guard direction == .initial || batch.count >= group || older == nil else { continue }
            // One commit at a time, as syncd's store writer runs them; the next batch gathers meanwhile.
            try await commit?.value
            let ready = batch, kind = direction
            batch = []
            direction = .older
            commit = Task { _ = try await store.commit(feed: "walk", direction: kind, pages: ready, at: Date()) }
        }
        try await commit?.value
        let count = try await walked
        let stored = try await store.load(feed: "walk").itemCount
        print("nio-store: \(stored) items stored")
        return count
    }

    /// Path and query of `url`, as a request line wants them.
    static func requestTarget(_ url: URL) -> String {
        let path = url.path.isEmpty ? "/" : url.path
        return url.query.map { path + "?" + $0 } ?? path
    }

    struct WalkError: Error, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }

    /// Sends the next request when a response ends, until a response names no next page.
    /// Lives on its channel's event loop only.
    final class Walker: ChannelInboundHandler {
        typealias InboundIn = HTTPClientResponsePart
        typealias OutboundOut = HTTPClientRequestPart

        private let host: String
        private var next: URL?
        private var body = ByteBuffer()
        private var pages = 0
        private let done: EventLoopPromise<Int>
        private var finished = false
        /// Where each body goes with its `next` link, when it is kept.
        private let sink: AsyncStream<(body: ByteBuffer, older: String?)>.Continuation?

        init(host: String, first: URL, done: EventLoopPromise<Int>, sink: AsyncStream<(body: ByteBuffer, older: String?)>.Continuation? = nil) {
            self.host = host
            self.next = first
            self.done = done
            self.sink = sink
        }

        func channelActive(context: ChannelHandlerContext) {
            if let next { send(next, context: context) }
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            switch unwrapInboundIn(data) {
            case .head(let head):
                // `next` is still the URL this response answers: the base of its links.
                next = next.flatMap { HTTPWalk.next(head.headers, base: $0) }
                body.clear()
            case .body(var part):
                body.writeBuffer(&part)
            case .end:
                pages += 1
                if let next { send(next, context: context) }
                // Handed over after the next request is out, as the product's walk does.
                if let sink {
                    sink.yield((body, next?.absoluteString))
                    body = ByteBuffer()
                }
                if next == nil {
                    finish(.success(pages))
                }
            }
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) {
            finish(.failure(error))
            context.close(promise: nil)
        }

        func channelInactive(context: ChannelHandlerContext) {
            finish(.failure(WalkError("the server closed the connection after \(pages) pages")))
        }

        /// Completes the walk once; whatever happens to the channel afterwards is ignored.
        private func finish(_ result: Result<Int, any Error>) {
            guard !finished else { return }
            finished = true
            sink?.finish()
            done.completeWith(result)
        }

        private func send(_ url: URL, context: ChannelHandlerContext) {
            var head = HTTPRequestHead(version: .http1_1, method: .GET, uri: HTTPWalk.requestTarget(url))
            head.headers.add(name: "Host", value: host)
            head.headers.add(name: "Accept-Encoding", value: "gzip")
            context.write(wrapOutboundOut(.head(head)), promise: nil)
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        }
    }
}
