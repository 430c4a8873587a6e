import AsyncBroadcast
import Foundation
import GRDB
import SyncCore
import Synchronization

/// Tells change followers that a commit landed, so they read the log again.
final class ChangeNotifier: Sendable {
    private let commits = Broadcast<Int>(bufferingNewest: 1, latest: 0)
    private let count = Mutex(0)

    /// A commit landed.
    func committed() {
        let value = count.withLock { $0 += 1; return $0 }
        commits.publish(value)
    }

    /// Commits from now on, starting with the count so far.
    func subscribe() -> AsyncStream<Int> { commits.subscribe() }
}

/// The numbers a commit gives its changes, read from and written back to `store_info`, in the
/// commit's transaction: a crash keeps the changes and their numbers, or neither.
struct ChangeNumbers {
    private(set) var head: Int64
    private let start: Int64

    init(_ db: Database) throws {
        head = try Int64.fetchOne(db.cachedStatement(sql: "SELECT value FROM store_info WHERE key = 'head'")) ?? 0
        start = head
    }

    /// The next `count` numbers; the first is returned.
    mutating func take(_ count: Int) -> Int64 {
        defer { head += Int64(count) }
        return head + 1
    }

    /// Writes the head back when numbers were taken.
    func save(_ db: Database) throws {
        guard head != start else { return }
        try db.cachedStatement(sql: "UPDATE store_info SET value = ? WHERE key = 'head'").execute(arguments: [head])
    }
}

extension SQLiteFeedStore {
    /// Removed items kept for replay, across feeds, before the oldest are dropped (and clients
    /// asking from before them are reset).
    public static let defaultTombstoneLimit = 10_000

    /// The store's point now: its epoch and the last change's number.
    public func changeHead() async throws -> ChangePoint {
        try await read { db in
            let (epoch, head, _) = try Self.logState(db)
            return ChangePoint(epoch: epoch, seq: head)
        }
    }

    /// At most `limit` changes of `feed` after `since`, oldest first, read in one transaction.
    ///
    /// `since == nil` replays the feed from the start: an ``ItemChange/Kind/inserted`` for each
    /// item stored (in the order the log numbered them). A point of another epoch, one ahead of
    /// the store, or one older than the removals the store keeps starts with a
    /// ``ItemChange/Kind/reset`` and then replays from the start. An item changed several times
    /// since the point comes once, as it is now. Empty when nothing changed since.
    public func changes(feed: String, since: ChangePoint?, limit: Int) async throws -> [ItemChange] {
        try await read { db in try Self.changes(db, feed: feed, since: since, limit: max(1, limit)) }
    }

    /// The changes of `feed` after `since`, then each change as it is committed, until the task
    /// is cancelled: replaying them into a dictionary keyed by id gives the feed as stored.
    ///
    /// Pulled: a batch of `batch` changes is read when the consumer has taken the last one, so a
    /// slow consumer holds one batch, never the log.
    public func changes(feed: String, since: ChangePoint?, batch: Int = 500) -> AsyncThrowingStream<ItemChange, any Error> {
        let follower = ChangeFollower(store: self, feed: feed, since: since, batch: max(1, batch))
        return AsyncThrowingStream { try await follower.next() }
    }

    /// A new value after each commit of this store (or a copy of it), starting with the count so
    /// far: for a follower that reads the log itself.
    public func commits() -> AsyncStream<Int> { notifier.subscribe() }

    static func logState(_ db: Database) throws -> (epoch: String, head: Int64, floor: Int64) {
        var values: [String: DatabaseValue] = [:]
        for row in try Row.fetchAll(db.cachedStatement(sql: "SELECT key, value FROM store_info")) {
            values[row["key"]] = row["value"]
        }
        return (
            String.fromDatabaseValue(values["epoch"] ?? .null) ?? "",
            Int64.fromDatabaseValue(values["head"] ?? .null) ?? 0,
            Int64.fromDatabaseValue(values["floor"] ?? .null) ?? 0
        )
    }

