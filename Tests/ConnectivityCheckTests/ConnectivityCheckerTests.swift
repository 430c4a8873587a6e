import ConnectivityCheck
import ConnectivityPolicy
import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization
import Testing
import TestSupport

#if canImport(Glibc)
import Glibc
#endif

/// A small HTTP server on loopback, written here with SwiftNIO: per path it answers 204, 200
/// with a body, a redirect, a portal's login page, or never answers. Counts requests per path.
final class CheckServer: Sendable {
    final class Counts: Sendable {
        let byPath = Mutex<[String: Int]>([:])
        func withLock<T: Sendable>(_ body: (inout [String: Int]) -> T) -> T { byPath.withLock { body(&$0) } }
    }
    let channel: any Channel
    let counts: Counts
    var port: Int { channel.localAddress!.port! }
    var base: String { "http://127.0.0.1:\(port)" }

    init() async throws {
        let counts = Counts()
        self.counts = counts
        channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.pipeline.configureHTTPServerPipeline().flatMap {
                    channel.pipeline.addHandler(Handler(counts: counts))
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
    }

    func stop() async { try? await channel.close() }

    final class Handler: ChannelInboundHandler, Sendable {
        typealias InboundIn = HTTPServerRequestPart
        typealias OutboundOut = HTTPServerResponsePart
        let counts: Counts
        init(counts: Counts) { self.counts = counts }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            guard case .head(let head) = unwrapInboundIn(data) else { return }
            counts.withLock { $0[head.uri, default: 0] += 1 }
            var headers = HTTPHeaders()
            let status: HTTPResponseStatus
            var body = ""
            switch head.uri {
            case "/generate_204": status = .noContent
            case "/online": status = .ok; body = "NetworkManager is online\n"
            case "/redirect": status = .found; headers.add(name: "Location", value: "/login")
            case "/redirect-absolute": status = .temporaryRedirect; headers.add(name: "Location", value: "http://portal.example/signin?x=1")
            case "/login-page": status = .ok; body = "<html>Sign in to the hotel network</html>"
            case "/silent": return
            default: status = .notFound
            }
            headers.add(name: "Content-Length", value: "\(body.utf8.count)")
            context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: status, headers: headers))), promise: nil)
            if !body.isEmpty { context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(string: body)))), promise: nil) }
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        }
    }
}

func withServer(_ body: (CheckServer) async throws -> Void) async throws {
    let server = try await CheckServer()
    do {
        try await body(server)
    } catch {
        await server.stop()
        throw error
    }
    await server.stop()
}

/// One check of `url`. Its timeout is the hang guard unless a test is about the timeout itself:
/// the loopback server answers on NIO's threads, but under a loaded suite an answer meant to
/// arrive can still take seconds, and a timed-out check would read as "no answer".
func check(_ url: String, status: Int? = nil, body: String? = nil, timeout: Duration = hangGuard) async -> ConnectivityCheckResult {
    let checker = ConnectivityChecker(configuration: .init(url: URL(string: url)!, expectedStatus: status, expectedBody: body, timeout: timeout))
    let result = await checker.check()
    do {
        try await checker.shutdown()
    } catch {
        Issue.record("shutdown: \(error)")
    }
    return result
}

@Suite struct ConnectivityCheckerTests {
    @Test func theExpectedAnswerIsFull() async throws {
        try await withServer { server in
            #expect(await check("\(server.base)/generate_204") == .full)
            #expect(await check("\(server.base)/online", body: "NetworkManager is online") == .full)
        }
    }

    @Test func aRedirectIsAPortalAtItsLocationAndIsNotFollowed() async throws {
        try await withServer { server in
            #expect(await check("\(server.base)/redirect") == .portal(URL(string: "\(server.base)/login")!))
            #expect(await check("\(server.base)/redirect-absolute") == .portal(URL(string: "http://portal.example/signin?x=1")!))
            #expect(server.counts.withLock { $0["/login"] } == nil, "the redirect was followed")
        }
    }

    @Test func aWrongStatusOrBodyIsAPortalAtTheCheckURL() async throws {
        try await withServer { server in
            // 200 with a login page where 204 was expected.
            #expect(await check("\(server.base)/login-page") == .portal(URL(string: "\(server.base)/login-page")!))
            #expect(await check("\(server.base)/login-page", body: "NetworkManager is online") == .portal(URL(string: "\(server.base)/login-page")!))
            #expect(await check("\(server.base)/missing") == .portal(URL(string: "\(server.base)/missing")!))
        }
    }

    @Test func noAnswerSaysWhy() async throws {
        // A port bound but not listening: refused, and no other test can take it meanwhile. The
        // client retries a refused connect until the check's timeout (the hang guard, so that
        // at least one attempt is made however loaded the machine), then reports the refusal.
        let closed = ReservedPort()
        guard case .noAnswer(let refused) = await check("http://127.0.0.1:\(closed.port)/generate_204") else {
            Issue.record("expected no answer")
            return
        }
        #expect(refused.contains("refused"), "\(refused)")
        try await withServer { server in
            guard case .noAnswer(let silent) = await check("\(server.base)/silent", timeout: .milliseconds(300)) else {
                Issue.record("expected no answer")
                return
            }
            #expect(silent.contains("timed out"), "\(silent)")
        }
    }
}

@Suite struct ServerProbeTests {
    @Test func answeredRefusedAndUnreachable() async throws {
        try await withServer { server in
            #expect(await ServerProbe.connect(to: IPAddress("127.0.0.1")!, port: server.port, timeout: hangGuard) == .answered)
        }
        let closed = ReservedPort()
        #expect(await ServerProbe.connect(to: IPAddress("127.0.0.1")!, port: closed.port, timeout: hangGuard) == .refused)
        // A listener whose accept queue is full drops further SYNs: nothing answers, as with a
        // server behind a silent firewall.
        let listener = ReservedPort(listening: true)
        let full = listener.port
        #expect(await ServerProbe.connect(to: IPAddress("127.0.0.1")!, port: full, timeout: hangGuard) == .answered, "fills the queue")
        guard case .unreachable(let reason) = await ServerProbe.connect(to: IPAddress("127.0.0.1")!, port: full, timeout: .milliseconds(300)) else {
            Issue.record("a full accept queue answered")
            return
        }
        #expect(reason.contains("timed out"), "\(reason)")
    }
}
