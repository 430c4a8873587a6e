import Foundation
import GRDB
import SyncCore
import SyncStore
import Testing
import TestSupport

/// The store as somebody with `sqlite3` reads it: item counts that agree with the rows.
@Suite struct ReadableSchemaTests {
    @Test func aWrongItemCountIsCorrectedAtOpen() async throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("store.sqlite")
        do {
            let store = try SQLiteFeedStore(path: path)
            let page = FeedPage(items: (1...3).map { FeedItem(id: "\($0)", payload: Data("{}".utf8)) }, olderCursor: nil, newerCursor: "n")
            _ = try await store.commit(feed: "home", direction: .initial, page: page, at: Date())
            _ = try await store.commit(feed: "work", direction: .initial, page: page, at: Date())
            #expect(store.recountedFeeds.isEmpty)
        }
        try await DatabaseQueue(path: path).write { db in
            try db.execute(sql: "UPDATE feed SET item_count = 21500 WHERE id = 'home'")
        }
        let reopened = try SQLiteFeedStore(path: path)
        #expect(reopened.recountedFeeds == ["home": 21500])
        #expect(try await reopened.load(feed: "home").itemCount == 3)
        #expect(try await reopened.load(feed: "work").itemCount == 3)
        #expect(try SQLiteFeedStore(path: path).recountedFeeds.isEmpty, "corrected for good")
    }
}
