import DemoFeedServer
import Foundation
import HTTPFeedSource
import SyncCoordinator
import SyncCore
import SyncStore
import Testing
import TestSupport

/// The demo server's GitHub-style page mode, and syncd syncing from it.
@Suite("Demo server: GitHub-style page mode")
struct DemoPageModeTests {
    static let feed = FeedDefinition(name: "issues", initialCount: 40, pagination: .page)

    @Test("page numbers, per_page, Link first/prev/next/last (no prev on page 1), ETag and 304")
    func protocolShape() async throws {
        try await withFeedServer(.init(feeds: [Self.feed])) { server, _ in
            let base = try #require(server.feedURL("issues"))
            let first = try await rawRequest(base + "?per_page=15&state=all")
            #expect(first.status == 200)
            let link = try #require(first.header("link"))
            #expect(link == "<\(base)?state=all&per_page=15&page=2>; rel=\"next\", <\(base)?state=all&per_page=15&page=3>; rel=\"last\"")
            let second = try await rawRequest(base + "?per_page=15&page=2&max_id=0000000001")
            #expect(second.header("link")?.contains("rel=\"prev\"") == true && second.header("link")?.contains("rel=\"first\"") == true)
            #expect(second.body.contains("\"id\":\"\(id(25))\""), "cursors are ignored, as GitHub does")
            let etag = try #require(first.header("etag"))
            let again = try await rawRequest(base + "?per_page=15&state=all", headers: [("If-None-Match", etag)])
            #expect(again.status == 304 && again.body.isEmpty)
            try await server.appendItems(feed: "issues", count: 1)
            #expect(try await rawRequest(base + "?per_page=15&state=all", headers: [("If-None-Match", etag)]).status == 200)
        }
    }

    @Test("75 new items at 30 per page after a 304: refresh stores every one, in order")
    func refreshAfterManyNewItems() async throws {
        try await withFeedServer(.init(feeds: [Self.feed])) { server, client in
            try await withStore { store in
                let url = try #require(server.feedURL("issues")) + "?per_page=30"
                let http = HTTPFeedConfiguration(url: try #require(URL(string: url)), requestTimeout: hangGuard)
                #expect(http.pagination == .page)
                let source = try HTTPFeedSource(configuration: http, client: client, logger: quietLogger)
                try await withSyncedFeed("issues", from: source, into: store) { feed in
                    try await waitFor(feed, "backfill to the end") { $0.endReached && $0.itemCount == 40 && !$0.older.load.isLoading }
                    await feed.refresh()
                    try await waitFor(feed, "a refresh with nothing new") { !$0.newer.load.isLoading && $0.newer.load != .idle }
                    #expect(source.notModifiedCount == 1)
                    try await server.appendItems(feed: "issues", count: 75)
                    await feed.refresh()
                    try await waitFor(feed, "the refresh") { $0.itemCount == 115 && !$0.newer.load.isLoading && $0.gap == nil }
                }
                #expect(try await store.items(feed: "issues", offset: 0, limit: 1000) == (try await server.expectedItems("issues")))
            }
        }
    }
}
