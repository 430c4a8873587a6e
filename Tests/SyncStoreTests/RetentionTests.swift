import Foundation
import SyncCore
import SyncStore
import Testing
import TestSupport

/// Retention: the oldest items beyond the limits go in the commit's own transaction.
@Suite struct RetentionTests {
    let start = Date(timeIntervalSinceReferenceDate: 1_000_000)

    @Test func keepItemsDropsTheOldestInTheSameCommitAndEndsBackfill() async throws {
        let dir = try TemporaryDirectory()
        let store = try SQLiteFeedStore(path: dir.file("feeds.sqlite"), retention: ["f": .init(keepItems: 5)])
        _ = try await store.commit(feed: "f", direction: .initial, page: page(["6", "5", "4"], older: "c4", newer: "c6"), at: start)
        _ = try await store.commit(feed: "f", direction: .older, page: page(["3", "2"], older: "c2", newer: nil), at: start)
        #expect(try await store.load(feed: "f").olderCursor == "c2", "at the limit: nothing dropped yet")
        let outcome = try await store.commit(feed: "f", direction: .newer, page: page(["8", "7"], older: nil, newer: "c8"), at: start)
        #expect(outcome.inserted == 2)
        #expect(try await store.items(feed: "f", offset: 0, limit: 100).map(\.id) == ["8", "7", "6", "5", "4"])
        let feed = try await store.load(feed: "f")
        #expect(feed.itemCount == 5 && outcome.feed == feed)
        #expect(feed.olderCursor == nil && feed.endReached, "older pages would only refill what retention drops")
        #expect(feed.newerCursor == "c8")
        // The same file opened without retention keeps everything from then on.
        let plain = try SQLiteFeedStore(path: dir.file("feeds.sqlite"))
        _ = try await plain.commit(feed: "f", direction: .newer, page: page(["9"], older: nil, newer: "c9"), at: start)
        #expect(try await plain.load(feed: "f").itemCount == 6)
    }

    @Test func keepAgeDropsOnlyATailOfOldItemsAndNeverThePresentedRows() async throws {
        let dir = try TemporaryDirectory()
        let day = Duration.seconds(86_400)
        let store = try SQLiteFeedStore(path: dir.file("feeds.sqlite"), retention: ["f": .init(keepAge: day, minimum: 2)])
        _ = try await store.commit(feed: "f", direction: .initial, page: page(["5", "4", "3"], older: "c3", newer: "c5"), at: start)
        // Two days later: all three are old, but the two newest are what the presentation shows.
        let later = start.addingTimeInterval(2 * 86_400)
        _ = try await store.commit(feed: "f", direction: .newer, page: page([], older: nil, newer: nil), at: later)
        #expect(try await store.items(feed: "f", offset: 0, limit: 100).map(\.id) == ["5", "4"])
        // New items: the old ones below the newest fresh item go, oldest first.
        _ = try await store.commit(feed: "f", direction: .newer, page: page(["7", "6"], older: nil, newer: "c7"), at: later)
        #expect(try await store.items(feed: "f", offset: 0, limit: 100).map(\.id) == ["7", "6"])
        #expect(try await store.load(feed: "f").itemCount == 2)
    }
}
