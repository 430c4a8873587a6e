import Foundation
import Logging
import NIOCore
import Synchronization
import Testing
import TestSupport
@testable import SyncMetrics

/// The endpoint over real sockets, asked by curl (a client sharing no code with it).
@Suite("Metrics endpoint", .timeLimit(.minutes(2)))
struct MetricsEndpointTests {
    static let body: [UInt8] = Array("# TYPE x gauge\nx 1.0\n".utf8)

    /// Runs an endpoint for `address`, hands its bound address to `body`, then stops it and
    /// waits (bounded) for it to end.
    static func withEndpoint(
        _ address: MetricsEndpoint.Address, maxConnections: Int = 8, idleTimeout: Duration = .seconds(30),
        collect: @escaping MetricsEndpoint.Collect = { format in format == .openMetrics ? OpenMetrics.convert(prometheusText: body) : body },
        _ body: (SocketAddress, MetricsEndpoint) async throws -> Void
    ) async throws {
        var configuration = MetricsEndpoint.Configuration(address: address)
        configuration.maxConnections = maxConnections
        configuration.idleTimeout = idleTimeout
        let endpoint = MetricsEndpoint(configuration: configuration, logger: Logger(label: "test"), collect: collect)
        let running = BoundedTask { try await endpoint.run() }
        defer { running.cancel() }
        let bound = try await boundedValue(of: Task { await endpoint.waitUntilListening() }, "the endpoint to listen")
        let listening = try #require(bound, "the endpoint did not bind")
        try await body(listening, endpoint)
        running.cancel()
        _ = try await running.result("the endpoint's run() after cancellation")
    }

    static func curl(_ arguments: [String]) async throws -> String {
        try await runCommand(["curl", "-sS", "--max-time", "20"] + arguments, allowFailure: true)
    }

    @Test func servesBothFormatsOverTCP() async throws {
        try await Self.withEndpoint(.tcp(host: "127.0.0.1", port: 0)) { address, _ in
            let url = "http://127.0.0.1:\(address.port!)/metrics"
            let plain = try await Self.curl(["-i", url])
            #expect(plain.hasPrefix("HTTP/1.1 200 OK"), "\(plain)")
            #expect(plain.lowercased().contains("content-type: text/plain; version=0.0.4; charset=utf-8"), "\(plain)")
            #expect(plain.hasSuffix("x 1.0\n"), "\(plain)")

            let open = try await Self.curl(["-i", "-H", "Accept: application/openmetrics-text;version=1.0.0,text/plain;q=0.5", url])
            #expect(open.lowercased().contains("content-type: application/openmetrics-text; version=1.0.0; charset=utf-8"), "\(open)")
            #expect(open.hasSuffix("# EOF\n"), "\(open)")

            let head = try await Self.curl(["-I", url])
            #expect(head.hasPrefix("HTTP/1.1 200 OK"), "\(head)")
            #expect(head.lowercased().contains("content-length: \(Self.body.count)"), "\(head)")

            let missing = try await Self.curl(["-i", "http://127.0.0.1:\(address.port!)/"])
            #expect(missing.hasPrefix("HTTP/1.1 404"), "\(missing)")
            let post = try await Self.curl(["-i", "-X", "POST", "--data", "x", url])
            #expect(post.hasPrefix("HTTP/1.1 405"), "\(post)")
            #expect(post.lowercased().contains("allow: get, head"), "\(post)")

            // Two requests on one keep-alive connection, both answered.
            let twice = try await Self.curl([url, url])
            #expect(twice == "# TYPE x gauge\nx 1.0\n# TYPE x gauge\nx 1.0\n", "\(twice)")
        }
    }

    @Test func servesOverAUnixSocketAndRemovesIt() async throws {
        let directory = try TemporaryDirectory(prefix: "metrics-endpoint")
        let path = directory.file("metrics.sock")
        // A socket file left by a crashed instance does not stop the bind.
        try RawConnection.leaveStaleSocket(at: path)
        try await Self.withEndpoint(.unix(path: path)) { _, _ in
            let text = try await Self.curl(["--unix-socket", path, "http://localhost/metrics"])
            #expect(text == String(decoding: Self.body, as: UTF8.self))
            let mode = try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int
            #expect(mode == 0o666, "as open as the control socket, whatever the umask")
        }
        #expect(!FileManager.default.fileExists(atPath: path), "the socket file is removed on stop")
    }

