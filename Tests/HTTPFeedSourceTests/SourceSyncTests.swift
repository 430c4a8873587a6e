import DemoFeedServer
import Foundation
import HTTPFeedSource
import SyncCore
import Synchronization
import Testing
import TestSupport

@Suite("HTTP feed source: full sync against the demo server")
struct SourceSyncTests {
    @Test("thousands of items: initial, older to the end, newer as items appear; the copy equals the feed")
    func fullSync() async throws {
        try await withFeedServer(.init(feeds: [.init(name: "home", initialCount: 3000, maxLimit: 100)])) { server, client in
            var driver = SyncDriver(source: try server.source("home", client: client, limit: 100))
            try await driver.initial()
            #expect(driver.log.items.count == 100)
            #expect(driver.log.items.first?.id == id(3000))

            // Items that appear while the client pages backwards are picked up later by newer.
            try await server.appendItems(feed: "home", count: 37)
            try await driver.olderToTheEnd()
            #expect(driver.log.feed.endReached)
            #expect(driver.log.items.count == 3000)

            try await server.appendItems(feed: "home", count: 250)
            let pages = try await driver.newerUntilCaughtUp()
            #expect(pages == 4)  // 100 + 100 + 87, then the empty page that says "caught up"
            #expect(driver.log.items == (try await server.expectedItems("home")))
            #expect(driver.errors.isEmpty)

            // Nothing new: one empty page, cursor kept.
            let cursor = driver.log.feed.newerCursor
            #expect(try await driver.newerUntilCaughtUp() == 1)
            #expect(driver.log.feed.newerCursor == cursor)
            #expect(driver.log.items.count == 3287)
        }
    }

    @Test("an older page's next link is told from its headers, before its body has arrived")
    func olderCursorFromTheHeaders() async throws {
        try await withGitHubStyleServer { server in
            try await server.add(50)
            // Page 2's headers go out at once, and its body never: the test does not let it go.
            try await server.hold(page: 2, at: .body)
            try await withFeedClient { client in
                // Cancelled, not timed out: its time is far beyond the wait for the cursor below.
                let configuration = HTTPFeedConfiguration(url: server.url(query: "per_page=10"), requestTimeout: .seconds(120))
                let source = try HTTPFeedSource(configuration: configuration, client: client, logger: quietLogger)
                let known = Mutex<[String?]>([])
                let cursor = server.url(query: "per_page=10&page=2").absoluteString
                let fetch = BoundedTask {
                    try await source.fetchOlder(cursor: cursor) { older in known.withLock { $0.append(older) } }
                }
                try await waitUntil("the next link is told") { known.withLock { !$0.isEmpty } }
                let told = try #require(known.withLock { $0.first } ?? nil)
                #expect(told == server.url(query: "per_page=10&page=3").absoluteString, "the page after page 2")
                // Still waiting for the body, which the server holds.
                #expect(!fetch.hasEnded)
                fetch.cancel()
                let result = try await fetch.result("the cancelled fetch ended")
                #expect(throws: (any Error).self) { try result.get() }
                #expect(known.withLock { $0.count } == 1)
            }
        }
    }

    @Test("the page returned carries the older cursor told early, told once")
    func olderCursorToldMatchesThePage() async throws {
        let configuration = DemoFeedServer.Configuration(feeds: [.init(name: "home", initialCount: 50)], bodyDelayMilliseconds: 20)
        try await withFeedServer(configuration) { server, client in
            let source = try server.source("home", client: client, limit: 10)
            var cursor = try #require(try await source.fetchInitial().olderCursor)
            var pages = 1
            while true {
                let known = Mutex<[String?]>([])
                let page = try await source.fetchOlder(cursor: cursor) { older in known.withLock { $0.append(older) } }
                #expect(known.withLock { $0 } == [page.olderCursor])
                pages += 1
                guard let next = page.olderCursor else { break }
                cursor = next
            }
            #expect(pages == 5)
        }
    }

