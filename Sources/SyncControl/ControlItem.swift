import Foundation
import SyncCore
import Varlink

/// A stored item as `ListItems` returns it.
public struct ControlItem: Sendable, Hashable, Codable {
    /// The item's id, as the server gave it.
    public var id: String
    /// One line of text taken from the item's JSON (see ``ItemSummary``).
    public var summary: String
    /// The JSON object the server sent.
    public var payload: JSONValue

    /// An item with its summary and JSON object.
    public init(id: String, summary: String, payload: JSONValue) {
        self.id = id
        self.summary = summary
        self.payload = payload
    }

    /// Wraps a stored item; a payload that is not a JSON object is kept as `{"raw": text}` so
    /// the reply still matches the interface's `object` type.
    public init(_ item: FeedItem) {
        let parsed = try? StrictJSON.parse(item.payload)
        let payload: JSONValue
        if case .object? = parsed {
            payload = parsed!
        } else {
            payload = .object(["raw": .string(String(decoding: item.payload, as: UTF8.self))])
        }
        self.init(id: item.id, summary: ItemSummary.summary(of: parsed ?? .null, fallback: item.id), payload: payload)
    }
}

extension JSONWriter {
    /// A stored payload as the interface's `object`: its bytes as they are when `parsed` (the
    /// same bytes through `StrictJSON`) is one object, else `{"raw": text}`, so a reply never
    /// carries what is not JSON.
    mutating func payload(_ bytes: Data, parsed: JSONValue?) {
        if case .object? = parsed {
            validatedJSON(bytes)
        } else {
            punctuation("{")
            key("raw")
            string(String(decoding: bytes, as: UTF8.self))
            punctuation("}")
        }
    }
}

/// One change as `WatchItems` sends it: `{"id", "kind", "payload", "point"}` in the encoder's
/// order, the payload as stored (``JSONWriter/payload(_:parsed:)``).
func encodedChange(_ change: ItemChange) -> VarlinkEncodedParameters {
    var writer = JSONWriter(capacity: (change.payload?.count ?? 0) + 128)
    writer.punctuation("{")
    if let id = change.id {
        writer.key("id")
        writer.string(id)
        writer.comma()
    }
    writer.key("kind")
    writer.string(change.kind.rawValue)
    writer.comma()
    if let payload = change.payload {
        writer.key("payload")
        writer.payload(payload, parsed: try? StrictJSON.parse(payload))
        writer.comma()
    }
    writer.key("point")
    writer.string(change.point.description)
    writer.punctuation("}")
    return VarlinkEncodedParameters(writer)
}

/// One page of stored items as a ``SyncControlHandler`` returns it for `ListItems`.
public struct StoredItemPage: Sendable, Hashable {
    /// The page's items, newest first, each with its payload's bytes as stored.
    public var items: [FeedItem]
    /// Pass as `after` to get the next page; `nil` at the end.
    public var next: String?

    /// A page, continued at `next`.
    public init(items: [FeedItem], next: String?) {
        self.items = items
        self.next = next
    }

    /// The page as `ListItems` sends it, `{"items": [...], "next": ...}` with the members of
    /// each item in the order `JSONEncoder` sorts them. A payload that is one JSON object is
    /// copied as it is; anything else (a store somebody wrote into) goes as `{"raw": text}`,
    /// as ``ControlItem/init(_:)`` wraps it.
    public func encoded() -> VarlinkEncodedParameters {
        var writer = JSONWriter(capacity: items.reduce(64) { $0 + $1.payload.count + $1.id.utf8.count + 160 })
        writer.punctuation("{")
        writer.key("items")
        writer.punctuation("[")
        for (index, item) in items.enumerated() {
            if index > 0 { writer.comma() }
            // Parsed once: it proves the bytes are JSON before they are spliced into the
            // reply, and the summary comes from the same tree.
            let parsed = try? StrictJSON.parse(item.payload)
            writer.punctuation("{")
            writer.key("id")
            writer.string(item.id)
            writer.comma()
            writer.key("payload")
            writer.payload(item.payload, parsed: parsed)
            writer.comma()
            writer.key("summary")
            writer.string(ItemSummary.summary(of: parsed ?? .null, fallback: item.id))
            writer.punctuation("}")
        }
        writer.punctuation("]")
        if let next {
            writer.comma()
            writer.key("next")
            writer.string(next)
        }
        writer.punctuation("}")
        return VarlinkEncodedParameters(writer)
    }
}