    /// Past its connection limit a client is closed at once; a slot given back serves again.
    @Test func connectionsAreBounded() async throws {
        try await Self.withEndpoint(.tcp(host: "127.0.0.1", port: 0), maxConnections: 2) { address, endpoint in
            let port = address.port!
            // One at a time, each until the endpoint serves it: nothing else may take a slot
            // meanwhile, or a holder could be the one refused.
            var holders: [RawConnection] = []
            defer { holders.forEach { $0.close() } }
            for count in 1...2 {
                holders.append(try RawConnection(port: port))
                try await waitUntil("the endpoint serves holder \(count)") { endpoint.connectionCount == count }
            }
            try await waitUntil("a client past the limit is refused") {
                try await Self.curl(["http://127.0.0.1:\(port)/metrics"]).isEmpty
            }
            holders.forEach { $0.close() }
            try await waitUntil("a scrape succeeds once the holders are gone") {
                try await Self.curl(["http://127.0.0.1:\(port)/metrics"]) == String(decoding: Self.body, as: UTF8.self)
            }
        }
    }

    /// A client that sends nothing is closed after the idle limit.
    @Test func idleConnectionsAreClosed() async throws {
        try await Self.withEndpoint(.tcp(host: "127.0.0.1", port: 0), idleTimeout: .milliseconds(200)) { address, _ in
            let idle = try RawConnection(port: address.port!)
            defer { idle.close() }
            try await waitUntil("the idle connection is closed by the endpoint") { idle.isClosedByPeer() }
        }
    }

    @Test func aTakenAddressFailsWithTheAddress() async throws {
        try await Self.withEndpoint(.tcp(host: "127.0.0.1", port: 0)) { address, _ in
            let second = MetricsEndpoint(
                configuration: .init(address: .tcp(host: "127.0.0.1", port: address.port!)), logger: Logger(label: "test"),
                collect: { _ in [] })
            let outcome = try await BoundedTask { try await second.run() }.result("a second endpoint on a taken port")
            guard case .failure(let error) = outcome else {
                Issue.record("a second endpoint on the same port ran")
                return
            }
            #expect("\(error)".contains("cannot serve metrics on 127.0.0.1:\(address.port!)"), "\(error)")
            #expect(await second.waitUntilListening() == nil)
        }
    }

    @Test func addressesParse() {
        #expect(MetricsEndpoint.Address(parsing: "127.0.0.1:9559") == .tcp(host: "127.0.0.1", port: 9559))
        #expect(MetricsEndpoint.Address(parsing: "[::1]:9559") == .tcp(host: "::1", port: 9559))
        #expect(MetricsEndpoint.Address(parsing: "localhost:80") == .tcp(host: "localhost", port: 80))
        #expect(MetricsEndpoint.Address(parsing: "/run/syncd/metrics.sock") == .unix(path: "/run/syncd/metrics.sock"))
        for bad in ["9559", ":9559", "::1:9559", "host:0", "host:65536", "host:x", "relative/path", ""] {
            #expect(MetricsEndpoint.Address(parsing: bad) == nil, "\(bad)")
        }
        #expect(MetricsEndpoint.Address.tcp(host: "::1", port: 1).description == "[::1]:1")
    }
}

/// A TCP client that connects and sends nothing.
final class RawConnection: Sendable {
    let fd: Int32

    init(port: Int) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard result == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
    }

    /// Binds a Unix socket at `path` and closes it without removing the file, as a crashed
    /// process leaves it.
    static func leaveStaleSocket(at path: String) throws {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        defer { Glibc.close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: Array(path.utf8.prefix(raw.count - 1)) + [0])
        }
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard result == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
    }

    /// Whether the server closed the connection: a read that does not block returns end of file.
    func isClosedByPeer() -> Bool {
        var byte: UInt8 = 0
        let count = recv(fd, &byte, 1, Int32(MSG_DONTWAIT))
        return count == 0 || (count < 0 && errno == ECONNRESET)
    }

    /// Closes the client's end (once; a second call is harmless).
    func close() {
        if closed.exchange(true, ordering: .relaxed) == false { Glibc.close(fd) }
    }

    private let closed = Atomic<Bool>(false)
}
