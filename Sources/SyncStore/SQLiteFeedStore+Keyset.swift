import GRDB
import SyncCore

extension SQLiteFeedStore {
    /// Items of `feed`, newest first, strictly older than the item `after` (from the newest when
    /// `nil`). Keyset paging: cost does not grow with depth, and pages stay stable while newer
    /// items arrive. Returns `nil` when `after` is not an item of the feed.
    public func items(feed: String, after: String?, limit: Int) async throws -> [FeedItem]? {
        try await read { db in
            var bound = Int64.max
            if let after {
                guard let position = try Int64.fetchOne(db, sql: "SELECT position FROM item WHERE feed = ? AND id = ?", arguments: [feed, after]) else {
                    return nil
                }
                bound = position
            }
            return try Self.items(
                db, sql: "SELECT id, payload FROM item WHERE feed = ? AND position < ? ORDER BY position DESC LIMIT ?",
                arguments: [feed, bound, max(0, limit)])
        }
    }
}
