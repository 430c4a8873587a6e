import ArgumentParser
import DemoFeedServer
import Foundation
import Logging

/// `demo-feed`: serves generated Link-header feeds with fault injection, for demos and tests.
@main
struct DemoFeedCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo-feed",
        abstract: "Serve generated, paginated feeds (Mastodon-style Link headers) with fault injection.",
        discussion: """
            Feeds: GET /feeds/NAME (also /api/v1/timelines/NAME) with limit, max_id (older), \
            min_id (immediately newer), since_id, and fault=SPEC for one request.
            Admin (loopback peers only): GET /admin/feeds, POST /admin/feeds/NAME/items?count=N, \
            POST /admin/feeds/NAME/delete?ids=A,B and /admin/feeds/NAME/edit?ids=A,B (in place), \
            GET /admin/feeds/NAME/requests, POST /admin/faults?fault=SPEC&count=N[&feed=NAME][&kind=initial|older|newer], \
            DELETE /admin/faults.
            Fault SPECs: status:CODE[:SECONDS|:date+SECONDS], latency:MS, stall, stall:body, malformed, \
            truncated, oversized[:BYTES][:chunked], reset, reset:body.
            Prints "listening on http://HOST:PORT" once ready; stops gracefully on SIGINT/SIGTERM.
            """
    )

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

    @Option(name: .customLong("fault"), help: "A random fault as SPEC=PROBABILITY, e.g. status:503=0.1, status:429:2=0.05, reset=0.02; repeatable.")
    var faults: [String] = []

    @Option(help: "Latency added to every feed request, as MS or MIN-MAX milliseconds.")
    var latencyMs: String?

    @Option(help: "Milliseconds between a page's headers and its body, as over a slow link.")
    var bodyDelayMs: Int = 0

    @Option(help: "Seed for random faults.")
    var seed: UInt64 = 1

    @Flag(help: "Never gzip responses, even when the client offers it.")
    var noGzip = false

    @Option(help: "Seconds a stalled request is held before its connection is closed.")
    var stallLimit = 300

    @Option(help: "Require this bearer token on feed requests (read from a file, so it stays out of `ps`).")
    var bearerTokenFile: String?

    @Option(help: "Log level: trace, debug, info, notice, warning, error, critical.")
    var logLevel = "info"

    @Flag(help: "Stop gracefully when standard input closes: a parent that starts this server with a pipe on stdin takes it down with it, even when the parent is killed.")
    var stopWhenStdinCloses = false

    func run() async throws {
        guard let level = Logger.Level(rawValue: logLevel) else {
            throw ValidationError("unknown log level '\(logLevel)'")
        }
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        let configuration = try makeConfiguration()
        if stopWhenStdinCloses { Self.stopWhenStdinCloses() }
        let server = try DemoFeedServer(configuration: configuration, logger: Logger(label: "demo-feed"))
        try await server.run { port in
            let host = configuration.host.contains(":") ? "[\(configuration.host)]" : configuration.host
            FileHandle.standardOutput.write(Data("listening on http://\(host):\(port)\n".utf8))
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

    private func makeConfiguration() throws -> DemoFeedServer.Configuration {
        do {
            var definitions = try (feeds.isEmpty ? ["home:1000:1"] : feeds).map { try FeedDefinition(spec: $0) }
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
                randomFaults: try faults.map { try RandomFault(spec: $0) },
                latencyMilliseconds: try latencyMs.map(Self.parseLatency),
                bodyDelayMilliseconds: bodyDelayMs,
                seed: seed,
                gzip: !noGzip,
                stallLimit: .seconds(stallLimit),
                bearerToken: try bearerTokenFile.map(Self.readToken)
            )
            try configuration.validate()
            return configuration
        } catch let error as DemoFeedServerError {
            throw ValidationError(error.description)
        }
    }

    private static func readToken(_ path: String) throws -> String {
        guard let data = FileManager.default.contents(atPath: path), let text = String(data: data, encoding: .utf8) else {
            throw ValidationError("cannot read the bearer token file \(path)")
        }
        let token = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !token.isEmpty else { throw ValidationError("the bearer token file \(path) is empty") }
        return token
    }

    private static func parseLatency(_ raw: String) throws -> ClosedRange<Int> {
        let parts = raw.split(separator: "-", omittingEmptySubsequences: false)
        guard (1...2).contains(parts.count), let low = Int(parts[0]), let high = Int(parts.last!), 0 <= low, low <= high else {
            throw ValidationError("--latency-ms must be MS or MIN-MAX with 0 <= MIN <= MAX, got '\(raw)'")
        }
        return low...high
    }
}