    static func changes(_ db: Database, feed: String, since: ChangePoint?, limit: Int) throws -> [ItemChange] {
        let (epoch, head, floor) = try logState(db)
        var result: [ItemChange] = []
        var after = since?.seq ?? 0
        if let since, since.epoch != epoch || since.seq > head || (since.seq > 0 && since.seq < floor) {
            result.append(ItemChange(kind: .reset, point: ChangePoint(epoch: epoch, seq: 0), id: nil, payload: nil))
            after = 0
        }
        var merged: [(seq: Int64, change: ItemChange)] = []
        let items = try Row.fetchCursor(
            db.cachedStatement(sql: "SELECT seq, created_seq, id, payload FROM item WHERE feed = ? AND seq > ? ORDER BY seq LIMIT ?"),
            arguments: [feed, after, limit])
        while let row = try items.next() {
            let seq: Int64 = row["seq"], created: Int64 = row["created_seq"]
            let kind: ItemChange.Kind = created > after ? .inserted : .updated
            merged.append((seq, ItemChange(kind: kind, point: ChangePoint(epoch: epoch, seq: seq), id: row["id"], payload: row["payload"])))
        }
        // From the start, the follower holds nothing: what was removed does not concern it.
        if after > 0 {
            let removed = try Row.fetchCursor(
                db.cachedStatement(sql: "SELECT seq, id, kind FROM item_tombstone WHERE feed = ? AND seq > ? ORDER BY seq LIMIT ?"),
                arguments: [feed, after, limit])
            while let row = try removed.next() {
                let seq: Int64 = row["seq"]
                let kind = ItemChange.Kind(rawValue: row["kind"]) ?? .deleted
                merged.append((seq, ItemChange(kind: kind, point: ChangePoint(epoch: epoch, seq: seq), id: row["id"], payload: nil)))
            }
            merged.sort { $0.seq < $1.seq }
        }
        result += merged.prefix(limit).map(\.change)
        return result
    }

    /// Records items of `feed` below `position` as removed by retention, numbered in the
    /// commit's transaction, and keeps the tombstones within `limit` (raising the floor).
    static func recordEvictions(_ db: Database, feed: String, below position: Int, numbers: inout ChangeNumbers, limit: Int) throws {
        let count = try Int.fetchOne(db.cachedStatement(sql: "SELECT count(*) FROM item WHERE feed = ? AND position < ?"), arguments: [feed, position]) ?? 0
        guard count > 0 else { return }
        let first = numbers.take(count)
        try db.cachedStatement(sql: """
            INSERT INTO item_tombstone (seq, feed, id, kind)
            SELECT ? - 1 + row_number() OVER (ORDER BY position DESC), feed, id, 'evicted' FROM item WHERE feed = ? AND position < ?
            """).execute(arguments: [first, feed, position])
        try trimTombstones(db, limit: limit)
    }

    /// Drops the oldest tombstones beyond `limit` and raises the floor to the newest dropped.
    static func trimTombstones(_ db: Database, limit: Int) throws {
        guard let cut = try Int64.fetchOne(
            db.cachedStatement(sql: "SELECT seq FROM item_tombstone ORDER BY seq DESC LIMIT 1 OFFSET ?"), arguments: [max(0, limit)])
        else { return }
        try db.cachedStatement(sql: "DELETE FROM item_tombstone WHERE seq <= ?").execute(arguments: [cut])
        try db.cachedStatement(sql: "UPDATE store_info SET value = max(value, ?) WHERE key = 'floor'").execute(arguments: [cut])
    }
}

/// Where a follower of the change log is: its point, the batch it has not handed out yet, and
/// the commits it waits on when the log has nothing new.
private actor ChangeFollower {
    let store: SQLiteFeedStore
    let feed: String
    let batch: Int
    private var point: ChangePoint?
    private var pending: [ItemChange] = []
    private var commits: AsyncStream<Int>.Iterator

    init(store: SQLiteFeedStore, feed: String, since: ChangePoint?, batch: Int) {
        self.store = store
        self.feed = feed
        self.batch = batch
        self.point = since
        // Subscribed before the first read: a commit between a read and the wait is not missed.
        self.commits = store.notifier.subscribe().makeAsyncIterator()
    }

    /// The next change, waiting for a commit when there is none; `nil` once cancelled.
    func next() async throws -> ItemChange? {
        while pending.isEmpty {
            try Task.checkCancellation()
            // The count so far, or a commit since the last read: either way, read again.
            var fresh = try await store.changes(feed: feed, since: point, limit: batch)
            if point == nil, fresh.isEmpty { point = ChangePoint(epoch: try await store.changeHead().epoch, seq: 0) }
            if !fresh.isEmpty {
                fresh.reverse()
                pending = fresh
                break
            }
            var iterator = commits
            let committed = await iterator.next(isolation: self)
            commits = iterator
            guard committed != nil else { return nil }
        }
        let change = pending.removeLast()
        point = change.point
        return change
    }
}
