import Foundation
import SyncCore

/// Which end of a feed its first page holds.
public enum FeedOrder: String, Sendable, Hashable, CaseIterable {
    /// The newest items first, older pages after (most APIs).
    case newestFirst = "newest_first"
    /// The oldest items first, each next page newer (`?after=`, `direction=asc`): the first load
    /// reads the oldest page and the newer walk reads the rest forward at once; a refresh reads
    /// the last page again and goes on from it. The store keeps newest first either way.
    case oldestFirst = "oldest_first"
}

/// How a feed marks an item deleted while it still lists it (a tombstone): the value at a pointer
/// inside the item, such as `"deleted": true` or `"status": "deleted"`.
public struct DeletionMark: Sendable, Hashable {
    /// Where the mark is, inside an item.
    public var pointer: JSONPointer
    /// The value that means deleted.
    public var value: JSONScalar

    /// Items whose value at `pointer` is `value` (by default `true`) are deleted.
    public init(pointer: JSONPointer, value: JSONScalar = .bool(true)) {
        self.pointer = pointer
        self.value = value
    }
}

/// How to read a paginated API: where a page's items are, what identifies each, and how its
/// older and newer pages are reached. The default reads Mastodon and GitHub: a bare JSON array,
/// `id` members, `Link` headers.
public struct FeedDescriptor: Sendable, Hashable {
    /// Where a page's items are. `nil`: the root when the body is an array, else the first
    /// member of ``JSONPageParser/commonItemKeys`` that holds an array (the choice is logged once).
    public var items: JSONPointer?
    /// Where each item's id is, inside the item: a string or an integer.
    public var id: JSONPointer
    /// Where each item's version is (its modification time or revision), if the API gives one.
    public var updated: JSONPointer?
    /// How the page of items just older than a page is reached.
    public var older: OlderPages
    /// How items newer than the newest stored one are reached.
    public var newer: NewerPages
    /// What says that a page is the last (besides the absence of an older cursor).
    public var end: PageEnd
    /// How an item the server still lists is marked deleted, if it marks them: such an item is
    /// removed from the store, not stored.
    public var deleted: DeletionMark?
    /// Which end of the feed its first page holds.
    public var order: FeedOrder

    /// A descriptor; every part defaults to the bare-array, `Link`-header reading.
    public init(
        items: JSONPointer? = nil, id: JSONPointer = JSONPointer(tokens: ["id"]), updated: JSONPointer? = nil,
        older: OlderPages = .linkHeader, newer: NewerPages = .automatic, end: PageEnd = PageEnd(), deleted: DeletionMark? = nil,
        order: FeedOrder = .newestFirst
    ) {
        self.items = items
        self.id = id
        self.updated = updated
        self.older = older
        self.newer = newer
        self.end = end
        self.deleted = deleted
        self.order = order
    }

    /// Rejects a descriptor that cannot work, with the reason: an empty parameter or header
    /// name, a pointer to the whole document where a value inside it is meant.
    public func validate() throws(FeedError) {
        func name(_ value: String, _ what: String) throws(FeedError) {
            guard !value.isEmpty, value.unicodeScalars.allSatisfy({ $0.isASCII && $0.value > 0x20 && $0.value < 0x7F }) else {
                throw FeedError(.other, "the \(what) must be a non-empty name of printable ASCII, not \"\(value)\"")
            }
        }
        func inside(_ pointer: JSONPointer, _ what: String) throws(FeedError) {
            guard !pointer.isRoot else { throw FeedError(.other, "the \(what) must point inside the body, not at the whole of it") }
        }
        switch older {
        case .linkHeader: break
        case .bodyURL(let pointer): try inside(pointer, "older pages' URL pointer")
        case .bodyCursor(let pointer, let parameter):
            try inside(pointer, "cursor pointer")
            try name(parameter, "cursor parameter")
        case .headerCursor(let header, let parameter):
            try name(header, "cursor header")
            try name(parameter, "cursor parameter")
        case .lastItemID(let parameter): try name(parameter, "last item's id parameter")
        case .offset(let parameter): try name(parameter, "offset parameter")
        case .pageNumber(let parameter, _): try name(parameter, "page number parameter")
        }
        switch newer {
        case .automatic, .head: break
        case .idParameter(let parameter): try name(parameter, "newer parameter")
        case .bodyURL(let pointer): try inside(pointer, "newer pages' URL pointer")
        }
        if let updated { try inside(updated, "updated pointer") }
        if let deleted { try inside(deleted.pointer, "deleted pointer") }
        for pointer in [end.hasMore, end.isLast, end.total].compactMap({ $0 }) { try inside(pointer, "end pointer \(pointer)") }
    }

