import Foundation
import SyncCore
import SyncStore
import Testing
import TestSupport

/// A store written by an older syncd is upgraded in place when a newer one opens it.
///
/// The old file is written by Python's sqlite3 module, not by this package, with the schema
/// exactly as the first migration made it and GRDB's record of that migration.
@Suite struct MigrationTests {
    @Test func aVersionOneStoreIsUpgradedWithItsCountsAndKeepsSyncing() async throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("v1.sqlite")
        try await runCommand(["python3", "-c", """
            import sqlite3, sys
            db = sqlite3.connect(sys.argv[1])
            db.executescript('''
                PRAGMA journal_mode = WAL;
                CREATE TABLE grdb_migrations (identifier TEXT NOT NULL PRIMARY KEY);
                INSERT INTO grdb_migrations VALUES ('v1: feeds and items');
                CREATE TABLE feed (
                    id TEXT PRIMARY KEY NOT NULL,
                    older_cursor TEXT,
                    newer_cursor TEXT,
                    end_reached INTEGER NOT NULL DEFAULT 0,
                    has_loaded INTEGER NOT NULL DEFAULT 0,
                    last_sync_at REAL,
                    revision INTEGER NOT NULL DEFAULT 0
                );
                CREATE TABLE item (
                    feed TEXT NOT NULL REFERENCES feed(id) ON DELETE CASCADE,
                    id TEXT NOT NULL,
                    position INTEGER NOT NULL,
                    payload BLOB NOT NULL,
                    PRIMARY KEY (feed, id)
                );
                CREATE INDEX item_order ON item(feed, position);
                INSERT INTO feed VALUES ('home', 'c2', 'i0', 0, 1, 100.0, 2);
                INSERT INTO feed VALUES ('quiet', NULL, NULL, 1, 1, 100.0, 1);
            ''')
            for n in range(10):
                db.execute("INSERT INTO item VALUES ('home', ?, ?, ?)", ("i%d" % n, -n, b'{"n":%d}' % n))
            db.commit()
            """, path])

        let store = try SQLiteFeedStore(path: path)
        let home = try await store.load(feed: "home")
        #expect(home == PersistedFeed(
            olderCursor: "c2", newerCursor: "i0", endReached: false, hasLoaded: true, itemCount: 10,
            lastSyncAt: Date(timeIntervalSinceReferenceDate: 100), revision: 2))
        #expect(try await store.load(feed: "quiet").itemCount == 0)
        #expect(try await store.items(feed: "home", offset: 0, limit: 3).map(\.id) == ["i0", "i1", "i2"])

        // The upgraded store goes on where the old one stopped, counting as it commits.
        let older = FeedPage(items: (10..<15).map { FeedItem(id: "i\($0)", payload: Data("{\"n\":\($0)}".utf8)) }, olderCursor: nil, newerCursor: nil)
        let outcome = try await store.commit(feed: "home", direction: .older, page: older, at: Date())
        #expect(outcome.inserted == 5)
        let after = try await store.load(feed: "home")
        #expect(after.itemCount == 15 && after.endReached && after.revision == 3)
        #expect(try await store.items(feed: "home", offset: 0, limit: 100).map(\.id) == (0..<15).map { "i\($0)" })

        // Opening again runs no migration twice.
        let reopened = try SQLiteFeedStore(path: path)
        #expect(try await reopened.load(feed: "home") == after)
    }
}