/// One change of a feed's stored items as `WatchItems` sends it.
public struct ControlItemChange: Sendable, Hashable, Codable {
    /// What happened to the item, as the store's change log says (reset: forget the feed's
    /// items; the changes that follow rebuild it from the start).
    public typealias Kind = ItemChange.Kind

    /// What happened.
    public var kind: Kind
    /// Pass as `since` to continue after this change (`EPOCH:SEQ`).
    public var point: String
    /// The item's id; absent for ``Kind/reset``.
    public var id: String?
    /// The item as stored, for ``Kind/inserted`` and ``Kind/updated``.
    public var payload: JSONValue?

    /// A change.
    public init(kind: Kind, point: String, id: String?, payload: JSONValue?) {
        self.kind = kind
        self.point = point
        self.id = id
        self.payload = payload
    }
}

/// One page of `ListItems`.
public struct ControlItemPage: Sendable, Hashable, Codable {
    /// The page's items, newest first.
    public var items: [ControlItem]
    /// Pass as `after` to get the next page; `nil` at the end.
    public var next: String?

    /// A page, continued at `next`.
    public init(items: [ControlItem], next: String?) {
        self.items = items
        self.next = next
    }
}

extension ControlRow {
    /// A content row for a stored item, with a one-line summary taken from its JSON.
    public init(_ item: FeedItem, maxLength: Int = ItemSummary.defaultMaxLength) {
        let parsed = (try? StrictJSON.parse(item.payload)) ?? .null
        self.init(id: item.id, summary: ItemSummary.summary(of: parsed, fallback: item.id, maxLength: maxLength))
    }
}

/// One line of text for an item whose JSON shape is not known in advance (Mastodon statuses,
/// GitHub issues, plain records).
public enum ItemSummary {
    /// Characters a summary keeps before it is cut with an ellipsis.
    public static let defaultMaxLength = 120

    /// Fields tried in order; the first non-empty string wins.
    static let preferredKeys = ["title", "name", "summary", "spoiler_text", "content", "text", "body", "message", "description"]

    /// One clean line of `payload`'s first text field, markup and control characters removed;
    /// `fallback` (the id) when there is none.
    public static func summary(of payload: JSONValue, fallback: String, maxLength: Int = defaultMaxLength) -> String {
        var text = fallback
        if let object = payload.objectValue {
            for key in preferredKeys {
                if let value = object[key]?.stringValue {
                    let cleaned = clean(value)
                    if !cleaned.isEmpty { text = cleaned; break }
                }
            }
        } else if let value = payload.stringValue {
            text = clean(value)
        }
        return truncate(text, to: maxLength)
    }

    /// Drops HTML tags (Mastodon sends HTML) and folds whitespace onto one line.
    static func clean(_ text: String) -> String {
        var result = ""
        var inTag = false
        for character in text {
            if character == "<" { inTag = true; result.append(" "); continue }
            if character == ">" && inTag { inTag = false; continue }
            if !inTag { result.append(character) }
        }
        for (entity, replacement) in [("&amp;", "&"), ("&lt;", "<"), ("&gt;", ">"), ("&quot;", "\""), ("&#39;", "'"), ("&nbsp;", " ")] {
            result = result.replacingOccurrences(of: entity, with: replacement)
        }
        return result.split(whereSeparator: { $0.isWhitespace || $0.isNewline }).joined(separator: " ")
    }

    static func truncate(_ text: String, to maxLength: Int) -> String {
        guard text.count > maxLength, maxLength > 1 else { return text }
        return String(text.prefix(maxLength - 1)) + "…"
    }
}
