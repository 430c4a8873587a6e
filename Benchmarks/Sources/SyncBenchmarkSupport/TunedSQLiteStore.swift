import Foundation
import GRDB
import SyncCore

/// An experiment for the throughput benchmark, not a product store: `SQLiteFeedStore`'s schema,
/// statements and transaction, with the three per-commit costs the benchmark found taken out:
/// 1. the item count is kept in a column of the feed row, updated in the same transaction, instead
///    of `SELECT COUNT(*) FROM item WHERE feed = ?`, which `SQLiteFeedStore.persisted` runs twice
///    per commit and which walks every stored item of the feed (O(n) per page);
/// 2. the position bounds are read with two queries, `MIN(position)` and `MAX(position)`: SQLite
///    answers a lone min/max from the index in O(log n), but `SELECT MIN(..), MAX(..)` in one query
///    scans the feed's whole index range (O(n) per page);
/// 3. the item insert is a cached prepared statement instead of SQL compiled again for every item.
/// It shows what syncd's throughput would be with those fixes.
public struct TunedSQLiteStore: FeedStore {
    let pool: DatabasePool

    public init(path: String) throws {
        var configuration = Configuration()
        configuration.busyMode = .timeout(10)
        configuration.prepareDatabase { db in try db.execute(sql: "PRAGMA synchronous = NORMAL") }
        pool = try DatabasePool(path: path, configuration: configuration)
        try pool.write { db in
            try db.execute(sql: """
                CREATE TABLE IF NOT EXISTS feed (
                    id TEXT PRIMARY KEY NOT NULL, older_cursor TEXT, newer_cursor TEXT,
                    end_reached INTEGER NOT NULL DEFAULT 0, has_loaded INTEGER NOT NULL DEFAULT 0,
                    last_sync_at REAL, revision INTEGER NOT NULL DEFAULT 0,
                    item_count INTEGER NOT NULL DEFAULT 0
                );
                CREATE TABLE IF NOT EXISTS item (
                    feed TEXT NOT NULL REFERENCES feed(id) ON DELETE CASCADE, id TEXT NOT NULL,
                    position INTEGER NOT NULL, payload BLOB NOT NULL, PRIMARY KEY (feed, id)
                );
                CREATE INDEX IF NOT EXISTS item_order ON item(feed, position);
                """)
        }
    }

    public func load(feed: String) async throws -> PersistedFeed {
        try await pool.read { db in try Self.persisted(db, feed: feed) }
    }

    public func items(feed: String, offset: Int, limit: Int) async throws -> [FeedItem] {
        try await pool.read { db in
            try Row.fetchAll(
                db, sql: "SELECT id, payload FROM item WHERE feed = ? ORDER BY position DESC LIMIT ? OFFSET ?",
                arguments: [feed, max(0, limit), max(0, offset)]
            ).map { FeedItem(id: $0["id"], payload: $0["payload"]) }
        }
    }

    public func commit(feed: String, direction: Direction, page: FeedPage, at date: Date) async throws -> CommitOutcome {
        try await pool.write { db in try Self.commit(db, feed: feed, direction: direction, page: page, at: date) }
    }

    private static func persisted(_ db: Database, feed: String) throws -> PersistedFeed {
        guard let row = try Row.fetchOne(db, sql: "SELECT * FROM feed WHERE id = ?", arguments: [feed]) else { return .fresh }
        let lastSync: Double? = row["last_sync_at"]
        return PersistedFeed(
            olderCursor: row["older_cursor"], newerCursor: row["newer_cursor"], endReached: row["end_reached"],
            hasLoaded: row["has_loaded"], itemCount: row["item_count"],
            lastSyncAt: lastSync.map { Date(timeIntervalSinceReferenceDate: $0) }, revision: row["revision"])
    }

    private static func commit(_ db: Database, feed: String, direction: Direction, page: FeedPage, at date: Date) throws -> CommitOutcome {
        try db.execute(sql: "INSERT INTO feed (id) VALUES (?) ON CONFLICT(id) DO NOTHING", arguments: [feed])
        let current = try persisted(db, feed: feed)
        let low = try Int.fetchOne(db, sql: "SELECT MIN(position) FROM item WHERE feed = ?", arguments: [feed])
        let high = try Int.fetchOne(db, sql: "SELECT MAX(position) FROM item WHERE feed = ?", arguments: [feed])
        let insert = try db.cachedStatement(
            sql: "INSERT INTO item (feed, id, position, payload) VALUES (?, ?, ?, ?) ON CONFLICT(feed, id) DO NOTHING")
        let wasEmpty = current.itemCount == 0
        let count = page.items.count
        var inserted = 0
        for (index, item) in page.items.enumerated() {
            let position: Int = switch (direction, low, high) {
            case (.older, let low?, _): low - 1 - index
            case (.initial, _, let high?), (.newer, _, let high?): high + count - index
            default: -index
            }
            try insert.execute(arguments: [feed, item.id, position, item.payload])
            inserted += db.changesCount
        }
        let cursors = FeedLog.cursors(after: page, direction: direction, current: current, feedWasEmpty: wasEmpty)
        try db.execute(
            sql: """
                UPDATE feed SET older_cursor = ?, newer_cursor = ?, end_reached = ?, has_loaded = 1,
                    last_sync_at = ?, revision = revision + 1, item_count = item_count + ?
                WHERE id = ?
                """,
            arguments: [cursors.older, cursors.newer, cursors.endReached, date.timeIntervalSinceReferenceDate, inserted, feed])
        return CommitOutcome(feed: try persisted(db, feed: feed), pageItemCount: count, inserted: inserted)
    }
}
