import Foundation
import GRDB
import SyncCore

extension SQLiteFeedStore {
    /// Commits a revalidation's reading and removes the items it shows gone, in one transaction:
    /// each removal gets its number in the change log (a `deleted` tombstone) with it.
    public func revalidate(feed: String, walk: RevalidationResult, at date: Date) async throws -> CommitOutcome {
        let hook = commitHook, retention = retention[feed], tombstoneLimit = tombstoneLimit
        return try await writeTransaction { db in
            try Self.revalidate(db, feed: feed, walk: walk, at: date, retention: retention, tombstoneLimit: tombstoneLimit, hook: hook)
        }
    }

    private static func revalidate(
        _ db: Database, feed: String, walk: RevalidationResult, at date: Date,
        retention: Retention?, tombstoneLimit: Int, hook: (@Sendable (CommitStage) -> Void)?
    ) throws -> CommitOutcome {
        let current = try persisted(db, feed: feed)
        guard current.itemCount > 0, current.gap == nil else {
            return CommitOutcome(feed: current, pageItemCount: 0, inserted: 0)
        }
        let gone = try ReconcileRule.deletions(stored: storedIDs(db, feed: feed, walk: walk), walk: walk)
        var outcome = CommitOutcome(feed: current, pageItemCount: 0, inserted: 0)
        for page in walk.pages {
            outcome.add(try commit(db, feed: feed, direction: .newer, page: page, at: date, retention: retention, tombstoneLimit: tombstoneLimit, hook: hook))
        }
        // The walk read down through the window: the refresh need not go on.
        outcome.overlapped = true
        guard !gone.isEmpty else { return outcome }
        var numbers = try ChangeNumbers(db)
        let removed = try remove(db, feed: feed, ids: gone, numbers: &numbers, tombstoneLimit: tombstoneLimit)
        try numbers.save(db)
        try db.cachedStatement(sql: "UPDATE feed SET item_count = item_count - ? WHERE id = ?").execute(arguments: [removed, feed])
        outcome.feed.itemCount -= removed
        outcome.deleted += removed
        return outcome
    }

    /// Removes the stored items of `feed` among `ids` as deleted by the server, each with a
    /// numbered `deleted` tombstone in the change log; returns how many were stored. The feed's
    /// `item_count` is the caller's to lower.
    static func remove(_ db: Database, feed: String, ids: [String], numbers: inout ChangeNumbers, tombstoneLimit: Int) throws -> Int {
        guard !ids.isEmpty else { return 0 }
        let tombstone = try RawStatement(db, sql: "INSERT INTO item_tombstone (seq, feed, id, kind) VALUES (?, ?, ?, 'deleted')")
        let delete = try RawStatement(db, sql: "DELETE FROM item WHERE feed = ? AND id = ?")
        try tombstone.bind(2, feed)
        try delete.bind(1, feed)
        var removed = 0
        for id in ids {
            try delete.bind(2, id)
            _ = try delete.step()
            delete.reset()
            // Not stored (never was, or retention took it with its own tombstone): nothing to log.
            guard db.changesCount > 0 else { continue }
            try tombstone.bind(1, Int(numbers.take(1)))
            try tombstone.bind(3, id)
            _ = try tombstone.step()
            tombstone.reset()
            removed += 1
        }
        if removed > 0 { try trimTombstones(db, limit: tombstoneLimit) }
        return removed
    }

    /// The feed's stored ids, newest first, down to the lowest one the walk read (all of them
    /// when it reached the feed's end), as ``ReconcileRule`` needs them.
    private static func storedIDs(_ db: Database, feed: String, walk: RevalidationResult) throws -> [String] {
        var bottom: Int?
        if !walk.reachedEnd {
            let lookup = try RawStatement(db, sql: "SELECT position FROM item WHERE feed = ? AND id = ?")
            try lookup.bind(1, feed)
            for item in walk.items {
                defer { lookup.reset() }
                try lookup.bind(2, item.id)
                guard try lookup.step() else { continue }
                bottom = min(bottom ?? Int.max, lookup.int(0))
            }
            guard bottom != nil else { return [] }
        }
        return try String.fetchAll(
            db.cachedStatement(sql: "SELECT id FROM item WHERE feed = ? AND position >= ? ORDER BY position DESC"),
            arguments: [feed, bottom ?? Int.min])
    }
}
