import Foundation
import HTTPFeedSource
import SyncCore
import Testing
import TestSupport

/// `HTTPFeedSource.bytesReceived` against a Mastodon-style server written in the test that counts
/// every byte it sends (`Oracle/mastodon_counting.py`): pages fetched through the connection pool
/// and through the backfill's own connection, gzip-compressed or not, and an error status, add up
/// to what the server sent, to the byte.
@Suite(.timeLimit(.minutes(2)))
struct WireBytesTests {
    struct Sent: Decodable {
        var bytes: Int64
        var bodies: Int64
        var requests: Int
    }

    /// Runs `body` with the server (gzip or not) and a source for its timeline; stops both on every
    /// path. `sent(n)` is the server's count once it has written that of `n` responses: it writes
    /// it after each response has gone out, so a client that has its answer may read it early.
    func withCountingServer(gzip: Bool, _ body: (HTTPFeedSource, _ port: Int, _ sent: (Int) async throws -> Sent) async throws -> Void) async throws {
        let directory = try TemporaryDirectory(prefix: "wire-bytes")
        let stats = directory.file("sent.json")
        try await withPythonOracle("mastodon_counting.py", arguments: ["0", "100", "300", stats] + (gzip ? ["gzip"] : []), directory: directory) { listening in
            try await withFeedClient { client in
                let url = try #require(URL(string: "http://127.0.0.1:\(listening)/api/v1/timelines/public?limit=20"))
                let source = try HTTPFeedSource(configuration: HTTPFeedConfiguration(url: url, requestTimeout: hangGuard), client: client, logger: quietLogger)
                try await body(source, listening) { responses in
                    func read() -> Sent? { try? JSONDecoder().decode(Sent.self, from: Data(contentsOf: URL(fileURLWithPath: stats))) }
                    try await waitUntil("the counting server has written its count of \(responses) responses", interval: .milliseconds(5)) {
                        (read()?.requests ?? 0) >= responses
                    }
                    return try #require(read())
                }
            }
        }
    }

    @Test(arguments: [false, true])
    func theSourceCountsWhatTheServerSent(gzip: Bool) async throws {
        try await withCountingServer(gzip: gzip) { source, port, sent in
            #expect(source.bytesReceived == 0)
            let first = try await source.fetchInitial()
            #expect(first.items.count == 20)
            #expect(source.bytesReceived == (try await sent(1)).bytes, "the pool's connection")
            // Older pages go over the backfill's own connection when the caller listens for the
            // next cursor early.
            var cursor = try #require(first.olderCursor)
            for _ in 0..<2 {
                let page = try await source.fetchOlder(cursor: cursor) { _ in }
                cursor = try #require(page.olderCursor)
            }
            let afterPages = try await sent(3)
            #expect(afterPages.requests == 3)
            #expect(source.bytesReceived == afterPages.bytes, "pages on both connections")
            if gzip {
                // Counted as sent, compressed: well under the decoded bodies' 3 × ~6.3 kB.
                #expect(afterPages.bodies < 3 * 20 * 300 / 4, "\(afterPages)")
            }
            // An error status is received too, its body with it.
            await #expect(throws: FeedError.self) { _ = try await source.fetchNewer(cursor: "http://127.0.0.1:\(port)/nowhere") }
            #expect(source.bytesReceived == (try await sent(4)).bytes, "with the 404")
        }
    }
}
