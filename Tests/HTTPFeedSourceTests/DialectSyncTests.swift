import Foundation
import HTTPFeedSource
import SyncCoordinator
import SyncCore
import SyncStore
import Testing
import TestSupport

/// Each API style of `Oracle/dialects.py` (written in the tests, sharing no code with syncd),
/// mirrored by the coordinator into SQLite through a ``FeedDescriptor``: a backfill cut short and
/// resumed by a new coordinator after more than a page of items arrived, a refresh, an offline
/// period and more items after it. The store must equal the server's list, item by item and in
/// order, after each.
///
/// Positional cursors (offsets, page numbers, HAL's and JSON Feed's page links) kept over the
/// stop point at newer items once more arrived than they skip: with the backfill resumed beside
/// the refresh, those were stored below older ones (offset, 1 run in 3: `61, 50…46, 60…51`).
@Suite("Feed dialects mirrored end to end", .timeLimit(.minutes(6)))
struct DialectSyncTests {
    /// One style: the truth's name on the server, the feed's URL at 10 items a page (JSON Feed
    /// pages by 20), and the descriptor that reads it.
    struct Case: Sendable, CustomTestStringConvertible {
        var dialect: String
        var path: String
        var descriptor: FeedDescriptor
        var testDescription: String { dialect }
    }

    static func pointer(_ text: String) -> JSONPointer { (try? JSONPointer(text)) ?? .root }

    static let cases: [Case] = [
        Case(dialect: "bluesky", path: "/xrpc/app.bsky.feed.getAuthorFeed?actor=alice.test&limit=10", descriptor: FeedDialect.bluesky.descriptor),
        Case(dialect: "slack", path: "/api/conversations.history?channel=C123&limit=10", descriptor: FeedDialect.slack.descriptor),
        Case(dialect: "stripe", path: "/v1/charges?limit=10", descriptor: FeedDialect.stripe.descriptor),
        Case(dialect: "notion", path: "/v1/blocks/b1/children?page_size=10", descriptor: FeedDialect.notion.descriptor),
        Case(dialect: "jira", path: "/rest/api/3/search/jql?jql=ORDER%20BY%20created%20DESC&maxResults=10", descriptor: FeedDialect.jira.descriptor),
        Case(dialect: "jsonapi", path: "/jsonapi/articles?page%5Bsize%5D=10", descriptor: FeedDialect.jsonapi.descriptor),
        Case(dialect: "hal", path: "/hal/items?size=10", descriptor: FeedDialect.hal.descriptor),
        Case(dialect: "jsonfeed", path: "/feed.json", descriptor: FeedDialect.jsonfeed.descriptor),
        Case(dialect: "offset", path: "/offset/items?limit=10", descriptor: FeedDescriptor(
            older: .offset(parameter: "offset"), newer: .head, end: PageEnd(total: pointer("/total")))),
        Case(dialect: "pages", path: "/pages/items?per_page=10", descriptor: FeedDescriptor(older: .pageNumber(parameter: "page", first: 1), newer: .head)),
        Case(dialect: "bareoffset", path: "/bareoffset/items?limit=10", descriptor: FeedDescriptor(older: .offset(parameter: "offset"), newer: .head)),
        Case(dialect: "headercursor", path: "/headercursor/items?limit=10", descriptor: FeedDescriptor(
            older: .headerCursor(header: "X-Next-Cursor", parameter: "cursor"), newer: .head)),
        // The default reading: no `prev` link, so newer items are read from the head (asked with
        // min_id, which this server ignores, 15 of 25 new items were lost).
        Case(dialect: "opaque", path: "/opaque/items?limit=10", descriptor: FeedDescriptor()),
        // Read without a dialect: found to be Atom and RSS by their bodies.
        Case(dialect: "atom", path: "/atom/current.xml", descriptor: FeedDescriptor()),
        Case(dialect: "rss", path: "/rss.xml", descriptor: FeedDialect.rss.descriptor),
        // Listed oldest first: read forward from the first page, then on from the last one. Read
        // as newest first it was stored reversed and items added later were never asked for.
        Case(dialect: "ascending", path: "/ascending/items?limit=10", descriptor: FeedDescriptor(order: .oldestFirst)),
    ]

    static func configuration(backfill: Int) -> SyncConfiguration {
        SyncConfiguration(
            retry: RetryPolicy(base: .milliseconds(20), multiplier: 1.6, cap: .milliseconds(200)),
            reconnectSpread: .zero, refreshInterval: nil, backfillDepth: backfill, gapPageLimit: 50)
    }

