import ArgumentParser
import DemoFeedServer
import Foundation
import Logging

/// The command line of the demo feed server, shared by `demo-feed` and the tests' fault-injecting
/// `demo-feed-faults`: the feeds, how they are served, logging, and how the server stops.
public struct DemoFeedOptions: ParsableArguments {
    /// What the server serves and how to steer it, for a command's `discussion`.
    public static let discussion = """
        Feeds: GET /feeds/NAME (also /api/v1/timelines/NAME) with limit, max_id (older), \
        min_id (immediately newer), since_id.
        Admin (loopback peers only): GET /admin/feeds, POST /admin/feeds/NAME/items?count=N, \
        POST /admin/feeds/NAME/delete?ids=A,B and /admin/feeds/NAME/edit?ids=A,B (in place), \
        GET /admin/feeds/NAME/requests, DELETE /admin/requests.
        Prints "listening on http://HOST:PORT" once ready; stops gracefully on SIGINT/SIGTERM.
        """

    @Option(help: "Address to bind. Keep loopback unless the demo needs otherwise.")
    var host = "127.0.0.1"

    @Option(help: "Port to bind; 0 picks a free port (printed on start).")
    var port = 8080

    @Option(name: .customLong("feed"), help: "A feed as NAME[:INITIAL_ITEMS[:NEW_ITEMS_PER_SECOND[:cursor|page]]]; page serves GitHub-style page numbers. Repeatable. Default: home:1000:1.")
    var feeds: [String] = []

    @Option(help: "Page size when a request gives no limit.")
    var limit = 20

    @Option(help: "Largest limit honoured.")
    var maxLimit = 100

    @Option(help: "JSON key of the item id.")
    var idField = "id"

    @Option(help: "Digits of the zero-padded ids.")
    var idWidth = 10

    @Flag(help: "Always send rel=\"next\" (like Mastodon), ending the feed with an empty page.")
    var alwaysNext = false

    @Option(help: "Latency added to every feed request, as MS or MIN-MAX milliseconds.")
    var latencyMs: String?

    @Option(help: "Milliseconds between a page's headers and its body, as over a slow link.")
    var bodyDelayMs: Int = 0

    @Flag(help: "Never gzip responses, even when the client offers it.")
    var noGzip = false

    @Option(help: "Require this bearer token on feed requests (read from a file, so it stays out of `ps`).")
    var bearerTokenFile: String?

    @Option(help: "Log level: trace, debug, info, notice, warning, error, critical.")
    var logLevel = "info"

    @Flag(help: "Stop gracefully when standard input closes: a parent that starts this server with a pipe on stdin takes it down with it, even when the parent is killed.")
    var stopWhenStdinCloses = false

    /// The options as parsed by a command.
    public init() {}

    /// Serves the feeds the options describe until SIGINT or SIGTERM (or, with
    /// `--stop-when-stdin-closes`, the end of standard input), with the request hook `makeHook`
    /// returns for the configuration, if any; prints `listening on http://HOST:PORT` once
    /// listening. Invalid options throw `ValidationError`, which the command reports with its usage.
    public func serve(hook makeHook: (DemoFeedServer.Configuration) throws(DemoFeedServerError) -> (any FeedRequestHook)? = { _ in nil }) async throws {
        guard let level = Logger.Level(rawValue: logLevel) else {
            throw ValidationError("unknown log level '\(logLevel)'")
        }
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        let configuration = try Self.validated { () throws(DemoFeedServerError) in try makeConfiguration() }
        let hook = try Self.validated { () throws(DemoFeedServerError) in try makeHook(configuration) }
        if stopWhenStdinCloses { Self.stopWhenStdinCloses() }
        let server = try DemoFeedServer(configuration: configuration, hook: hook, logger: Logger(label: "demo-feed"))
        try await server.run { port in
            let host = configuration.host.contains(":") ? "[\(configuration.host)]" : configuration.host
            FileHandle.standardOutput.write(Data("listening on http://\(host):\(port)\n".utf8))
        }
    }

    /// `body`'s result; its error as a `ValidationError`, which the command reports with its usage.
    public static func validated<T>(_ body: () throws(DemoFeedServerError) -> T) throws(ValidationError) -> T {
        do {
            return try body()
        } catch {
            throw ValidationError(error.description)
        }
    }

    /// A thread that waits for end of file on stdin, then sends this process SIGTERM, which the
    /// server handles as a graceful stop. It blocks in `read` and never wakes otherwise.
    private static func stopWhenStdinCloses() {
        let watcher = Thread {
            var byte: UInt8 = 0
            while true {
                let count = read(STDIN_FILENO, &byte, 1)
                if count == 0 || (count < 0 && errno != EINTR) { break }
            }
            kill(getpid(), SIGTERM)
        }
        watcher.name = "stdin-watch"
        watcher.start()
    }

    private func makeConfiguration() throws(DemoFeedServerError) -> DemoFeedServer.Configuration {
        var definitions = try (feeds.isEmpty ? ["home:1000:1"] : feeds).map { spec throws(DemoFeedServerError) in try FeedDefinition(spec: spec) }
        for index in definitions.indices {
            definitions[index].defaultLimit = limit
            definitions[index].maxLimit = maxLimit
            definitions[index].idField = idField
            definitions[index].idWidth = idWidth
            definitions[index].omitNextAtEnd = !alwaysNext
        }
        let configuration = DemoFeedServer.Configuration(
            host: host,
            port: port,
            feeds: definitions,
            latencyMilliseconds: try latencyMs.map { raw throws(DemoFeedServerError) in try Self.parseLatency(raw) },
            bodyDelayMilliseconds: bodyDelayMs,
            gzip: !noGzip,
            bearerToken: try bearerTokenFile.map { path throws(DemoFeedServerError) in try Self.readToken(path) }
        )
        try configuration.validate()
        return configuration
    }

    private static func readToken(_ path: String) throws(DemoFeedServerError) -> String {
        guard let data = FileManager.default.contents(atPath: path), let text = String(data: data, encoding: .utf8) else {
            throw .invalidArgument("cannot read the bearer token file \(path)")
        }
        let token = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !token.isEmpty else { throw .invalidArgument("the bearer token file \(path) is empty") }
        return token
    }

    private static func parseLatency(_ raw: String) throws(DemoFeedServerError) -> ClosedRange<Int> {
        let parts = raw.split(separator: "-", omittingEmptySubsequences: false)
        guard (1...2).contains(parts.count), let low = Int(parts[0]), let high = Int(parts.last!), 0 <= low, low <= high else {
            throw .invalidArgument("--latency-ms must be MS or MIN-MAX with 0 <= MIN <= MAX, got '\(raw)'")
        }
        return low...high
    }
}
