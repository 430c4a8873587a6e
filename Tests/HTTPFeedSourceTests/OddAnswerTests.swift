import AsyncHTTPClient
import DemoFeedServer
import Foundation
import HTTPFeedSource
import NIOCore
import SyncCore
import Synchronization
import Testing
import TestSupport

/// Answers that are not the feed's JSON, from `Oracle/odd_answers.py` (written in the test): each
/// is said for what it is, with the URL and the redirect that led there, and a sign-in page is
/// not retried. And a shared `HTTPClient` with its default options reads a feed.
@Suite("Answers that are not the feed", .timeLimit(.minutes(2)))
struct OddAnswerTests {
    /// Runs `body` with the server's port; stops the server on every path.
    func withOddServer(_ body: (Int) async throws -> Void) async throws {
        try await withPythonOracle("odd_answers.py", directory: try TemporaryDirectory(prefix: "odd-answers"), body)
    }

    func error(_ path: String, port: Int, client: HTTPFeedClient) async throws -> FeedError? {
        let configuration = HTTPFeedConfiguration(url: URL(string: "http://127.0.0.1:\(port)\(path)")!, requestTimeout: hangGuard)
        let source = try HTTPFeedSource(configuration: configuration, client: client, logger: quietLogger)
        return await expectFeedError { try await source.fetchInitial() }
    }

    @Test("a sign-in page, directly or after a redirect, is said as such and not retried; its title is cleaned")
    func signInPages() async throws {
        try await withOddServer { port in
            try await withFeedClient { client in
                let direct = try #require(try await error("/login-page", port: port, client: client))
                #expect(direct.message.contains("GET http://127.0.0.1:\(port)/login-page: the server answered with a login page, not the feed"))
                #expect(direct.message.contains("check token or token_file"))
                #expect(direct.isPermanent, "a login page does not go away by asking again")
                let redirected = try #require(try await error("/redirected", port: port, client: client))
                #expect(redirected.message.contains("/redirected (redirected to http://127.0.0.1:\(port)/login?next="))
                #expect(redirected.message.contains("): the server answered with a login page"))
                #expect(redirected.isPermanent)
                let other = try #require(try await error("/error-page", port: port, client: client))
                #expect(other.message.hasSuffix(#"the server answered with an HTML page ("502 Bad Gateway"), not the feed's JSON"#))
                #expect(!other.isPermanent, "an error page may pass")
                #expect(!other.message.contains("\u{1B}"))
            }
        }
    }

    @Test("a body in an encoding not asked for is named; a gzip body reaching a client that does not decompress says what to do")
    func encodings() async throws {
        try await withOddServer { port in
            try await withFeedClient { client in
                let brotli = try #require(try await error("/brotli", port: port, client: client))
                #expect(brotli.message.hasSuffix("the server sent a body encoded as br, which was not asked for (syncd asks for gzip or deflate)"))
                // Decompressed by the pool, as asked.
                let configuration = HTTPFeedConfiguration(url: URL(string: "http://127.0.0.1:\(port)/gzip-always")!, requestTimeout: hangGuard)
                #expect(try await HTTPFeedSource(configuration: configuration, client: client, logger: quietLogger).fetchInitial().items.map(\.id) == ["2", "1"])
            }
            try await withHTTPClient(.init(redirectConfiguration: .disallow)) { http in
                let gzipped = try #require(try await error("/gzip-always", port: port, client: HTTPFeedClient(sharing: http)))
                #expect(gzipped.message.contains("the body is still gzip-compressed"))
                #expect(gzipped.message.contains("decompression: .enabled(limit:)"))
            }
        }
    }

    @Test("Link headers folded over several lines (obs-fold) are unfolded: the first page, and a backfill's walk")
    func foldedHeaders() async throws {
        try await withOddServer { port in
            try await withFeedClient { client in
                let url = "http://127.0.0.1:\(port)/folded"
                let configuration = HTTPFeedConfiguration(url: URL(string: url)!, requestTimeout: hangGuard)
                // The first page through the pool, the rest through the unfolding path it switched to.
                let source = try HTTPFeedSource(configuration: configuration, client: client, logger: quietLogger)
                let first = try await source.fetchInitial()
                #expect(first.items.map(\.id) == ["6", "5"])
                #expect(first.olderCursor == "\(url)?page=2")
                let second = try await source.fetchOlder(cursor: try #require(first.olderCursor))
                #expect(second.items.map(\.id) == ["4", "3"])
                #expect(second.olderCursor == "\(url)?page=3")
                let last = try await source.fetchOlder(cursor: try #require(second.olderCursor))
                #expect(last.items.map(\.id) == ["2", "1"])
                #expect(last.olderCursor == nil, "the last page links no next")

                // A backfill's page on a fresh source goes over the walk's connection first.
                let walking = try HTTPFeedSource(configuration: configuration, client: client, logger: quietLogger)
                let told = ReceivedCursors()
                let walked = try await walking.fetchOlder(cursor: "\(url)?page=2") { told.append($0) }
                #expect(walked.items.map(\.id) == ["4", "3"])
                #expect(walked.olderCursor == "\(url)?page=3")
                #expect(told.all == ["\(url)?page=3"], "the next page's cursor is told once")
            }
        }
    }

    @Test("a shared HTTPClient with its default configuration reads a feed that gzips when asked")
    func sharedDefaultClient() async throws {
        // No decompression: what `HTTPClient.shared` is.
        try await withHTTPClient(.init(redirectConfiguration: .disallow)) { http in
            try await withDemoServer(.init(feeds: [.init(name: "home", initialCount: 30)])) { server in
                let page = try await server.source("home", client: HTTPFeedClient(sharing: http)).fetchInitial()
                #expect(page.items.count == 20)
            }
        }
    }
}

/// Cursors told by a source, in order, from whichever thread tells them.
private final class ReceivedCursors: Sendable {
    private let cursors = Mutex<[String?]>([])
    func append(_ cursor: String?) { cursors.withLock { $0.append(cursor) } }
    var all: [String?] { cursors.withLock { $0 } }
}
