/// A feed's items, oldest first, and the paging rules of the Mastodon-style protocol.
struct GeneratedFeed: Sendable {
    let definition: FeedDefinition
    /// Oldest first; ids strictly increasing in string order.
    private(set) var items: [DemoFeedItem] = []
    /// Fractional items owed by the clock, so slow rates still produce items.
    var pendingFraction: Double = 0
    /// The next item's sequence number: never reused, so a deleted item's id never comes back.
    private var nextSequence = 1

    init(definition: FeedDefinition) {
        self.definition = definition
        append(count: definition.initialCount)
    }

    mutating func append(count: Int) {
        guard count > 0 else { return }
        items.reserveCapacity(items.count + count)
        for _ in 0..<count {
            items.append(.generate(
                feed: definition.name, sequence: nextSequence,
                idWidth: definition.idWidth, idField: definition.idField))
            nextSequence += 1
        }
    }

    /// Removes the item with `id`; the items below it move up a place. Whether it was there.
    mutating func delete(id: String) -> Bool {
        guard let index = items.firstIndex(where: { $0.id == id }) else { return false }
        items.remove(at: index)
        return true
    }

    /// Replaces the item with `id` by its next revision, where it stands. Whether it was there.
    mutating func edit(id: String) -> Bool {
        guard let index = items.firstIndex(where: { $0.id == id }) else { return false }
        let item = items[index]
        items[index] = .generate(
            feed: definition.name, sequence: item.sequence, idWidth: definition.idWidth, idField: definition.idField,
            revision: item.revision + 1)
        return true
    }

    /// One page: items newest first, and whether items older than the page's oldest exist.
    func page(_ query: PageQuery) -> (items: [DemoFeedItem], hasOlder: Bool) {
        if let number = query.page {
            // Page numbers count from the newest item, so pages shift as items arrive.
            let end = items.count - min(items.count, (number - 1) * query.limit)
            let start = max(0, end - query.limit)
            return (items[start..<end].reversed(), start > 0)
        }
        var low = 0
        var high = items.count
        if let maxID = query.maxID { high = min(high, firstIndex(notBelow: maxID)) }
        let start: Int
        let end: Int
        if let minID = query.minID {
            // The items immediately newer than min_id: the oldest `limit` of them, so no gap.
            low = max(low, firstIndex(above: minID))
            start = low
            end = min(high, low + query.limit)
        } else {
            if let sinceID = query.sinceID { low = max(low, firstIndex(above: sinceID)) }
            end = high
            start = max(low, high - query.limit)
        }
        guard start < end else { return ([], false) }
        return (items[start..<end].reversed(), start > 0)
    }

    /// The first index whose id is >= `id`.
    private func firstIndex(notBelow id: String) -> Int {
        partition { $0.id >= id }
    }

    /// The first index whose id is > `id`.
    private func firstIndex(above id: String) -> Int {
        partition { $0.id > id }
    }

    private func partition(_ isUpper: (DemoFeedItem) -> Bool) -> Int {
        var low = 0
        var high = items.count
        while low < high {
            let mid = (low + high) / 2
            if isUpper(items[mid]) { high = mid } else { low = mid + 1 }
        }
        return low
    }
}

/// The paging parameters of one feed request.
struct PageQuery: Sendable, Hashable {
    var limit: Int
    var maxID: String?
    var minID: String?
    var sinceID: String?
    /// The page number of a page-numbered feed (1 when the request gives none).
    var page: Int?

    /// Which way the request pages, for request hooks and the request log. Page 1 of a
    /// page-numbered feed counts as initial (a refresh asks for it too), later pages as older.
    var kind: RequestKind {
        if let page { return page > 1 ? .older : .initial }
        if minID != nil || sinceID != nil { return .newer }
        if maxID != nil { return .older }
        return .initial
    }

    /// Reads `limit`, `max_id`, `min_id`, `since_id` (or, for page-numbered feeds, `per_page`
    /// and `page`, ignoring cursors as GitHub does); a bad value is the client's error.
    init(parameters: [String: String], definition: FeedDefinition) throws(DemoFeedServerError) {
        let sizeKey = definition.pagination == .page ? "per_page" : "limit"
        if definition.pagination == .page {
            if let raw = parameters["page"] {
                guard let value = Int(raw), value >= 1 else { throw .invalidArgument("page must be a positive integer, got '\(raw)'") }
                page = value
            } else {
                page = 1
            }
        }
        if let raw = parameters[sizeKey] {
            guard let value = Int(raw), value >= 1 else {
                throw .invalidArgument("\(sizeKey) must be a positive integer, got '\(raw)'")
            }
            limit = min(value, definition.maxLimit)
        } else {
            limit = definition.defaultLimit
        }
        func id(_ key: String) -> String? {
            guard let value = parameters[key], !value.isEmpty else { return nil }
            return value
        }
        guard definition.pagination == .cursor else { return }
        maxID = id("max_id")
        minID = id("min_id")
        sinceID = id("since_id")
    }
}

/// The direction a feed request pages in.
public enum RequestKind: String, Sendable, Hashable, CaseIterable {
    /// No cursor: the newest page.
    case initial
    /// `max_id`: older items.
    case older
    /// `min_id` or `since_id`: newer items.
    case newer
}
