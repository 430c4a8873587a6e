import Foundation
import GRDB
import SyncCore
import SyncStore
import Testing
import TestSupport

/// The store as somebody with `sqlite3` reads it: item counts that agree with the rows, payloads
/// that SQLite's JSON functions read as they are, times in Unix seconds.
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

    /// The payloads of a page committed now, as the server sent them.
    static let payloads = [#"{"id":"2","content":"héllo ☃"}"#, #"{"id":"1","content":"first"}"#].map { Data($0.utf8) }

    /// A new store at `path` with one page of ``payloads`` committed now in feed `home`, and, in
    /// feed `raw`, one payload that is not UTF-8 text at all (any `FeedSource` may send one).
    static func storeWithAPage(_ path: String) async throws -> SQLiteFeedStore {
        let store = try SQLiteFeedStore(path: path)
        let page = FeedPage(items: zip(["2", "1"], payloads).map { FeedItem(id: $0, payload: $1) }, olderCursor: nil, newerCursor: "n")
        _ = try await store.commit(feed: "home", direction: .initial, page: page, at: Date())
        let raw = FeedPage(items: [FeedItem(id: "r", payload: rawBytes)], olderCursor: nil, newerCursor: nil)
        _ = try await store.commit(feed: "raw", direction: .initial, page: raw, at: Date())
        return store
    }

    /// A NUL, a byte that is never UTF-8, and a cut-off sequence.
    static let rawBytes = Data([0x7B, 0x00, 0xFF, 0x22, 0xE2, 0x98, 0x7D])

    /// A new store's payloads are TEXT that SQLite's JSON functions read with no cast, and its
    /// times are Unix seconds that SQLite's date functions read with no offset; the store still
    /// gives every payload back byte for byte.
    @Test func payloadsAreJSONTextAndTimesAreUnixSeconds() async throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("store.sqlite")
        let store = try await Self.storeWithAPage(path)
        try await DatabaseQueue(path: path).read { db in
            #expect(try String.fetchAll(db, sql: "SELECT typeof(payload) FROM item ORDER BY feed, position DESC") == ["text", "text", "text"])
            // Seconds between now and each time as SQLite's 'unixepoch' modifier reads it.
            let ages = try Double.fetchAll(db, sql: """
                SELECT (julianday('now') - julianday(stored_at, 'unixepoch')) * 86400 FROM item
                UNION ALL SELECT (julianday('now') - julianday(last_sync_at, 'unixepoch')) * 86400 FROM feed
                """)
            #expect(ages.count == 5 && ages.allSatisfy { abs($0) < 60 }, "\(ages)")
            #expect(try String.fetchAll(db, sql: "SELECT json_extract(payload, '$.content') FROM item WHERE feed = 'home' ORDER BY position DESC")
                == ["héllo ☃", "first"])
        }
        #expect(try await store.items(feed: "home", offset: 0, limit: 10).map(\.payload) == Self.payloads)
        #expect(try await store.items(feed: "raw", after: nil, limit: 10)?.map(\.payload) == [Self.rawBytes])
        #expect(try await SQLiteFeedStore(path: path).items(feed: "raw", offset: 0, limit: 10).map(\.payload) == [Self.rawBytes])
    }

    /// The same, read by SQLite's own shell as the schema's documentation shows.
    @Test(.enabled(if: SQLiteShell.isInstalled || Privileges.isCI, "sqlite3 (SQLite's shell) is not installed: apt-get install sqlite3"))
    func theSQLiteShellReadsPayloadsAndTimesWithNoConversion() async throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("store.sqlite")
        // Open while the shell reads, as syncd is.
        let store = try await Self.storeWithAPage(path)
        let output = try await runCommand(["sqlite3", "-readonly", path, """
            SELECT typeof(payload), json_extract(payload, '$.content'),
                abs(julianday('now') - julianday(datetime(stored_at, 'unixepoch'))) * 86400 < 60,
                abs(julianday('now') - julianday(datetime(last_sync_at, 'unixepoch'))) * 86400 < 60
            FROM item JOIN feed ON feed.id = item.feed WHERE feed = 'home' ORDER BY position DESC;
            """])
        #expect(output == "text|héllo ☃|1|1\ntext|first|1|1\n")
        withExtendedLifetime(store) {}
    }
}

/// SQLite's command-line shell, which the schema's documentation tells people to read the store with.
enum SQLiteShell {
    static var isInstalled: Bool {
        (try? runCommand(["sqlite3", "-version"])) != nil
    }
}
