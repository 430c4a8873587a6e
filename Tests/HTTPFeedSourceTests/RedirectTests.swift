import Foundation
import HTTPFeedSource
import SyncCoordinator
import SyncCore
import Testing
import TestSupport

/// Redirects against the GitHub-style server, with a second origin that records what it gets.
@Suite("Redirects: same origin followed, moved feeds and other origins shown, the token kept home")
struct RedirectTests {
    static let token = "redirect-t0ken"

    func source(_ server: GitHubStyleServer, _ client: HTTPFeedClient, path: String) throws -> HTTPFeedSource {
        // A guard against a hang only: six hops to the Python oracle took over 5 s in a congested full run.
        var http = HTTPFeedConfiguration(url: server.url(path, query: "per_page=10"), requestTimeout: hangGuard)
        http.authorization = .bearer(BearerToken(Self.token))
        return try HTTPFeedSource(configuration: http, client: client, logger: quietLogger)
    }

    /// A server holding `items` items, whose `/old` answers `status` with a Location made from it by
    /// `target`, and a source reading `/old` (`body`'s).
    func withRedirect(
        _ status: Int, to target: (GitHubStyleServer) -> String, items: Int, _ body: (GitHubStyleServer, HTTPFeedSource) async throws -> Void
    ) async throws {
        try await withGitHubStyleServer { server in
            try await server.add(items)
            try await server.redirect("/old", status: status, to: target(server))
            try await withFeedClient { client in try await body(server, try source(server, client, path: "/old")) }
        }
    }

    @Test("302, 303 and 307 to the same origin are followed, with the token; links resolve from the target", arguments: [302, 303, 307])
    func sameOrigin(status: Int) async throws {
        try await withRedirect(status, to: { _ in "/feed" }, items: 25) { server, source in
            let page = try await source.fetchInitial()
            #expect(page.items == Array(try await server.items().prefix(10)))
            #expect(page.olderCursor == server.url(query: "per_page=10&page=2").absoluteString)
            let received = try await server.received()
            #expect(received.map(\.path) == ["/old?per_page=10", "/feed?per_page=10"])
            #expect(received.allSatisfy { $0.headers["authorization"] == "Bearer \(Self.token)" })
        }
    }

    @Test("a redirect to another origin is not followed, and the other origin never sees the request or the token", arguments: [302, 307])
    func otherOrigin(status: Int) async throws {
        try await withRedirect(status, to: { server in server.url(other: true).absoluteString }, items: 5) { server, source in
            let error = try #require(await expectFeedError { try await source.fetchInitial() })
            #expect(error.kind == .httpStatus(status))
            #expect(error.isPermanent)
            #expect(error.message.contains("another origin") && error.message.contains(String(server.otherPort)), "\(error.message)")
            let received = try await server.received()
            #expect(!received.contains { $0.origin == "other" })
        }
    }

    @Test("301 and 308: the error names the new location and waits for the operator", arguments: [301, 308])
    func movedPermanently(status: Int) async throws {
        try await withRedirect(status, to: { _ in "/feed" }, items: 5) { server, source in
            let error = try #require(await expectFeedError { try await source.fetchInitial() })
            #expect(error.kind == .httpStatus(status))
            #expect(error.isPermanent)
            #expect(error.message.contains("moved to \(server.url("/feed", query: "per_page=10").absoluteString)"), "\(error.message)")
            #expect(try await server.received().map(\.path) == ["/old?per_page=10"], "not followed")

            // The coordinator shows it and does not retry on its own.
            let configuration = SyncConfiguration(retry: RetryPolicy(base: .milliseconds(10), multiplier: 1, cap: .milliseconds(10)), reconnectSpread: .zero)
            try await withSyncedFeed("moved", from: source, into: InMemoryFeedStore(), configuration: configuration) { feed in
                try await waitFor(feed, "the failure") { $0.initial.load.failure != nil }
                try await Task.sleep(for: .milliseconds(200))
                let state = await feed.state
                #expect(state.initial.load.failure?.nextRetryAt == nil)
                #expect(state.initial.load.failure?.attempt == 1)
                #expect(Presentation(state: state).main == .error(.init(message: error.message, isPermanent: true, nextRetryAt: nil, attempt: 1)))
            }
        }
    }

    @Test("a redirect loop ends after a bounded number of hops")
    func loop() async throws {
        try await withGitHubStyleServer { server in
            try await server.redirect("/a", status: 307, to: "/b")
            try await server.redirect("/b", status: 307, to: "/a")
            try await withFeedClient { client in
                let error = try #require(await expectFeedError { try await source(server, client, path: "/a").fetchInitial() })
                #expect(error.message.contains("more than \(HTTPFeedSource.maxRedirects) redirects"), "\(error.message)")
                #expect(try await server.received().count == HTTPFeedSource.maxRedirects + 1)
            }
        }
    }
}

@Suite("Conditional requests: ETag and Last-Modified on refresh, 304 counted as nothing new")
struct ConditionalRequestTests {
    @Test("a page feed's refresh sends If-None-Match and If-Modified-Since; a 304 keeps the store as it is")
    func pageFeed() async throws {
        try await withGitHubStyleServer { server in
            try await server.add(15)
            try await withFeedClient { client in
                let http = HTTPFeedConfiguration(url: server.url(query: "per_page=10"), requestTimeout: hangGuard)
                let source = try HTTPFeedSource(configuration: http, client: client, logger: quietLogger)
                var driver = SyncDriver(source: source)
                try await driver.initial()
                try await driver.olderToTheEnd()
                // Nothing new: one conditional request, answered 304.
                #expect(try await driver.newerUntilCaughtUp() == 1)
                #expect(source.notModifiedCount == 1)
                var received = try await server.received()
                let first = try #require(received.first)
                let refresh = try #require(received.last)
                #expect(first.headers["if-none-match"] == nil, "the first load is unconditional")
                #expect(refresh.path == "/feed?per_page=10")
                #expect(refresh.headers["if-none-match"]?.hasPrefix("W/\"") == true)
                #expect(refresh.headers["if-modified-since"] != nil)
                // New items: a 200 with a new ETag, and they are stored; the driver then asks page 1
                // once more (it reads an empty page as caught up), which is a 304 on the new ETag.
                try await server.add(3)
                #expect(try await driver.newerUntilCaughtUp() == 2)
                #expect(driver.log.items == (try await server.items()))
                #expect(source.notModifiedCount == 2)
                received = try await server.received()
                #expect(received.suffix(2).map { $0.headers["if-none-match"] != nil } == [true, true])
                #expect(driver.log.items == (try await server.items()))
                #expect(driver.errors.isEmpty)
            }
        }
    }
}
