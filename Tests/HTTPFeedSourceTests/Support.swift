import AsyncHTTPClient
import DemoFeedServer
import Foundation
import HTTPFeedSource
import Logging
import SyncCore
import Synchronization
import SyncdTesting
import Testing
import TestSupport

/// A logger that drops everything: the server's and client's info lines would bury test output.
let quietLogger = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })

/// Runs `body` with a feed client that is shut down on every path (AsyncHTTPClient requires it).
///
/// The connect timeout is the hang guard: on loopback a connect that should succeed is quick
/// alone, but in a congested full run a short one can fire first (see `hangGuard`).
func withFeedClient<T: Sendable>(connectTimeout: Duration = hangGuard, _ body: (HTTPFeedClient) async throws -> T) async throws -> T {
    try await withFeedClient(options: .init(connectTimeout: connectTimeout), body)
}

/// Runs `body` with a feed client made with `options`, shut down on every path.
func withFeedClient<T: Sendable>(options: HTTPFeedClient.Options, _ body: (HTTPFeedClient) async throws -> T) async throws -> T {
    try await withResource(HTTPFeedClient(options: options), closedBy: { try await $0.shutdown() }, body)
}

/// Runs `body` with an `HTTPClient` of its own, shut down on every path (AsyncHTTPClient requires it).
func withHTTPClient<T: Sendable>(_ configuration: HTTPClient.Configuration, _ body: (HTTPClient) async throws -> T) async throws -> T {
    try await withResource(HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration), closedBy: { try await $0.shutdown() }, body)
}

/// Starts a demo server, with fault injection (`faults`) unless it is `nil`, on an ephemeral
/// loopback port and a feed client, runs `body`, and stops both whatever happens. The client's
/// connect timeout is the hang guard, as in ``withFeedClient``.
func withFeedServer<T: Sendable>(
    _ configuration: DemoFeedServer.Configuration,
    faults: FaultInjector.Settings? = .init(),
    clientOptions: HTTPFeedClient.Options = .init(connectTimeout: hangGuard),
    _ body: (DemoFeedServer, HTTPFeedClient) async throws -> T
) async throws -> T {
    // The server stops before the client shuts down.
    try await withFeedClient(options: clientOptions) { client in
        try await withDemoServer(configuration, faults: faults) { server in try await body(server, client) }
    }
}

/// Starts a demo server on an ephemeral loopback port, with fault injection (`faults`) or without
/// (`nil`), runs `body`, and stops the server whatever happens.
func withDemoServer<T: Sendable>(
    _ configuration: DemoFeedServer.Configuration,
    faults: FaultInjector.Settings? = nil,
    _ body: (DemoFeedServer) async throws -> T
) async throws -> T {
    var configuration = configuration
    configuration.host = "127.0.0.1"
    configuration.port = 0
    let server = if let faults {
        try DemoFeedServer(configuration: configuration, faults: faults, logger: quietLogger)
    } else {
        try DemoFeedServer(configuration: configuration, logger: quietLogger)
    }
    try await server.start()
    return try await withResource(server, closedBy: { await $0.stop() }, body)
}

