import Foundation
import Testing
import TestSupport

/// The many-dialect server of `Oracle/dialects.py`, run as a child process: one mutable list of
/// items served as Bluesky, Slack, Stripe, Notion, Jira, JSON:API, HAL, JSON Feed, Atom (RFC 5005
/// archives), RSS and plainer shapes serve theirs (the script's header lists each dialect's URL,
/// parameters and cursors). It shares no code with syncd, so the ids it lists for a dialect are
/// an independent truth for a mirror of that dialect to equal.
final class DialectServer: Sendable {
    private let process: ChildProcess
    /// Kept for the server's log, which lives as long as the server.
    private let directory: TemporaryDirectory
    /// The loopback port every dialect and the admin endpoints share.
    let port: Int

    /// Every dialect's name as `ids(_:)` takes it, so a test can run over all of them.
    static let dialects = [
        "bluesky", "slack", "stripe", "notion", "jira", "jsonapi", "hal", "jsonfeed", "offset", "pages",
        "bareoffset", "headercursor", "opaque", "ascending", "atom", "rss",
    ]

    /// A request as the server received it; the query still percent-encoded, as sent, so a test
    /// sees exactly which cursor parameters a client used.
    struct Received: Decodable, Sendable, Equatable {
        var path: String
        var query: String
    }

    private init(process: ChildProcess, directory: TemporaryDirectory, port: Int) {
        self.process = process
        self.directory = directory
        self.port = port
    }

    /// Starts the server with items 1...`items` (larger is newer) on a free port.
    static func start(items: Int) async throws -> DialectServer {
        let directory = try TemporaryDirectory(prefix: "dialects")
        let (process, ready) = try await launchPythonOracle("dialects.py", arguments: ["0", String(items)], directory: directory, ready: OracleReady.self)
        return DialectServer(process: process, directory: directory, port: ready.port)
    }

    /// A dialect's URL on this server, from its path and query as the dialect spells them
    /// (`"/v1/charges?limit=20"`); brackets in JSON:API's parameters must come percent-encoded.
    func url(_ pathAndQuery: String) -> URL {
        URL(string: "http://127.0.0.1:\(port)\(pathAndQuery)")!
    }

    /// What the server wrote to its log: a traceback when a dialect failed.
    var output: String { process.output }

    /// Puts `count` new items at the top of every dialect at once; returns the newest item's number.
    @discardableResult
    func add(_ count: Int) async throws -> Int {
        struct Added: Decodable { var newest: Int }
        return try JSONDecoder().decode(Added.self, from: try await admin("add", ["count": String(count)])).newest
    }

    /// Every item's id as `dialect` spells it (what its id pointer yields, as a string), newest
    /// first whatever order the dialect lists in: the truth a mirror is compared with.
    func ids(_ dialect: String) async throws -> [String] {
        struct IDs: Decodable { var ids: [String] }
        return try JSONDecoder().decode(IDs.self, from: try await admin("ids", ["dialect": dialect])).ids
    }

    /// Every dialect request received since the start or the last ``clearRequests()``, in
    /// order, unanswered ones (while ``down()``) included.
    func requests() async throws -> [Received] {
        struct Requests: Decodable { var requests: [Received] }
        return try JSONDecoder().decode(Requests.self, from: try await admin("requests", [:])).requests
    }

    /// Forgets the requests received so far, so that a test looks only at what one step asked.
    func clearRequests() async throws {
        try await admin("requests/clear", [:])
    }

    /// From now on closes every dialect request's connection without an answer: a test's offline
    /// period, without stopping the server (whose state and port a test keeps).
    func down() async throws {
        try await admin("down", [:])
    }

    /// Ends ``down()``.
    func up() async throws {
        try await admin("up", [:])
    }

    /// Makes the next `count` dialect requests wait until ``release()``, so a test can act (add
    /// items, cancel, go down) while a walk is known to be mid-way. Held requests are answered as
    /// of their release. (The server lets them go by itself only after ten minutes, a guard.)
    func hold(_ count: Int) async throws {
        try await admin("hold", ["count": String(count)])
    }

    /// How many requests are waiting in a ``hold(_:)`` now: what a test polls before acting.
    func held() async throws -> Int {
        struct Held: Decodable { var waiting: Int }
        return try JSONDecoder().decode(Held.self, from: try await admin("held", [:])).waiting
    }

    /// Lets every held request go and cancels what was left of the hold.
    func release() async throws {
        try await admin("release", [:])
    }

    /// Stops the server (SIGTERM, bounded; SIGKILL after the hang guard).
    func stop() async {
        await process.stop()
    }

    /// The admin endpoints answer POST with JSON; the raw client, not URLSession, which is
    /// flaky on Linux here.
    @discardableResult
    private func admin(_ command: String, _ parameters: [String: String]) async throws -> Data {
        var components = URLComponents(string: "http://127.0.0.1:\(port)/admin/\(command)")!
        if !parameters.isEmpty {
            components.queryItems = parameters.sorted { $0.key < $1.key }.map { URLQueryItem(name: $0.key, value: $0.value) }
        }
        let url = components.url!.absoluteString
        let response = try await rawRequest(url, method: .POST)
        guard response.status == 200 else { throw CommandFailed(command: [url], status: Int32(response.status), stderr: response.body) }
        return Data(response.body.utf8)
    }
}

/// Starts a dialect server, runs `body`, and stops the server whatever happens.
func withDialectServer<T: Sendable>(items: Int, _ body: (DialectServer) async throws -> T) async throws -> T {
    try await withResource(try await DialectServer.start(items: items), closedBy: { await $0.stop() }, body)
}
