import Foundation
import GRDB
import SyncCore

/// A ``FeedStore`` in an SQLite file in WAL mode (a GRDB `DatabasePool`: one writer, readers that
/// never block it).
///
/// Each page is written in one transaction together with its cursors and end flag, so a crash at
/// any point leaves the page either wholly stored or not at all; the next run continues from the
/// stored cursors and refetches at most the page that was lost. Items are keyed by (feed, id), so
/// a page that overlaps stored items adds only the new ones.
public struct SQLiteFeedStore: FeedStore {
    /// Points inside a commit's transaction, for fault-injection tests that kill the process there.
    public enum CommitStage: String, Sendable, CaseIterable {
        /// The transaction is open and nothing is written yet.
        case began
        /// The page's items are written; the cursors are not.
        case itemsWritten
        /// Items and cursors are written; the transaction has not committed.
        case cursorsWritten
    }

    /// The file path of the database.
    public let path: String
    let pool: DatabasePool
    private let commitHook: (@Sendable (CommitStage) -> Void)?

    /// Opens (creating if needed) the store at `path` and migrates it.
    ///
    /// - Parameter commitHook: called inside each commit's transaction at each ``CommitStage``;
    ///   only fault-injection tests set it.
    public init(path: String, commitHook: (@Sendable (CommitStage) -> Void)? = nil) throws {
        var configuration = Configuration()
        // Another process (syncctl, a test) may hold the file briefly; wait rather than fail.
        configuration.busyMode = .timeout(10)
        configuration.prepareDatabase { db in
            // In WAL mode NORMAL never corrupts and never splits a transaction; a power loss may
            // drop the last commits, which are then fetched again from the older stored cursors.
            try db.execute(sql: "PRAGMA synchronous = NORMAL")
        }
        self.path = path
        self.pool = try DatabasePool(path: path, configuration: configuration)
        self.commitHook = commitHook
        try Schema.migrator.migrate(pool)
    }

    public func load(feed: String) async throws -> PersistedFeed {
        try await pool.read { db in try Self.persisted(db, feed: feed) }
    }

    public func commit(feed: String, direction: Direction, page: FeedPage, at date: Date) async throws -> CommitOutcome {
        let hook = commitHook
        return try await pool.write { db in
            try Self.commit(db, feed: feed, direction: direction, page: page, at: date, hook: hook)
        }
    }

    /// ``load(feed:)``, blocking: for small tools that have no async context.
    public func loadSynchronously(feed: String) throws -> PersistedFeed {
        try pool.read { db in try Self.persisted(db, feed: feed) }
    }

    /// The same commit, blocking: for small tools that have no async context.
    public func commitSynchronously(feed: String, direction: Direction, page: FeedPage, at date: Date) throws -> CommitOutcome {
        let hook = commitHook
        return try pool.write { db in
            try Self.commit(db, feed: feed, direction: direction, page: page, at: date, hook: hook)
        }
    }

    public func items(feed: String, offset: Int, limit: Int) async throws -> [FeedItem] {
        try await pool.read { db in
            try Row.fetchAll(
                db,
                sql: "SELECT id, payload FROM item WHERE feed = ? ORDER BY position DESC LIMIT ? OFFSET ?",
                arguments: [feed, max(0, limit), max(0, offset)]
            ).map { FeedItem(id: $0["id"], payload: $0["payload"]) }
        }
    }

    /// Every feed stored, by identifier.
    public func feeds() async throws -> [String] {
        try await pool.read { db in try String.fetchAll(db, sql: "SELECT id FROM feed ORDER BY id") }
    }

    // MARK: Transactions

    private static func persisted(_ db: Database, feed: String) throws -> PersistedFeed {
        let select = try db.cachedStatement(sql: "SELECT * FROM feed WHERE id = ?")
        guard let row = try Row.fetchOne(select, arguments: [feed]) else {
            return .fresh
        }
        let count: Int = row["item_count"]
        let lastSync: Double? = row["last_sync_at"]
        return PersistedFeed(
            olderCursor: row["older_cursor"],
            newerCursor: row["newer_cursor"],
            endReached: row["end_reached"],
            hasLoaded: row["has_loaded"],
            itemCount: count,
            lastSyncAt: lastSync.map { Date(timeIntervalSinceReferenceDate: $0) },
            revision: row["revision"]
        )
    }

    private static func commit(
        _ db: Database,
        feed: String,
        direction: Direction,
        page: FeedPage,
        at date: Date,
        hook: (@Sendable (CommitStage) -> Void)?
    ) throws -> CommitOutcome {
        hook?(.began)
        // Every statement is a cached one: a commit runs the same few for each page, and
        // preparing them anew (parse, plan, authorizer) cost more than the work they do.
        try db.cachedStatement(sql: "INSERT INTO feed (id) VALUES (?) ON CONFLICT(id) DO NOTHING").execute(arguments: [feed])
        let current = try persisted(db, feed: feed)
        // Two queries, not one: SQLite answers a lone MIN or MAX from the index in O(log n), but
        // both in one statement scan the feed's whole index range.
        let low = try Int.fetchOne(db.cachedStatement(sql: "SELECT MIN(position) FROM item WHERE feed = ?"), arguments: [feed])
        let high = try Int.fetchOne(db.cachedStatement(sql: "SELECT MAX(position) FROM item WHERE feed = ?"), arguments: [feed])
        let wasEmpty = current.itemCount == 0
        let count = page.items.count

        // Pages are newest first; each lands wholly below, or wholly above, what is stored.
        let firstPosition: Int = switch (direction, low, high) {
        case (.older, let low?, _): low - 1
        case (.initial, _, let high?), (.newer, _, let high?): high + count
        default: 0
        }
        var inserted = 0
        var offset = 0
        while offset < count {
            // Many rows per statement: one step for a whole chunk instead of one per item.
            let rows = min(count - offset, Self.rowsPerInsert)
            let insert = try db.cachedStatement(sql: Self.insertSQL(rows: rows))
            var values: [(any DatabaseValueConvertible)?] = []
            values.reserveCapacity(rows * 4)
            for index in offset..<(offset + rows) {
                let item = page.items[index]
                values.append(feed)
                values.append(item.id)
                values.append(firstPosition - index)
                values.append(item.payload)
            }
            try insert.execute(arguments: StatementArguments(values))
            inserted += db.changesCount
            offset += rows
        }
        hook?(.itemsWritten)

        let cursors = FeedLog.cursors(after: page, direction: direction, current: current, feedWasEmpty: wasEmpty)
        try db.cachedStatement(sql: """
                UPDATE feed SET older_cursor = ?, newer_cursor = ?, end_reached = ?, has_loaded = 1,
                    last_sync_at = ?, revision = revision + 1, item_count = item_count + ?
                WHERE id = ?
                """)
            .execute(arguments: [cursors.older, cursors.newer, cursors.endReached, date.timeIntervalSinceReferenceDate, inserted, feed])
        hook?(.cursorsWritten)
        return CommitOutcome(feed: try persisted(db, feed: feed), pageItemCount: count, inserted: inserted)
    }

    /// Rows per multi-row INSERT: four parameters each, well inside SQLite's limit of 32,766.
    private static let rowsPerInsert = 250

    private static func insertSQL(rows: Int) -> String {
        "INSERT INTO item (feed, id, position, payload) VALUES "
            + repeatElement("(?, ?, ?, ?)", count: rows).joined(separator: ", ")
            + " ON CONFLICT(feed, id) DO NOTHING"
    }
}
