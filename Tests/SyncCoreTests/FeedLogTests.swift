import Foundation
@_spi(StateMachine) import SyncCore
import Testing

@Suite struct FeedLogTests {
    let date = Date(timeIntervalSinceReferenceDate: 100)

    @Test func pagesKeepNewestFirstOrderAcrossDirections() {
        var log = FeedLog()
        log.commit(page(["5", "4"], older: "4", newer: "5"), direction: .initial, at: date)
        log.commit(page(["3", "2"], older: "2", newer: "3"), direction: .older, at: date)
        #expect(log.feed.newerCursor == "5", "an older page's own newer link never moves the newer cursor")
        log.commit(page(["7", "6"], older: "6", newer: "7"), direction: .newer, at: date)
        #expect(log.items.map(\.id) == ["7", "6", "5", "4", "3", "2"])
        #expect(log.feed == PersistedFeed(olderCursor: "2", newerCursor: "7", endReached: false, hasLoaded: true, itemCount: 6, lastSyncAt: date, revision: 3))
    }

    @Test func overlappingItemsAreSkipped() {
        var log = FeedLog()
        log.commit(page(["5", "4"], older: "4", newer: "5"), direction: .initial, at: date)
        let outcome = log.commit(page(["6", "5"], older: "5", newer: "6"), direction: .newer, at: date)
        #expect(outcome.inserted == 1 && outcome.pageItemCount == 2)
        #expect(log.items.map(\.id) == ["6", "5", "4"])
    }

    @Test func endOfFeedAndNewerCursorRules() {
        var log = FeedLog()
        log.commit(page(["2"], older: "2", newer: "2"), direction: .initial, at: date)
        log.commit(page(["1"], older: nil, newer: nil), direction: .older, at: date)
        #expect(log.feed.endReached && log.feed.olderCursor == nil)
        #expect(log.feed.newerCursor == "2", "an older page without a newer cursor keeps it")
        log.commit(page([], older: nil, newer: nil), direction: .newer, at: date)
        #expect(log.feed.newerCursor == "2", "an empty newer page keeps the cursor")
        #expect(log.feed.endReached, "newer pages never change the end")
    }

    @Test func inMemoryStorePagesItems() async {
        let store = InMemoryFeedStore()
        _ = await store.commit(feed: "a", direction: .initial, page: page(["3", "2", "1"], older: nil, newer: "3"), at: date)
        #expect(await store.items(feed: "a", offset: 1, limit: 5).map(\.id) == ["2", "1"])
        #expect(await store.items(feed: "b", offset: 0, limit: 5).isEmpty)
        #expect(await store.load(feed: "a").itemCount == 3)
    }
}