    /// A coordinator on `store` reading `style` from `server`, for `body`; stopped after it.
    func withFeed(
        _ style: Case, _ server: DialectServer, _ store: SQLiteFeedStore, client: HTTPFeedClient, backfill: Int,
        _ body: (FeedCoordinator<ContinuousClock>) async throws -> Void
    ) async throws {
        let http = HTTPFeedConfiguration(url: server.url(style.path), descriptor: style.descriptor, requestTimeout: hangGuard)
        let source = try HTTPFeedSource(configuration: http, client: client, logger: quietLogger)
        try await withSyncedFeed(style.dialect, from: source, into: store, configuration: Self.configuration(backfill: backfill), body)
    }

    /// Runs `body` with a dialect server holding 45 items of each style, a feed client and an
    /// empty store: what every test here mirrors with; each is closed or removed after `body`.
    func withServerClientAndStore(_ body: (DialectServer, HTTPFeedClient, SQLiteFeedStore) async throws -> Void) async throws {
        try await withDialectServer(items: 45) { server in
            try await withFeedClient { client in
                try await withStore { store in try await body(server, client, store) }
            }
        }
    }

    func expectMirror(_ store: SQLiteFeedStore, _ server: DialectServer, _ style: Case, _ moment: String, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let stored = try await store.items(feed: style.dialect, offset: 0, limit: 100_000).map(\.id)
        let truth = try await server.ids(style.dialect)
        #expect(stored == truth, "\(style.dialect), \(moment): stored \(stored.count) items, the server lists \(truth.count); first difference at \(Array(zip(stored, truth)).firstIndex { $0.0 != $0.1 } ?? min(stored.count, truth.count)); stored \(stored.prefix(12))…, server \(truth.prefix(12))…", sourceLocation: sourceLocation)
    }

    /// More than a page arrives while a backfill is under way (paused at its depth, its cursor
    /// in hand): the pages it goes on to read have shifted (positional cursors) or not (keysets),
    /// and a refresh then brings the new items; the store equals the server throughout.
    @Test("more than a page arrives while the backfill runs; the backfill goes on, then a refresh", arguments: cases)
    func itemsArriveDuringTheBackfill(_ style: Case) async throws {
        try await withServerClientAndStore { server, client, store in
            try await withFeed(style, server, store, client: client, backfill: 20) { feed in
                try await waitFor(feed, "\(style.dialect): the first 20 items") {
                    $0.itemCount >= 20 && !$0.older.load.isLoading && !$0.initial.load.isLoading && !$0.newer.load.isLoading
                }
                _ = try await server.add(25)
                // The backfill goes on by hand from where it paused, page by page.
                for _ in 0..<60 {
                    guard await !feed.state.endReached else { break }
                    // Applied at once: the older lane shows the load until its page is in.
                    await feed.loadOlder()
                    try await waitFor(feed, "\(style.dialect): an older page") { !$0.older.load.isLoading }
                    let older = await feed.state.older
                    #expect(older.load.failure == nil, "\(style.dialect): \(older)")
                }
                #expect(await feed.state.endReached, "\(style.dialect): the backfill did not reach the end")
                await feed.refresh()
                try await waitFor(feed, "\(style.dialect): the refresh after the backfill") {
                    $0.itemCount == 70 && !$0.newer.load.isLoading && $0.newer.load.failure == nil && $0.gap == nil
                }
                try await expectMirror(store, server, style, "after items arrived during the backfill")
            }
        }
    }

    @Test("backfill cut short, resumed after more than a page arrived; refresh; offline; more", arguments: cases)
    func mirror(_ style: Case) async throws {
        try await withServerClientAndStore { server, client, store in
            // A backfill that stops at 20 items: the rest waits for the next start.
            try await withFeed(style, server, store, client: client, backfill: 20) { feed in
                try await waitFor(feed, "\(style.dialect): the first 20 items") { $0.itemCount >= 20 && !$0.older.load.isLoading && !$0.initial.load.isLoading }
            }
            // More than a page arrives while the backfill is stopped half-way.
            _ = try await server.add(25)
            try await withFeed(style, server, store, client: client, backfill: Int.max) { feed in
                try await waitFor(feed, "\(style.dialect): the backfill to the end and the refresh on start") {
                    $0.endReached && $0.itemCount == 70 && !$0.older.load.isLoading && !$0.newer.load.isLoading && $0.gap == nil
                }
                try await expectMirror(store, server, style, "after the resumed backfill")
                // Offline: the refresh fails and nothing is lost.
                try await server.down()
                await feed.refresh()
                try await waitFor(feed, "\(style.dialect): the refresh fails while the server is down") { $0.newer.load.failure != nil }
                try await server.up()
                _ = try await server.add(23)
                await feed.refresh()
                try await waitFor(feed, "\(style.dialect): the refresh after the server is back") {
                    $0.itemCount == 93 && !$0.newer.load.isLoading && $0.newer.load.failure == nil && $0.gap == nil
                }
                try await expectMirror(store, server, style, "after the offline period")
            }
        }
    }
}
