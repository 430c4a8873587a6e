import Foundation
import HTTPFeedSource
import SyncCoordinator
import SyncCore
import SyncStore
import Testing
import TestSupport

/// Page-numbered feeds, synced by the coordinator into SQLite from the GitHub-style server of
/// the tests (Python, no code shared with syncd). Each test ends with the store equal to the
/// server's list: same items, same order, no gap, no duplicate.
@Suite("Page-numbered feeds (GitHub style) end to end")
struct PageFeedTests {
    static func configuration(gapPageLimit: Int = 10, backfill: Int = Int.max) -> SyncConfiguration {
        SyncConfiguration(
            retry: RetryPolicy(base: .milliseconds(20), multiplier: 1.6, cap: .milliseconds(200)),
            reconnectSpread: .zero, refreshInterval: nil, backfillDepth: backfill, gapPageLimit: gapPageLimit)
    }

    /// A coordinator syncing the server's feed at `perPage` items per page into a new store.
    func withFeed(
        _ server: GitHubStyleServer, perPage: Int, configuration: SyncConfiguration = Self.configuration(),
        pagination: FeedPagination? = nil,
        _ body: (FeedCoordinator<ContinuousClock>, SQLiteFeedStore) async throws -> Void
    ) async throws {
        try await withFeedClient { client in
            try await withStore { store in
                let http = HTTPFeedConfiguration(url: server.url(query: "per_page=\(perPage)"), requestTimeout: hangGuard, pagination: pagination)
                let source = try HTTPFeedSource(configuration: http, client: client, logger: quietLogger)
                try await withSyncedFeed("issues", from: source, into: store, configuration: configuration) { try await body($0, store) }
            }
        }
    }

    /// A server holding `items` and a feed of it at `perPage` items per page, backfilled to the end.
    func withBackfilledFeed(
        items: Int, perPage: Int, configuration: SyncConfiguration = Self.configuration(),
        _ body: (GitHubStyleServer, FeedCoordinator<ContinuousClock>, SQLiteFeedStore) async throws -> Void
    ) async throws {
        try await withGitHubStyleServer { server in
            try await server.add(items)
            try await withFeed(server, perPage: perPage, configuration: configuration) { feed, store in
                try await waitFor(feed, "backfill to the end") { $0.endReached && $0.itemCount == items && !$0.older.load.isLoading }
                try await body(server, feed, store)
            }
        }
    }

    func expectMirror(_ store: SQLiteFeedStore, _ server: GitHubStyleServer, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let stored = try await store.items(feed: "issues", offset: 0, limit: 100_000)
        let truth = try await server.items()
        #expect(stored.count == truth.count, "stored \(stored.count), the server has \(truth.count)", sourceLocation: sourceLocation)
        #expect(stored == truth, sourceLocation: sourceLocation)
    }

    /// Issues retitled on the server reach the store on the next refresh, where they stand:
    /// the edited bytes replace the stored ones and nothing moves or repeats.
    @Test("Items edited on page 1 are replaced in place by the next refresh")
    func editsOnTheFirstPageReachTheStore() async throws {
        try await withBackfilledFeed(items: 40, perPage: 30) { server, feed, store in
            let newest = try await server.items().prefix(3).map(\.id)
            try await server.edit(id: newest[0], title: "retitled \"once\" ☃")
            try await server.edit(id: newest[2], title: "")
            await feed.refresh()
            try await waitUntil("the edits are stored") {
                let stored = try await store.items(feed: "issues", offset: 0, limit: 3).map(\.payload)
                return stored == (try await server.items().prefix(3).map(\.payload))
            }
            try await expectMirror(store, server)
            #expect(await feed.state.itemCount == 40)
        }
    }

    @Test("75 new items at 30 per page: refresh walks pages 1 to 3 and stores every one, in order")
    func refreshWalksDownToTheStoredItems() async throws {
        try await withBackfilledFeed(items: 40, perPage: 30) { server, feed, store in
            try await server.add(75)
            let before = try await server.received().count
            await feed.refresh()
            try await waitFor(feed, "refresh") { $0.itemCount == 115 && !$0.newer.load.isLoading && $0.gap == nil }
            try await expectMirror(store, server)
            let pages = try await server.received().dropFirst(before).map(\.path)
            #expect(pages.count == 3, "page 1, then the gap's pages 2 and 3, where it met stored items: \(pages)")
            #expect(await feed.state.newer.load == .loaded)
        }
    }

    @Test("a gap longer than the bound is shown, not hidden, and the next refresh closes it")
    func anUnclosedGapIsVisible() async throws {
        try await withBackfilledFeed(items: 12, perPage: 5, configuration: Self.configuration(gapPageLimit: 2)) { server, feed, store in
            try await server.add(23)  // five pages of new items
            await feed.refresh()
            try await waitFor(feed, "the bound") { $0.newer.load.failure != nil }
            let state = await feed.state
            #expect(state.gap == FeedGap(cursor: server.url(query: "per_page=5&page=3").absoluteString, pages: 2, items: 10))
            #expect(state.newer.load.failure?.error.message.contains("gap not closed") == true)
            // Each refresh goes on from the gap: pages 3 and 4, then page 5 meets the stored items.
            await feed.refresh()
            try await waitFor(feed, "the second refresh") { !$0.newer.load.isLoading && $0.gap?.pages == 4 }
            #expect(await feed.state.newer.load.failure != nil)
            await feed.refresh()
            try await waitFor(feed, "the third refresh") { $0.gap == nil && !$0.newer.load.isLoading && $0.newer.load.failure == nil }
            try await expectMirror(store, server)
        }
    }

