import AsyncBroadcast
import Foundation
import GRDB
import SyncCore
import Synchronization

/// A point in a store's change log: the store's epoch and a sequence number. Its text form,
/// `EPOCH:SEQ`, is what a client keeps to resume (``SQLiteFeedStore/changes(feed:since:)``).
public struct ChangePoint: Sendable, Hashable, LosslessStringConvertible {
    /// A random id made when the store was created: a point of another store (one rebuilt after
    /// damage, a new file) is refused with a reset, never taken for a point of this one.
    public var epoch: String
    /// The last change seen; 0 before the first.
    public var seq: Int64

    /// A point of the store with `epoch`.
    public init(epoch: String, seq: Int64) {
        self.epoch = epoch
        self.seq = seq
    }

    /// Reads `EPOCH:SEQ`; `nil` for anything else.
    public init?(_ description: String) {
        let parts = description.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 2, !parts[0].isEmpty, let seq = Int64(parts[1]), seq >= 0 else { return nil }
        self.init(epoch: String(parts[0]), seq: seq)
    }

    /// `EPOCH:SEQ`.
    public var description: String { "\(epoch):\(seq)" }
}

/// One change of a feed's items, as the change log replays it.
public struct ItemChange: Sendable, Hashable {
    /// What happened.
    public enum Kind: String, Sendable, Hashable, CaseIterable {
        /// The item was stored (new to whoever replays from before it).
        case inserted
        /// A stored item was replaced by a changed one, in place. Apply it as an upsert: a follower
        /// that catches up from the start in several batches gets this for an item inserted
        /// before its point and changed after, which it has not seen yet.
        case updated
        /// The server no longer has the item (a follower catching up may get this for an item it
        /// never saw).
        case deleted
        /// Retention dropped the item.
        case evicted
        /// The point asked for cannot be continued (another store, ahead of this one after a
        /// power loss, or older than the removals kept): forget everything of the feed; the
        /// changes that follow rebuild it from the start.
        case reset
    }

    /// What happened.
    public var kind: Kind
    /// The point after this change: pass it as `since` to continue after it.
    public var point: ChangePoint
    /// The item's id; `nil` for ``Kind/reset``.
    public var id: String?
    /// The item's payload as stored, for ``Kind/inserted`` and ``Kind/updated``: the item as it
    /// is now, which a later update may have changed again.
    public var payload: Data?

    /// A change.
    public init(kind: Kind, point: ChangePoint, id: String?, payload: Data?) {
        self.kind = kind
        self.point = point
        self.id = id
        self.payload = payload
    }
}

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
    /// Read in batches of `batch`; a follower that falls behind reads the log, not a queue.
    public func changes(feed: String, since: ChangePoint?, batch: Int = 500) -> AsyncThrowingStream<ItemChange, any Error> {
        let store = self
        return AsyncThrowingStream { continuation in
            let task = Task {
                // Subscribed before the first read: a commit between the read and the wait is
                // not missed.
                let commits = store.notifier.subscribe()
                var iterator = commits.makeAsyncIterator()
                _ = await iterator.next()
                var point = since
                do {
                    while !Task.isCancelled {
                        let changes = try await store.changes(feed: feed, since: point, limit: batch)
                        for change in changes {
                            continuation.yield(change)
                            point = change.point
                        }
                        if point == nil { point = try await store.changeHead().with(seq: 0) }
                        if changes.count < batch {
                            guard await iterator.next() != nil else { break }
                        }
                    }
                    continuation.finish()
                } catch {
                    continuation.finish(throwing: error)
                }
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }

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

extension ChangePoint {
    /// The same epoch at `seq`.
    func with(seq: Int64) -> ChangePoint { ChangePoint(epoch: epoch, seq: seq) }
}
