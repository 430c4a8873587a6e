import Foundation

/// A point in a store's change log: the store's epoch and a sequence number. Its text form,
/// `EPOCH:SEQ`, is what a client keeps to resume (`SQLiteFeedStore.changes(feed:since:)`).
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
    public enum Kind: String, Sendable, Hashable, Codable, CaseIterable {
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