    /// Loads older pages by hand until the end (or a failure), as many as it takes.
    func loadOlderToTheEnd(_ feed: FeedCoordinator<ContinuousClock>) async throws {
        for _ in 0..<200 where !(await feed.state.endReached) {
            await feed.loadOlder()
            try await waitFor(feed, "an older page") { !$0.older.load.isLoading }
            if await feed.state.older.load.failure != nil { break }
        }
        #expect(await feed.state.endReached)
        #expect(await feed.state.older.load.failure == nil)
    }

    @Test("page shifts during backfill: pages that add nothing are passed, newer items go on top")
    func pageShiftsDuringBackfill() async throws {
        try await withGitHubStyleServer { server in
            try await server.add(100)
            try await withFeed(server, perPage: 10, configuration: Self.configuration(backfill: 0)) { feed, store in
                try await waitFor(feed, "the first page") { $0.hasLoaded && $0.itemCount == 10 }
                // Ten new items: page 2 is now exactly the stored page 1 (it adds nothing).
                try await server.add(10)
                await feed.loadOlder()
                try await waitFor(feed, "page 2") { !$0.older.load.isLoading }
                #expect(await feed.state.itemCount == 10)
                #expect(await feed.state.older.load == .loaded, "not a stall: next moved on")
                // Fifteen more: page 3 starts with five items newer than every stored one.
                try await server.add(15)
                await feed.loadOlder()
                try await waitFor(feed, "page 3") { !$0.older.load.isLoading }
                let truth = try await server.items()
                #expect(try await store.items(feed: "issues", offset: 0, limit: 6).map(\.id) == [truth[20], truth[21], truth[22], truth[23], truth[24], truth[25]].map(\.id),
                        "above the stored maximum, in page order")
                try await loadOlderToTheEnd(feed)
                await feed.refresh()
                try await waitFor(feed, "refresh") { $0.itemCount == truth.count && !$0.newer.load.isLoading && $0.gap == nil }
                try await expectMirror(store, server)
            }
        }
    }

    @Test("backfill through shifting pages to the end, then refresh: the store equals the server")
    func backfillAndRefreshUnderShifts() async throws {
        try await withGitHubStyleServer { server in
            try await server.add(200)
            try await withFeed(server, perPage: 20, configuration: Self.configuration(backfill: 0)) { feed, store in
                try await waitFor(feed, "the first page") { $0.hasLoaded && $0.itemCount == 20 }
                // Shifts smaller than a page between older loads, so each page meets the last.
                for round in 0..<12 {
                    try await server.add([3, 12, 0, 19, 7][round % 5])
                    await feed.loadOlder()
                    try await waitFor(feed, "older page \(round)") { !$0.older.load.isLoading }
                }
                try await loadOlderToTheEnd(feed)
                await feed.refresh()
                let total = try await server.items().count
                try await waitFor(feed, "refresh") { $0.itemCount == total && !$0.newer.load.isLoading && $0.gap == nil }
                try await expectMirror(store, server)
            }
        }
    }

    @Test("ids café (NFC) and cafe\u{301} (NFD) in one page are two items, stored byte for byte")
    func exactIDs() async throws {
        try await withGitHubStyleServer { server in
            try await server.add(ids: ["caf\u{E9}", "cafe\u{301}", "x"])
            try await withFeed(server, perPage: 30) { feed, store in
                try await waitFor(feed, "the first load") { $0.hasLoaded && !$0.initial.load.isLoading }
                #expect(await feed.state.initial.load == .loaded)
                try await expectMirror(store, server)
                let stored = try await store.items(feed: "issues", offset: 0, limit: 10)
                #expect(stored.map { Array($0.id.utf8) } == [Array("x".utf8), Array("cafe\u{301}".utf8), Array("caf\u{E9}".utf8)])
            }
        }
    }

    @Test("a page feed with one page at first (no links to tell its style) is recognised once it grows")
    func detectedLate() async throws {
        try await withGitHubStyleServer { server in
            try await server.add(5)
            try await withFeedClient { client in
                try await withStore { store in
                    // No page parameter in the url: nothing says "page" until the server's links do.
                    let http = HTTPFeedConfiguration(url: server.url(), requestTimeout: hangGuard)
                    #expect(http.pagination == .automatic)
                    let source = try HTTPFeedSource(configuration: http, client: client, logger: quietLogger)
                    try await withSyncedFeed("issues", from: source, into: store, configuration: Self.configuration()) { feed in
                        try await waitFor(feed, "the first load") { $0.endReached && $0.itemCount == 5 }
                        try await server.add(70)  // three pages of 30 now
                        await feed.refresh()
                        try await waitFor(feed, "the refresh") { $0.itemCount == 75 && !$0.newer.load.isLoading && $0.gap == nil }
                    }
                    try await expectMirror(store, server)
                }
            }
        }
    }

    @Test("pagination is detected from the links when not configured")
    func detectedPagination() async throws {
        try await withGitHubStyleServer { server in
            try await server.add(45)  // more than GitHub's default 30 per page, so page 1 has links
            try await withFeedClient { client in
                // No per_page in the URL: nothing in the configuration says "page".
                let http = HTTPFeedConfiguration(url: server.url(), requestTimeout: hangGuard)
                #expect(http.pagination == .automatic)
                let source = try HTTPFeedSource(configuration: http, client: client, logger: quietLogger)
                let first = try await source.fetchInitial()
                #expect(first.continuation == server.url(query: "page=2").absoluteString)
                #expect(first.newerCursor == server.url().absoluteString, "refresh reads page 1, not a min_id GitHub ignores")
            }
        }
    }
}
