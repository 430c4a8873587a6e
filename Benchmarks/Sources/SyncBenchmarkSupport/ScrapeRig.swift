import Foundation
import SyncStore

/// The release `syncd` binary with `feeds` demo feeds on loopback and its metrics endpoint on a
/// Unix socket, synced: for timing one scrape of `/metrics` against one `GetStatus` on the
/// control socket of the same daemon, in the same run.
public final class ScrapeRig: Sendable {
    public let feeds: Int
    private let server: LineProcess
    private let syncd: LineProcess
    private let directory: String
    /// The demo server's base URL (`http://127.0.0.1:PORT`), for its admin endpoints.
    public let serverURL: String

    public var metricsSocket: String { "\(directory)/metrics.sock" }
    /// syncd's store.
    public var storePath: String { "\(directory)/syncd.sqlite" }
    /// The syncd process, for reading its memory from `/proc`.
    public var syncdPID: Int32 { syncd.pid }
    public var controlSocket: String { "\(directory)/io.syncd" }

    /// Starts the server and syncd and waits until every feed is stored (read from the store,
    /// so the wait sends syncd no request).
    /// With `perSecond`, the demo server adds that many items to each feed every second and
    /// syncd refreshes every `refresh`; the wait ends once the initial items are stored.
    /// `feedKeys` are added to every `[[feed]]`; `name` keeps two rigs of one process apart.
    public init(
        feeds: Int, items: Int = 200, perSecond: Int = 0, refresh: String = "1h", pageSize: Int = 100,
        feedKeys: String = "", name: String = "metrics-scrape"
    ) async throws {
        self.feeds = feeds
        let directory = NSTemporaryDirectory() + "\(name)-\(getpid())"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        self.directory = directory
        let names = (1...feeds).map { "feed\($0)" }
        server = try LineProcess(
            executable: try HelperPaths.executable("demo-feed"),
            arguments: ["--host", "127.0.0.1", "--port", "0", "--limit", "100", "--log-level", "warning"]
                + names.flatMap { ["--feed", "\($0):\(items):\(perSecond)"] })
        let listening = try await LineReader(server, name: "demo-feed").next { $0.hasPrefix("listening on ") }
        let baseURL = String(listening.dropFirst("listening on ".count))
        serverURL = baseURL
        var config = """
            [daemon]
            store = "\(directory)/syncd.sqlite"
            control_socket = "\(directory)/io.syncd"
            log_level = "warning"

            [metrics]
            listen = "\(directory)/metrics.sock"

            """
        for name in names {
            config += """

                [[feed]]
                name = "\(name)"
                url = "\(baseURL)/feeds/\(name)"
                page_size = \(pageSize)
                refresh_interval = "\(refresh)"
                backfill = \(items)
                \(feedKeys)

                """
        }
        try config.write(toFile: "\(directory)/syncd.toml", atomically: true, encoding: .utf8)
        syncd = try LineProcess(executable: try HelperPaths.executable("syncd"), arguments: ["--config", "\(directory)/syncd.toml"])
        let deadline = ContinuousClock.now + .seconds(120)
        while true {
            try await Task.sleep(for: .milliseconds(200))
            if FileManager.default.fileExists(atPath: "\(directory)/io.syncd"),
               let store = try? SQLiteFeedStore(path: "\(directory)/syncd.sqlite"),
               names.allSatisfy({ (try? store.loadSynchronously(feed: $0)).map { $0.endReached && $0.itemCount >= items } == true })
            {
                break
            }
            guard ContinuousClock.now < deadline else { throw SyncRigError("syncd did not sync \(feeds) feeds within 120 s") }
        }
    }

    public func shutdown() {
        syncd.finish()
        server.finish()
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// One `GET /metrics` on a new connection to the endpoint's socket, read to its end; the body.
    public func scrape() throws -> String {
        let fd = try connectUnix(metricsSocket)
        defer { close(fd) }
        let text = try closingExchange(fd, "GET /metrics HTTP/1.1\r\nHost: syncd\r\nConnection: close\r\n\r\n")
        guard text.hasPrefix("HTTP/1.1 200"), let body = text.range(of: "\r\n\r\n") else {
            throw SyncRigError("scrape: unexpected answer: \(text.prefix(200))")
        }
        return String(text[body.upperBound...])
    }

    /// One `GetStatus` on a new connection to the control socket.
    public func status() throws {
        try statusRoundTrip(socket: controlSocket)
    }
}

/// Sends `request` on the connected socket `fd` and reads the answer until the peer closes
/// (`Connection: close`); the answer as text.
public func closingExchange(_ fd: Int32, _ request: String) throws -> String {
    try sendWhole(Array(request.utf8), on: fd)
    var response: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 65_536)
    while true {
        let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        if count == 0 { break }
        guard count > 0 else { throw SyncRigError("recv: errno \(errno)") }
        response += buffer[..<count]
    }
    return String(decoding: response, as: UTF8.self)
}

/// A connected Unix stream socket (blocking, close-on-exec).
public func connectUnix(_ path: String) throws -> Int32 {
    let fd = Glibc.socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard fd >= 0 else { throw SyncRigError("socket: errno \(errno)") }
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    withUnsafeMutableBytes(of: &address.sun_path) { raw in
        for (index, byte) in path.utf8.prefix(raw.count - 1).enumerated() { raw[index] = byte }
    }
    let connected = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
    }
    guard connected == 0 else {
        close(fd)
        throw SyncRigError("connect \(path): errno \(errno)")
    }
    return fd
}

/// Sends `bytes` on the connected socket `fd` in one call, without SIGPIPE when the peer is gone;
/// throws when the kernel took fewer than all of them: the requests are small enough that it
/// takes them whole or the socket failed.
public func sendWhole(_ bytes: [UInt8], on fd: Int32) throws {
    guard bytes.withUnsafeBytes({ send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }) == bytes.count else {
        throw SyncRigError("send: errno \(errno)")
    }
}
