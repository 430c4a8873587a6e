import Foundation
import SyncCore
import Testing
import TestSupport

/// The GitHub-style server of `Oracle/github_style.py`, run as a child process: page numbers,
/// `per_page`, Link first/prev/next/last, ETag/Last-Modified with 304s, scripted redirects, and
/// a second origin that records the headers it gets. It shares no code with syncd, so the list it
/// serves is an independent truth for the store to equal.
final class GitHubStyleServer: Sendable {
    private let process: ChildProcess
    private let directory: TemporaryDirectory
    /// The feed's origin.
    let port: Int
    /// Another origin on the same host (another port), for redirects that leave the feed's.
    let otherPort: Int
    /// HTTPS origins serving the same feed, by name.
    let securePorts: [String: Int]

    /// An HTTPS origin to start: its certificate and key (PEM files), and the CA whose client
    /// certificates it requires, if any.
    struct Secure: Sendable {
        var name: String
        var certificate: String
        var key: String
        var clientCA: String?
    }

    /// A request as the server received it.
    struct Received: Decodable, Sendable {
        var origin: String
        var path: String
        /// The client's port: requests with the same one came on the same connection.
        var peer: Int
        var headers: [String: String]
    }

    private init(process: ChildProcess, directory: TemporaryDirectory, ports: [Int], secure: [Secure]) {
        self.process = process
        self.directory = directory
        self.port = ports[0]
        self.otherPort = ports[1]
        self.securePorts = Dictionary(uniqueKeysWithValues: zip(secure.map(\.name), ports.dropFirst(2)))
    }

    static func start(secure: [Secure] = []) async throws -> GitHubStyleServer {
        let directory = try TemporaryDirectory(prefix: "github-style")
        let arguments = secure.flatMap { origin in
            ["--https", ([origin.name, origin.certificate, origin.key] + (origin.clientCA.map { [$0] } ?? [])).joined(separator: ":")]
        }
        struct Ready: Decodable { var ports: [Int] }
        let (process, ready) = try await launchPythonOracle("github_style.py", arguments: arguments, directory: directory, ready: Ready.self)
        return GitHubStyleServer(process: process, directory: directory, ports: ready.ports, secure: secure)
    }

    /// The feed's URL on this server (or on the other origin).
    func url(_ path: String = "/feed", query: String = "", other: Bool = false) -> URL {
        URL(string: "http://127.0.0.1:\(other ? otherPort : port)\(path)\(query.isEmpty ? "" : "?" + query)")!
    }

    /// The feed's URL on a named HTTPS origin.
    func secureURL(_ name: String, path: String = "/feed", query: String = "") -> URL {
        URL(string: "https://127.0.0.1:\(securePorts[name]!)\(path)\(query.isEmpty ? "" : "?" + query)")!
    }

    /// What the server wrote to its log (handshake failures, tracebacks).
    var output: String { process.output }

    /// Adds `count` new items at the top (numeric ids).
    func add(_ count: Int) async throws {
        try await admin("add", ["count": String(count)])
    }

    /// Adds items with these ids at the top, the last one newest.
    func add(ids: [String]) async throws {
        let json = String(decoding: try JSONEncoder().encode(ids), as: UTF8.self)
        try await admin("add", ["ids": json])
    }

    /// Answers requests for `path` on an origin with a redirect to `location`.
    func redirect(_ path: String, status: Int, to location: String, keepQuery: Bool = true, onOther: Bool = false) async throws {
        try await admin("redirect", [
            "path": path, "status": String(status), "location": location, "keep_query": keepQuery ? "1" : "0",
            "origin": onOther ? "other" : "main",
        ])
    }

    /// From now on, page `page` is answered with a body that says it is gzip and is not, once
    /// ``release()`` is called. (The server lets it go by itself only after ten minutes, a guard.)
    func corrupt(page: Int) async throws {
        try await admin("corrupt", ["page": "\(page)"])
    }

    /// Where ``hold(page:at:)`` holds an answer.
    enum HoldPoint: String {
        /// Before any byte of the response.
        case response
        /// After the headers, before the body (whose length the headers give).
        case body
    }

    /// From now on, answers for page `page` wait at `point` until ``release(page:)`` or
    /// ``release()`` is called. (The server lets them go by itself only after ten minutes, a guard.)
    func hold(page: Int, at point: HoldPoint = .response) async throws {
        try await admin("hold", ["page": "\(page)", "at": point.rawValue])
    }

    /// Lets the held answers for page `page` go, and those asked for later.
    func release(page: Int) async throws {
        try await admin("release", ["page": "\(page)"])
    }

    /// Lets every held answer go (those of ``corrupt(page:)`` too), and those asked for later.
    func release() async throws {
        try await admin("release", [:])
    }

    /// Whether the feed's answers end their connection (`Connection: close`) from now on.
    func closeConnections(_ on: Bool) async throws {
        try await admin("closing", ["on": on ? "1" : "0"])
    }

    /// Retitles the item with `id` in place, as an edit on GitHub does.
    func edit(id: String, title: String) async throws {
        try await admin("edit", ["id": id, "title": title])
    }

    /// Deletes the item with this id; the items below it move up a place.
    func delete(id: String) async throws {
        try await admin("delete", ["id": id])
    }

    /// The whole feed as a store should hold it: newest first, bytes as served.
    func items() async throws -> [FeedItem] {
        let response = try await rawRequest("http://127.0.0.1:\(port)/admin/items")
        let rows = try JSONDecoder().decode([[JSONScalar]].self, from: Data(response.body.utf8))
        return rows.map { FeedItem(id: $0[0].text, payload: Data($0[1].text.utf8)) }
    }

    /// Every feed request received so far, on both origins.
    func received() async throws -> [Received] {
        let response = try await rawRequest("http://127.0.0.1:\(port)/admin/requests")
        return try JSONDecoder().decode([Received].self, from: Data(response.body.utf8))
    }

    func stop() async {
        await process.stop()
    }

    private func admin(_ command: String, _ parameters: [String: String]) async throws {
        var components = URLComponents(string: "http://127.0.0.1:\(port)/admin/\(command)")!
        components.queryItems = parameters.sorted { $0.key < $1.key }.map { URLQueryItem(name: $0.key, value: $0.value) }
        // URLComponents leaves '+' alone, which a query parser reads as a space.
        let url = components.url!.absoluteString.replacingOccurrences(of: "+", with: "%2B")
        let response = try await rawRequest(url, method: .POST)
        guard response.status == 200 else { throw CommandFailed(command: [url], status: Int32(response.status), stderr: response.body) }
    }

    /// An id (number or string) or a payload, as text.
    private struct JSONScalar: Decodable {
        var text: String
        init(from decoder: any Decoder) throws {
            let container = try decoder.singleValueContainer()
            if let number = try? container.decode(Int.self) {
                text = String(number)
            } else {
                text = try container.decode(String.self)
            }
        }
    }
}

/// Starts a GitHub-style server, runs `body`, and stops the server whatever happens.
func withGitHubStyleServer<T: Sendable>(secure: [GitHubStyleServer.Secure] = [], _ body: (GitHubStyleServer) async throws -> T) async throws -> T {
    try await withResource(try await GitHubStyleServer.start(secure: secure), closedBy: { await $0.stop() }, body)
}
