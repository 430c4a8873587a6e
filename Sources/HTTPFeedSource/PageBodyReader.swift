import Foundation
import SyncCore

/// A page body read by a ``FeedDescriptor``: its items and the envelope's values.
public struct ParsedPage: Sendable {
    /// The items in body order, each payload the item's bytes as received and its version
    /// (``FeedItem/version``, at the descriptor's `updated` pointer) where one was asked for.
    public var items: [FeedItem]
    /// The values found at the pointers asked for; absent pointers are missing.
    public var values: [JSONPointer: JSONScalar]
    /// Where the items were: the descriptor's pointer, or the one found in the body.
    public var itemsAt: JSONPointer
    /// Ids of the items that carry the parser's ``DeletionMark`` (still among ``items``, where
    /// cursors count them), or the document's tombstones (Atom's `at:deleted-entry`).
    public var deletedIDs: [String] = []
}

extension JSONPageParser {
    /// Members that hold a page's items in the common JSON APIs, in the order they are tried
    /// when no `items` pointer is given.
    public static let commonItemKeys = [
        "data", "items", "results", "entries", "records", "feed", "messages", "issues", "statuses", "posts",
        "values", "elements", "hits", "rows", "list", "objects",
    ]

    /// Reads `body`: the items at `items` (or, when `nil`, at the root when the body is an array,
    /// else at the first of ``commonItemKeys`` that holds an array), each item's id at the
    /// parser's `id` pointer and version at `updated`, and the values at `values`.
    ///
    /// The whole body is validated first: a page that is not valid JSON, or whose items do not
    /// fit, is rejected whole and nothing from it is kept. A body whose items are not where they
    /// are looked for is refused with what it holds instead and what to set, e.g. `the body is a
    /// JSON object with keys "feed", "cursor": set items = "/feed"`.
    public func read(_ body: Data, items: JSONPointer?, values: [JSONPointer] = []) throws(FeedError) -> ParsedPage {
        let plainID = id.tokens.count == 1 && updated == nil && deleted == nil
        if values.isEmpty, plainID, items?.isRoot ?? true, Self.firstByte(of: body) == UInt8(ascii: "[") {
            // The bare array of Mastodon and GitHub: the scan built for it.
            let found = try parse(body)
            return ParsedPage(items: found, values: [:], itemsAt: .root)
        }
        if let first = Self.firstByte(of: body), first != UInt8(ascii: "{"), first != UInt8(ascii: "[") {
            throw Self.notJSON(body, first: first)
        }
        let at: JSONPointer
        if let items {
            at = items
        } else {
            at = try detectItems(body)
        }
        let plan = EnvelopePlan(items: at, id: id, updated: updated, deleted: deleted?.pointer, scalars: values)
        let scan = try envelope(body, plan)
        guard let found = scan.items else { throw Self.misfit(scan, items: at) }
        let base = body.startIndex
        var page = ParsedPage(items: [], values: [:], itemsAt: at)
        page.items.reserveCapacity(found.count)
        for item in found {
            page.items.append(FeedItem(id: item.id, payload: body[(base + item.bytes.lowerBound)..<(base + item.bytes.upperBound)], version: item.updated))
            if let mark = deleted, item.deleted == mark.value { page.deletedIDs.append(item.id) }
        }
        for (pointer, value) in zip(values, scan.scalars) {
            if let value { page.values[pointer] = value }
        }
        return page
    }

    /// Where the items of an object body are: the first common member holding an array.
    private func detectItems(_ body: Data) throws(FeedError) -> JSONPointer {
        // A pointer no body has: the scan only collects the top-level members.
        let probe = EnvelopePlan(items: JSONPointer(tokens: ["", ""]), id: id, updated: nil, scalars: [])
        let scan = try envelope(body, probe)
        if scan.root == UInt8(ascii: "[") { return .root }
        let arrays = Set(scan.topLevel.filter(\.isArray).map(\.key))
        if let key = Self.commonItemKeys.first(where: arrays.contains) { return JSONPointer(tokens: [key]) }
        throw Self.misfit(scan, items: nil)
    }

