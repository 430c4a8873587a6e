import SyncCore

/// A value found at a JSON pointer: scalars as their text, containers only by kind.
public enum JSONScalar: Sendable, Hashable {
    /// A string, its escapes decoded.
    case string(String)
    /// A number, as written.
    case number(String)
    /// `true` or `false`.
    case bool(Bool)
    /// `null`.
    case null
    /// An object or an array: nothing a cursor or a flag can be.
    case container

    /// A string or a number as text; `nil` for anything else and for an empty string (APIs such
    /// as Slack's send `""` for "no next cursor").
    public var text: String? {
        switch self {
        case .string(let value): value.isEmpty ? nil : value
        case .number(let value): value
        default: nil
        }
    }

    /// The value as JSON would spell it (a string quoted, without escaping): for messages.
    public var literal: String {
        switch self {
        case .string(let value): "\"\(value)\""
        case .number(let value): value
        case .bool(let value): value ? "true" : "false"
        case .null: "null"
        case .container: "an object or array"
        }
    }
}

/// What to pick out of a page body: where the items are, each item's id and version, and the
/// values of the envelope's other members (cursors, flags, totals), as one trie of member names
/// per level so that the scan follows only the paths asked for and steps over the rest.
struct EnvelopePlan {
    struct Node {
        /// Member names (or array indices, as decimal text) leading on, and where they lead.
        var children: [(key: [UInt8], node: Int)] = []
        /// The slot this value is captured into.
        var capture: Int?
        /// The items array.
        var isItems = false
    }

    /// From the document's root: the items and the envelope's values.
    private(set) var nodes = [Node()]
    /// Inside each item: slot 0 the id, slot 1 the version, slot 2 the deletion mark.
    private(set) var itemNodes = [Node()]
    let items: JSONPointer
    let id: JSONPointer
    let scalars: [JSONPointer]

    init(items: JSONPointer, id: JSONPointer, updated: JSONPointer?, deleted: JSONPointer? = nil, scalars: [JSONPointer]) {
        self.items = items
        self.id = id
        self.scalars = scalars
        nodes[Self.insert(items, into: &nodes)].isItems = true
        for (slot, pointer) in scalars.enumerated() where !pointer.isRoot {
            nodes[Self.insert(pointer, into: &nodes)].capture = slot
        }
        itemNodes[Self.insert(id, into: &itemNodes)].capture = 0
        if let updated { itemNodes[Self.insert(updated, into: &itemNodes)].capture = 1 }
        if let deleted { itemNodes[Self.insert(deleted, into: &itemNodes)].capture = 2 }
    }

    private static func insert(_ pointer: JSONPointer, into nodes: inout [Node]) -> Int {
        var current = 0
        for token in pointer.tokens {
            let key = Array(token.utf8)
            if let next = nodes[current].children.first(where: { $0.key == key })?.node {
                current = next
            } else {
                nodes.append(Node())
                nodes[current].children.append((key, nodes.count - 1))
                current = nodes.count - 1
            }
        }
        return current
    }
}

/// An item as a scan found it: its id, version and deletion mark (the descriptor's `updated` and
/// `deleted` pointers), and where its bytes lie in the body.
typealias ScannedItem = (id: String, updated: String?, deleted: JSONScalar?, bytes: Range<Int>)

/// What a scan with an ``EnvelopePlan`` found.
struct EnvelopeScan {
    /// The items, in body order, with where their bytes lie; `nil` when the body has no array
    /// at the items pointer.
    var items: [ScannedItem]?
    /// The values at the plan's scalar pointers, `nil` where absent.
    var scalars: [JSONScalar?]
    /// The top-level object's members, in body order, with whether each holds an array (for
    /// finding the items and for saying what a body that does not fit holds instead).
    var topLevel: [(key: String, isArray: Bool)] = []
    /// What the body is at its root: `{`, `[`, or another byte.
    var root: UInt8 = 0
}

extension JSONScanner {
    /// Scans and validates the whole body, capturing what `plan` asks for.
    mutating func envelope(_ plan: EnvelopePlan) throws(JSONSyntaxError) -> EnvelopeScan {
        skipWhitespace()
        guard let first = peek() else { throw JSONSyntaxError(message: "empty body") }
        var scan = EnvelopeScan(items: nil, scalars: Array(repeating: nil, count: plan.scalars.count), root: first)
        try walk(depth: 0, node: 0, plan: plan, scan: &scan)
        skipWhitespace()
        guard index == bytes.count else {
            throw JSONSyntaxError(message: "unexpected \(describe(bytes[index])) after the document at byte \(index)")
        }
        return scan
    }

    /// Scans the value at `index`, which sits at `node` of the plan's trie.
    private mutating func walk(depth: Int, node: Int, plan: EnvelopePlan, scan: inout EnvelopeScan) throws(JSONSyntaxError) {
        let current = plan.nodes[node]
        guard let first = peek() else { throw truncated() }
        if current.isItems {
            guard first == UInt8(ascii: "[") else {
                // Stepped over: the caller reports the missing items with what the body holds.
                try value(depth: depth)
                return
            }
            scan.items = try itemArray(depth: depth + 1, plan: plan)
            return
        }
        if let slot = current.capture {
            scan.scalars[slot] = try scalar(depth: depth)
            return
        }
        let isRoot = depth == 0
        guard !current.children.isEmpty || isRoot else {
            try value(depth: depth)
            return
        }
        switch first {
        case UInt8(ascii: "{"):
            try members(depth: depth + 1) { scanner, key throws(JSONSyntaxError) in
                if isRoot {
                    let name = String(decoding: key, as: UTF8.self)
                    scan.topLevel.append((name, scanner.peek() == UInt8(ascii: "[")))
                }
                if let child = current.children.first(where: { $0.key == key })?.node {
                    try scanner.walk(depth: depth + 1, node: child, plan: plan, scan: &scan)
                } else {
                    try scanner.value(depth: depth + 1)
                }
            }
        case UInt8(ascii: "["):
            try elements(depth: depth + 1) { scanner, position throws(JSONSyntaxError) in
                let key = Array(String(position).utf8)
                if let child = current.children.first(where: { $0.key == key })?.node {
                    try scanner.walk(depth: depth + 1, node: child, plan: plan, scan: &scan)
                } else {
                    try scanner.value(depth: depth + 1)
                }
            }
        default:
            try value(depth: depth)
        }
    }