extension DemoFeedServer {
    /// A source for one of this server's feeds.
    ///
    /// Its request timeout is the hang guard: a request expected to succeed must not fail because
    /// the in-process server, on the congested cooperative pool, answered late while the client's
    /// deadline (on an event-loop thread) ran on time. A test that expects a timeout sets a short
    /// one itself.
    func source(
        _ feed: String,
        client: HTTPFeedClient,
        limit: Int? = nil,
        query: String? = nil,
        configure: (inout HTTPFeedConfiguration) -> Void = { _ in }
    ) throws -> HTTPFeedSource {
        var url = try #require(feedURL(feed, limit: limit))
        if let query { url += (url.contains("?") ? "&" : "?") + query }
        var configuration = HTTPFeedConfiguration(url: try #require(URL(string: url)), requestTimeout: hangGuard)
        configure(&configuration)
        return try HTTPFeedSource(configuration: configuration, client: client, logger: quietLogger)
    }

    /// The feed as a store holds it after a full sync: newest first, bytes as served.
    func expectedItems(_ feed: String) async throws -> [FeedItem] {
        try await items(feed: feed).reversed().map { FeedItem(id: $0.id, payload: $0.jsonData) }
    }
}

/// Expects `operation` to throw a ``FeedError`` and returns it.
func expectFeedError(
    _ operation: () async throws -> FeedPage,
    sourceLocation: SourceLocation = #_sourceLocation
) async -> FeedError? {
    do {
        let page = try await operation()
        Issue.record("expected a FeedError, got a page of \(page.items.count) items", sourceLocation: sourceLocation)
        return nil
    } catch let error as FeedError {
        return error
    } catch {
        Issue.record("expected a FeedError, got \(type(of: error)): \(error)", sourceLocation: sourceLocation)
        return nil
    }
}

/// Drives a source the way the coordinator does (initial, older to the end, newer until caught
/// up), committing into ``FeedLog``, SyncCore's reference store, and retrying failed requests.
///
/// Used where a test needs the source's own behaviour without the coordinator's scheduling.
struct SyncDriver {
    let source: any FeedSource
    var log = FeedLog()
    /// Every error a request ended with, in order.
    var errors: [FeedError] = []
    /// Retries allowed per request before the test fails.
    var maxAttempts = 60
    /// Whether `Retry-After` is slept before retrying.
    var honourRetryAfter = true

    init(source: any FeedSource) {
        self.source = source
    }

    mutating func initial() async throws {
        let page = try await attempt { try await $0.fetchInitial() }
        log.commit(page, direction: .initial, at: Date())
    }

    mutating func olderToTheEnd() async throws {
        while !log.feed.endReached, let cursor = log.feed.olderCursor {
            let page = try await attempt { try await $0.fetchOlder(cursor: cursor) }
            log.commit(page, direction: .older, at: Date())
        }
    }

    /// Fetches newer pages until one comes back empty; returns how many pages it took.
    @discardableResult
    mutating func newerUntilCaughtUp() async throws -> Int {
        var pages = 0
        while true {
            let cursor = try #require(log.feed.newerCursor, "no newer cursor after \(pages) pages")
            let page = try await attempt { try await $0.fetchNewer(cursor: cursor) }
            log.commit(page, direction: .newer, at: Date())
            pages += 1
            if page.items.isEmpty { return pages }
        }
    }