    /// What this reading does, a line each (items, ids, older pages, newer items, the end), in
    /// the configuration's words: for `syncd --check-config` and `syncd --probe`.
    public var summary: [String] {
        var lines = [
            "items: " + (items.map { $0.isRoot ? "the body, an array" : "at \($0)" }
                ?? "the body when it is an array, else the first common member holding one (data, items, results, …)"),
            "id: \(id)" + (updated.map { ", updated: \($0)" } ?? ""),
        ]
        if let deleted { lines.append("deleted: an item whose \(deleted.pointer) is \(deleted.value.literal)") }
        if order == .oldestFirst {
            lines.append("order: oldest first; the next page is newer, read forward from the first load, then from the last page")
        }
        switch older {
        case .linkHeader: lines.append("older pages: the Link header's rel=\"next\"")
        case .bodyURL(let pointer): lines.append("older pages: the URL at \(pointer)")
        case .bodyCursor(let pointer, let parameter): lines.append("older pages: the cursor at \(pointer), sent as \(parameter)=")
        case .headerCursor(let header, let parameter): lines.append("older pages: the \(header) header, sent as \(parameter)=")
        case .lastItemID(let parameter): lines.append("older pages: the last item's id, sent as \(parameter)=")
        case .offset(let parameter): lines.append("older pages: \(parameter)= counting the items read")
        case .pageNumber(let parameter, let first): lines.append("older pages: \(parameter)= numbering pages from \(first)")
        }
        switch newer {
        case .automatic: lines.append("newer items: the Link header's rel=\"prev\", else min_id= from the newest id; page-numbered feeds read page 1 again")
        case .idParameter(let parameter): lines.append("newer items: the newest stored id, sent as \(parameter)=")
        case .bodyURL(let pointer): lines.append("newer items: the URL at \(pointer)")
        case .head: lines.append("newer items: the feed's URL again, walking older to the stored items")
        }
        var ends: [String] = []
        if let hasMore = end.hasMore { ends.append("\(hasMore) is false") }
        if let isLast = end.isLast { ends.append("\(isLast) is true") }
        if let total = end.total { ends.append("the offset reaches \(total)") }
        lines.append("last page: " + (ends + ["no older page", "an empty page"]).joined(separator: ", or "))
        return lines
    }

    /// The values of a page's body this descriptor reads besides the items.
    var bodyValues: [JSONPointer] {
        var values: [JSONPointer] = []
        switch older {
        case .bodyURL(let pointer), .bodyCursor(let pointer, _): values.append(pointer)
        default: break
        }
        if case .bodyURL(let pointer) = newer { values.append(pointer) }
        values += [end.hasMore, end.isLast, end.total].compactMap { $0 }
        return values
    }
}

/// How the page just older than a page is reached. Each way yields a URL, the cursor the store
/// keeps: a restart goes on from it.
public enum OlderPages: Sendable, Hashable {
    /// RFC 8288 `Link: <…>; rel="next"` (Mastodon, GitHub, GitLab, Gitea).
    case linkHeader
    /// A URL in the body: JSON:API's `/links/next`, HAL's `/_links/next/href`, JSON Feed's `/next_url`.
    case bodyURL(JSONPointer)
    /// A cursor in the body, sent back as the query parameter `parameter` of the feed's URL:
    /// Bluesky's `/cursor` as `cursor`, Slack's `/response_metadata/next_cursor` as `cursor`,
    /// Notion's `/next_cursor` as `start_cursor`, Jira's `/nextPageToken` as `nextPageToken`.
    case bodyCursor(JSONPointer, parameter: String)
    /// A cursor in a response header, sent back as the query parameter `parameter`.
    case headerCursor(header: String, parameter: String)
    /// The page's last item's id as the query parameter `parameter` (Stripe's `starting_after`).
    case lastItemID(parameter: String)
    /// The query parameter `parameter` counts items skipped: the next page's is this one's plus
    /// the items it held.
    case offset(parameter: String)
    /// The query parameter `parameter` numbers pages from `first`.
    case pageNumber(parameter: String, first: Int)
}

/// How the items newer than the newest stored one are reached.
public enum NewerPages: Sendable, Hashable {
    /// `Link: rel="prev"` on a cursor feed, else Mastodon's `min_id` from the newest item; a
    /// page-numbered feed (``FeedPagination``) reads its first page again (``head``).
    case automatic
    /// The newest stored item's id as the query parameter `parameter`, which the server must
    /// answer with the items just above it (Mastodon's `min_id`, Stripe's `ending_before`,
    /// JSON:API's `page[before]`).
    case idParameter(String)
    /// A URL in the body to the items just above the page's newest (JSON:API's `/links/prev`).
    case bodyURL(JSONPointer)
    /// The feed's URL again, walking older from it until a page meets stored items: for any API
    /// without a way to ask for what is newer (Bluesky, Slack, Notion, Jira, offsets, pages).
    case head
}

/// What says, in a page's body, that it is the last one.
public struct PageEnd: Sendable, Hashable {
    /// A member that is `false` on the last page (Stripe's and Notion's `/has_more`).
    public var hasMore: JSONPointer?
    /// A member that is `true` on the last page (Jira's `/isLast`).
    public var isLast: JSONPointer?
    /// The number of items in the whole feed: with ``OlderPages/offset(parameter:)``, the page
    /// that reaches it is the last.
    public var total: JSONPointer?

    /// No signal in the body: an empty page, or one without an older cursor, is the last.
    public init(hasMore: JSONPointer? = nil, isLast: JSONPointer? = nil, total: JSONPointer? = nil) {
        self.hasMore = hasMore
        self.isLast = isLast
        self.total = total
    }
}
