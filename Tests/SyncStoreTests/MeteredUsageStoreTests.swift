import Foundation
import SyncCore
import SyncStore
import Testing
import TestSupport

/// A feed's metered usage in the SQLite store: one row per feed, replaced as it grows, read back
/// by the next process that opens the file.
@Suite struct MeteredUsageStoreTests {
    @Test func theLatestUsageOfEachFeedSurvivesReopening() async throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("store.sqlite")
        let store = try SQLiteFeedStore(path: path)
        #expect(try await store.meteredUsage(feed: "home") == nil)
        try await store.recordMeteredUsage(feed: "home", MeteredUsage(day: "2026-11-27", bytes: 10))
        try await store.recordMeteredUsage(feed: "home", MeteredUsage(day: "2026-11-27", bytes: 4_000_000_000))
        try await store.recordMeteredUsage(feed: "other", MeteredUsage(day: "2026-11-26", bytes: 7))
        try await store.recordMeteredUsage(feed: "other", MeteredUsage(day: "2026-11-27", bytes: 1))

        let reopened = try SQLiteFeedStore(path: path)
        #expect(try await reopened.meteredUsage(feed: "home") == MeteredUsage(day: "2026-11-27", bytes: 4_000_000_000))
        #expect(try await reopened.meteredUsage(feed: "other") == MeteredUsage(day: "2026-11-27", bytes: 1))
        #expect(try await reopened.meteredUsage(feed: "unknown") == nil)
        // The usage needs no feed row: a library user may record it before any page.
        #expect(try await reopened.feeds().isEmpty)
    }
}