    private mutating func attempt(_ request: (any FeedSource) async throws -> FeedPage) async throws -> FeedPage {
        for _ in 0..<maxAttempts {
            do {
                return try await request(source)
            } catch let error as FeedError {
                errors.append(error)
                if honourRetryAfter, let retryAfter = error.retryAfter { try await Task.sleep(for: retryAfter) }
            }
        }
        throw FeedError(.other, "gave up after \(maxAttempts) attempts; last: \(errors.last?.message ?? "-")")
    }
}

/// Sockets in state ESTABLISHED whose remote port is `port`, from the kernel's TCP table for
/// this process's network namespace (IPv4: the servers listen on 127.0.0.1). Read through
/// the process's own entry: `/proc/net` follows the reading thread, and other tests move
/// threads into namespaces of their own.
///
/// - Parameter localPort: only the connection from this port of ours, when given.
func establishedConnections(toPort port: Int, from localPort: Int? = nil) throws -> Int {
    try establishedLocalPorts(toPort: port).count { localPort == nil || $0 == localPort }
}

/// The local ports of this process's ESTABLISHED connections to `port` (see
/// ``establishedConnections(toPort:from:)``). A test that ran before may have left a connection
/// to a server that stopped, whose port another server now has: compare sets to tell yours.
func establishedLocalPorts(toPort port: Int) throws -> [Int] {
    // Read to the end: the kernel hands the table out a page per read, and a busy machine's is longer.
    let file = try #require(FileHandle(forReadingAtPath: "/proc/\(getpid())/net/tcp"))
    defer { try? file.close() }
    let table = String(decoding: try file.readToEnd() ?? Data(), as: UTF8.self)
    let rows = table.split(separator: "\n").dropFirst().map { $0.split(separator: " ") }.filter { $0.count > 3 }
    func portOf(_ address: Substring) -> Int? { address.split(separator: ":").last.flatMap { Int($0, radix: 16) } }
    // The table holds both ends of every loopback connection. A server's end of a connection
    // whose client happened to get `port` as its ephemeral port looks like a connection to
    // `port` too; it is told apart by its own port, which a server listens on (state 0A) and a
    // client's end never does.
    let listening = Set(rows.filter { $0[3] == "0A" }.compactMap { portOf($0[1]) })
    return rows.compactMap { fields in
        // The servers are on 127.0.0.1 (0100007F in the table's byte order): a connection of any
        // other process of the namespace to the same port elsewhere is not theirs.
        guard fields[2].hasPrefix("0100007F:"), let remotePort = portOf(fields[2]), let ownPort = portOf(fields[1]),
              remotePort == port, fields[3] == "01", !listening.contains(ownPort)
        else { return nil }
        return ownPort
    }
}

/// Starts the Python oracle `Oracle/<script>` (a server written in the tests, sharing no code
/// with syncd) with `arguments`, its output logged in `directory`, and returns it with the
/// decoded JSON line it prints once it listens (`{"port": N}`, `{"ports": [...]}`).
///
/// Polled, not awaited: a server that exits without saying it is ready ends the wait at once;
/// one that neither says it nor exits is stopped after the hang guard.
func launchPythonOracle<Ready: Decodable>(
    _ script: String, arguments: [String] = [], directory: TemporaryDirectory, ready: Ready.Type
) async throws -> (process: ChildProcess, ready: Ready) {
    let path = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Oracle/\(script)").path
    // The interpreter itself, not a launcher (pyenv's shim) that would get the signal instead.
    let python = try await runCommand(["python3", "-c", "import sys; print(sys.executable)"]).trimmingCharacters(in: .whitespacesAndNewlines)
    // -B: the oracles import oracle_http.py, whose compiled copy would land in the source tree.
    let process = try ChildProcess([python, "-B", path] + arguments, logPath: directory.file("\(script).log"))
    let deadline = ContinuousClock.now + hangGuard
    while ContinuousClock.now < deadline {
        if let line = process.output.split(separator: "\n").first(where: { $0.hasPrefix("{") }) {
            do {
                return (process, try JSONDecoder().decode(Ready.self, from: Data(line.utf8)))
            } catch {
                await process.stop()
                throw error
            }
        }
        guard process.isRunning else { break }
        try await Task.sleep(for: .milliseconds(20))
    }
    let output = process.output
    await process.stop()
    throw CommandFailed(command: ["python3", path] + arguments, status: -1, stderr: "\(script) did not say it listens: \(output)")
}

/// Runs the Python oracle `Oracle/<script>` with `arguments` (``launchPythonOracle(_:arguments:directory:ready:)``)
/// and `body` with the port it listens on; the server is stopped on every path.
func withPythonOracle<T: Sendable>(
    _ script: String, arguments: [String] = [], directory: TemporaryDirectory, _ body: (Int) async throws -> T
) async throws -> T {
    let (server, ready) = try await launchPythonOracle(script, arguments: arguments, directory: directory, ready: OracleReady.self)
    return try await withResource(server, closedBy: { await $0.stop() }) { _ in try await body(ready.port) }
}

/// The line a Python oracle with one port prints once it listens.
struct OracleReady: Decodable {
    var port: Int
}