    /// The items array: every element an object with an id at the plan's id pointer, no id twice.
    private mutating func itemArray(depth: Int, plan: EnvelopePlan) throws(JSONSyntaxError) -> [ScannedItem] {
        var items: [ScannedItem] = []
        var ids = DistinctIDs()
        try elements(depth: depth) { scanner, position throws(JSONSyntaxError) in
            guard scanner.peek() == UInt8(ascii: "{") else { throw scanner.error(position, "expected an object") }
            let start = scanner.index
            var id: String?
            var updated: String?
            var deleted: JSONScalar?
            try scanner.item(depth: depth + 1, node: 0, plan: plan, id: &id, updated: &updated, deleted: &deleted)
            guard let id else {
                throw JSONSyntaxError(message: "item \(position) has no string or integer at \(plan.id)")
            }
            guard ids.insert(id) else { throw JSONSyntaxError(message: "id \"\(id)\" appears twice in one page") }
            items.append((id, updated, deleted, start..<scanner.index))
        }
        return items
    }

    /// Scans a value inside an item at `node` of the item trie, capturing the id, the version and
    /// the deletion mark.
    private mutating func item(
        depth: Int, node: Int, plan: EnvelopePlan, id: inout String?, updated: inout String?, deleted: inout JSONScalar?
    ) throws(JSONSyntaxError) {
        let current = plan.itemNodes[node]
        switch current.capture {
        case 0?:
            guard id == nil else { throw syntax("the id member appears twice in one item") }
            id = try idValue()
            return
        case 1?:
            updated = try scalar(depth: depth - 1).text
            return
        case 2?:
            deleted = try scalar(depth: depth - 1)
            return
        default:
            break
        }
        guard !current.children.isEmpty, let first = peek() else {
            try value(depth: depth - 1)
            return
        }
        switch first {
        case UInt8(ascii: "{"):
            guard depth <= maxDepth else { throw JSONSyntaxError(message: "nesting deeper than \(maxDepth) at byte \(index)") }
            try members(depth: depth) { scanner, key throws(JSONSyntaxError) in
                if let child = current.children.first(where: { $0.key == key })?.node {
                    try scanner.item(depth: depth + 1, node: child, plan: plan, id: &id, updated: &updated, deleted: &deleted)
                } else {
                    try scanner.value(depth: depth)
                }
            }
        case UInt8(ascii: "["):
            try elements(depth: depth) { scanner, position throws(JSONSyntaxError) in
                if let child = current.children.first(where: { $0.key == Array(String(position).utf8) })?.node {
                    try scanner.item(depth: depth + 1, node: child, plan: plan, id: &id, updated: &updated, deleted: &deleted)
                } else {
                    try scanner.value(depth: depth)
                }
            }
        default:
            try value(depth: depth - 1)
        }
    }

    /// A value as a ``JSONScalar``; a container is scanned whole.
    private mutating func scalar(depth: Int) throws(JSONSyntaxError) -> JSONScalar {
        guard let first = peek() else { throw truncated() }
        switch first {
        case UInt8(ascii: "\""):
            return .string(String(decoding: try string(), as: UTF8.self))
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            let start = index
            try number()
            return .number(String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self))
        case UInt8(ascii: "t"):
            try literal("true")
            return .bool(true)
        case UInt8(ascii: "f"):
            try literal("false")
            return .bool(false)
        case UInt8(ascii: "n"):
            try literal("null")
            return .null
        default:
            try value(depth: depth)
            return .container
        }
    }

    /// Steps through an object at `index` (nested `depth` deep), handing each member's decoded
    /// name to `body` with the scanner at the member's value, which `body` must scan.
    private mutating func members(
        depth: Int, _ body: (inout JSONScanner, [UInt8]) throws(JSONSyntaxError) -> Void
    ) throws(JSONSyntaxError) {
        if try enter(depth: depth, closedBy: UInt8(ascii: "}")) { return }
        repeat {
            skipWhitespace()
            guard let quote = peek() else { throw truncated() }
            guard quote == UInt8(ascii: "\"") else { throw syntax("expected a member name but found \(describe(quote))") }
            let key = try string()
            try memberColon()
            try body(&self, key)
        } while try !closes(UInt8(ascii: "}"))
    }

    /// Steps through an array at `index`, handing each element's position to `body` with the
    /// scanner at the element, which `body` must scan.
    private mutating func elements(
        depth: Int, _ body: (inout JSONScanner, Int) throws(JSONSyntaxError) -> Void
    ) throws(JSONSyntaxError) {
        if try enter(depth: depth, closedBy: UInt8(ascii: "]")) { return }
        var position = 0
        repeat {
            skipWhitespace()
            try body(&self, position)
            position += 1
        } while try !closes(UInt8(ascii: "]"))
    }
}