    @Test("Mastodon-style server that always links next: the end is the empty page")
    func alwaysNext() async throws {
        let feed = FeedDefinition(name: "home", initialCount: 95, omitNextAtEnd: false)
        try await withFeedServer(.init(feeds: [feed])) { server, client in
            var driver = SyncDriver(source: try server.source("home", client: client, limit: 20))
            try await driver.initial()
            try await driver.olderToTheEnd()
            #expect(driver.log.feed.endReached)
            #expect(driver.log.items == (try await server.expectedItems("home")))
        }
    }

    @Test("a feed that is empty at first is followed from its beginning: no item skipped")
    func emptyThenGrowing() async throws {
        try await withFeedServer(.init(feeds: [.init(name: "new", initialCount: 0)])) { server, client in
            var driver = SyncDriver(source: try server.source("new", client: client, limit: 10))
            try await driver.initial()
            #expect(driver.log.items.isEmpty)
            #expect(driver.log.feed.endReached)
            #expect(driver.log.feed.newerCursor?.contains("min_id=0") == true)
            // More than a page arrives before the next poll.
            try await server.appendItems(feed: "new", count: 35)
            try await driver.newerUntilCaughtUp()
            #expect(driver.log.items == (try await server.expectedItems("new")))
        }
    }

    @Test("the id field is configurable; payloads are stored as received")
    func customIDField() async throws {
        let feed = FeedDefinition(name: "uids", initialCount: 40, idField: "uid")
        try await withFeedServer(.init(feeds: [feed])) { server, client in
            let source = try server.source("uids", client: client, limit: 15) { $0.idField = "uid" }
            var driver = SyncDriver(source: source)
            try await driver.initial()
            try await driver.olderToTheEnd()
            #expect(driver.log.items == (try await server.expectedItems("uids")))
            // With the default id field the same page is malformed, not silently empty.
            let wrong = try server.source("uids", client: client)
            #expect(await expectFeedError { try await wrong.fetchInitial() }?.kind == .malformed)
        }
    }

    @Test("works with and without gzip; the page is the same")
    func gzipOnOff() async throws {
        try await withFeedServer(.init(feeds: [.init(name: "home", initialCount: 30)])) { server, zipping in
            let plainClient = HTTPFeedClient(options: .init(connectTimeout: hangGuard, decompression: false))
            defer { Task { try? await plainClient.shutdown() } }
            let zipped = try await server.source("home", client: zipping).fetchInitial()
            let plain = try await server.source("home", client: plainClient).fetchInitial()
            #expect(zipped == plain)
            #expect(!zipped.items.isEmpty)
        }
    }

    @Test("pages carry the cursors the coordinator needs")
    func cursors() async throws {
        try await withFeedServer(.init(feeds: [.init(name: "home", initialCount: 30)])) { server, client in
            let source = try server.source("home", client: client, limit: 10)
            let initial = try await source.fetchInitial()
            let older = try #require(initial.olderCursor)
            let newer = try #require(initial.newerCursor)
            #expect(older.contains("max_id=\(id(21))"))
            #expect(newer.contains("min_id=\(id(30))"))
            let olderPage = try await source.fetchOlder(cursor: older)
            #expect(olderPage.items.map(\.id) == (11...20).reversed().map(id))
            #expect(olderPage.newerCursor == nil)  // keep the one from the newest page
            let caughtUp = try await source.fetchNewer(cursor: newer)
            #expect(caughtUp.items.isEmpty)
            #expect(caughtUp.newerCursor == nil)
            #expect(await expectFeedError { try await source.fetchOlder(cursor: "not a url") }?.kind == .other)
        }
    }

    @Test("configuration is validated with a reason")
    func validation() throws {
        let client = HTTPFeedClient()
        defer { Task { try? await client.shutdown() } }
        for bad in ["ftp://x.example/feed", "/relative/path"] {
            let config = HTTPFeedConfiguration(url: URL(string: bad)!)
            #expect(throws: FeedError.self) { try HTTPFeedSource(configuration: config, client: client) }
        }
        var config = HTTPFeedConfiguration(url: URL(string: "http://127.0.0.1/feed")!)
        config.idField = ""
        #expect(throws: FeedError.self) { try HTTPFeedSource(configuration: config, client: client) }
        config.idField = "id"
        config.maxBodyBytes = 0
        #expect(throws: FeedError.self) { try HTTPFeedSource(configuration: config, client: client) }
    }
}