    /// The error for a body without items where they were looked for, saying what it holds.
    private static func misfit(_ scan: EnvelopeScan, items: JSONPointer?) -> FeedError {
        let looked = items.map { "no array of items at \($0.isRoot ? "the root" : "\"\($0)\"")" } ?? "no array of items under a common name"
        switch scan.root {
        case UInt8(ascii: "{"):
            let keys = scan.topLevel.prefix(12).map { "\"\($0.key)\"" }.joined(separator: ", ")
            let described = scan.topLevel.isEmpty ? "an empty JSON object" : "a JSON object with keys \(keys)\(scan.topLevel.count > 12 ? ", …" : "")"
            let hint = scan.topLevel.first(where: \.isArray).map { ": set items = \"\(JSONPointer(tokens: [$0.key]))\"" }
                ?? (scan.topLevel.contains { $0.key == "_embedded" } ? ": set items to the array inside it, e.g. \"/_embedded/items\"" : "")
            return FeedError(.malformed, "malformed page: \(looked); the body is \(described)\(hint)")
        case UInt8(ascii: "["):
            return FeedError(.malformed, "malformed page: \(looked); the body is a JSON array: set items = \"\" (the default)")
        default:
            return FeedError(.malformed, "malformed page: \(looked); the body is not a JSON object or array")
        }
    }

    private func envelope(_ body: Data, _ plan: EnvelopePlan) throws(FeedError) -> EnvelopeScan {
        let result = body.withUnsafeBytes { raw in
            Result { () throws(JSONSyntaxError) in
                var scanner = JSONScanner(bytes: raw.assumingMemoryBound(to: UInt8.self), idKey: [], maxDepth: maxDepth)
                return try scanner.envelope(plan)
            }
        }
        switch result {
        case .success(let scan): return scan
        case .failure(let error):
            guard String(validating: body, as: UTF8.self) != nil else { throw FeedError(.malformed, "page body is not valid UTF-8") }
            throw FeedError(.malformed, "malformed page: \(error.message)")
        }
    }

    /// The error for a body that is not a JSON object or array, saying what it looks like.
    private static func notJSON(_ body: Data, first: UInt8) -> FeedError {
        if HTMLPage(body) != nil {
            return FeedError(.malformed, "malformed page: the body is an HTML page, not JSON (a login or error page?)")
        }
        let start = String(decoding: body.prefix(256), as: UTF8.self).lowercased()
        if start.contains("<rss") || start.contains("<feed") || start.hasPrefix("<?xml") {
            return FeedError(.malformed, "malformed page: the body is XML (Atom or RSS?), not JSON: syncd reads JSON feeds only")
        }
        let shown = (0x21...0x7E).contains(first) ? "'\(Character(Unicode.Scalar(first)))'" : "byte 0x\(String(first, radix: 16))"
        return FeedError(.malformed, "malformed page: expected a JSON array of items or an object holding them, body starts with \(shown)")
    }

    private static func firstByte(of body: Data) -> UInt8? {
        firstSignificantByte(of: body, skippingByteOrderMark: false)
    }
}

/// The body's first byte past JSON's blanks (and a UTF-8 byte order mark, when asked to skip it).
func firstSignificantByte(of body: Data, skippingByteOrderMark: Bool) -> UInt8? {
    var rest = body[...]
    if skippingByteOrderMark, rest.starts(with: [0xEF, 0xBB, 0xBF]) { rest = rest.dropFirst(3) }
    return rest.first { !($0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09) }
}

/// Whether the body opens with `<` past blanks and a byte order mark: HTML, XML, Atom, RSS.
func opensWithMarkup(_ body: Data) -> Bool {
    firstSignificantByte(of: body, skippingByteOrderMark: true) == UInt8(ascii: "<")
}
