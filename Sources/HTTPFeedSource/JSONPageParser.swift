import Foundation
import SyncCore

/// Splits a page body (a JSON array of objects) into items, keeping each object's bytes exactly
/// as received.
///
/// A full validating scan (RFC 8259) rather than `JSONSerialization`: decoding and re-encoding
/// would change the bytes (key order, escapes, number spelling), and the store keeps the
/// server's bytes. The whole body is validated before any item is returned, so a truncated or
/// corrupt page is rejected as a unit and nothing from it is stored.
public struct JSONPageParser: Sendable {
    /// Where each item's id is, inside the item; its value must be a string or an integer.
    public var id: JSONPointer
    /// Where each item's version is, inside the item (a modification time or revision), if anywhere.
    public var updated: JSONPointer?
    /// How an item is marked deleted, if the feed marks them (``ParsedPage/deletedIDs``).
    public var deleted: DeletionMark?
    /// Deeper nesting is rejected instead of risking the stack.
    public var maxDepth = 256

    /// The member that carries each item's id, when the id is a member of the item itself.
    public var idField: String {
        get { id.tokens.count == 1 ? id.tokens[0] : id.description }
        set { id = JSONPointer(tokens: [newValue]) }
    }

    /// A parser that reads each item's id from its member `idField`.
    public init(idField: String = "id") {
        self.id = JSONPointer(tokens: [idField])
    }

    /// A parser that reads each item's id at `id`, its version at `updated`, and whether it is a
    /// tombstone by `deleted`.
    public init(id: JSONPointer, updated: JSONPointer? = nil, deleted: DeletionMark? = nil) {
        self.id = id
        self.updated = updated
        self.deleted = deleted
    }

    /// The page's items in body order (servers send newest first).
    public func parse(_ body: [UInt8]) throws(FeedError) -> [FeedItem] {
        try parse(Data(body))
    }

    /// The page's items from a `Data` body; each item's payload is a slice of `body`,
    /// sharing its storage instead of copying the item's bytes.
    public func parse(_ body: Data) throws(FeedError) -> [FeedItem] {
        // The scan below reads an id that is a member of the item; a deeper one takes the other.
        guard id.tokens.count == 1 else { return try read(body, items: .root).items }
        let found = try body.withUnsafeBytes { raw in
            Result { () throws(FeedError) in try scan(raw.assumingMemoryBound(to: UInt8.self)) }
        }.get()
        let base = body.startIndex
        return found.map { FeedItem(id: $0.id, payload: body[(base + $0.bytes.lowerBound)..<(base + $0.bytes.upperBound)]) }
    }

    /// The items' ids and where their bytes lie in `bytes`, after the whole body is validated.
    ///
    /// UTF-8 is checked as the scan goes: a byte above ASCII is valid JSON only inside a string,
    /// where the scanner checks its sequence, so a body that scans is valid UTF-8. Only a body that
    /// does not scan is checked whole, to say which of the two it is.
    func scan(_ bytes: UnsafeBufferPointer<UInt8>) throws(FeedError) -> [(id: String, bytes: Range<Int>)] {
        var scanner = JSONScanner(bytes: bytes, idKey: Array(id.tokens[0].utf8), maxDepth: maxDepth)
        do {
            return try scanner.page()
        } catch {
            guard String(validating: bytes, as: UTF8.self) != nil else {
                throw FeedError(.malformed, "page body is not valid UTF-8")
            }
            throw FeedError(.malformed, "malformed page: \(error.message)")
        }
    }
}

struct JSONSyntaxError: Error {
    var message: String
}

/// The scanner behind ``JSONPageParser``, over the body's bytes in place.
struct JSONScanner {
    let bytes: UnsafeBufferPointer<UInt8>
    let idKey: [UInt8]
    let maxDepth: Int
    var index = 0

    init(bytes: UnsafeBufferPointer<UInt8>, idKey: [UInt8], maxDepth: Int) {
        self.bytes = bytes
        self.idKey = idKey
        self.maxDepth = maxDepth
    }

    mutating func page() throws(JSONSyntaxError) -> [(id: String, bytes: Range<Int>)] {
        skipWhitespace()
        guard let first = peek() else { throw JSONSyntaxError(message: "empty body") }
        guard first == UInt8(ascii: "[") else {
            throw JSONSyntaxError(message: "expected a JSON array of items, body starts with \(describe(first))")
        }
        index += 1
        var items: [(id: String, bytes: Range<Int>)] = []
        var ids = DistinctIDs()
        skipWhitespace()
        if peek() == UInt8(ascii: "]") {
            index += 1
        } else {
            while true {
                skipWhitespace()
                guard peek() == UInt8(ascii: "{") else {
                    throw error(items.count, "expected an object")
                }
                let start = index
                let id = try object(depth: 1, captureID: true)
                guard let id else {
                    throw JSONSyntaxError(message: "item \(items.count) has no \"\(String(decoding: idKey, as: UTF8.self))\" string or integer")
                }
                guard ids.insert(id) else {
                    throw JSONSyntaxError(message: "id \"\(id)\" appears twice in one page")
                }
                items.append((id, start..<index))
                skipWhitespace()
                guard let next = peek() else { throw truncated() }
                index += 1
                if next == UInt8(ascii: "]") { break }
                guard next == UInt8(ascii: ",") else { throw error(items.count, "expected ',' or ']' but found \(describe(next))", at: index - 1) }
            }
        }
        skipWhitespace()
        guard index == bytes.count else {
            throw JSONSyntaxError(message: "unexpected \(describe(bytes[index])) after the array at byte \(index)")
        }
        return items
    }

    /// Scans an object; at depth 1 with `captureID`, returns the id member's value.
    mutating func object(depth: Int, captureID: Bool) throws(JSONSyntaxError) -> String? {
        var id: String?
        if try enter(depth: depth, closedBy: UInt8(ascii: "}")) { return nil }
        while true {
            skipWhitespace()
            guard let quote = peek() else { throw truncated() }
            guard quote == UInt8(ascii: "\"") else { throw syntax("expected a member name but found \(describe(quote))") }
            let keyStart = index
            let (key, escaped) = try skipString()
            var isID = false
            if captureID {
                if escaped {
                    // Rare: compare the decoded name, as the id member may be written with escapes.
                    index = keyStart
                    isID = try string() == idKey
                } else {
                    isID = Self.equal(bytes[key], idKey)
                }
            }
            try memberColon()
            if isID {
                guard id == nil else { throw syntax("the id member appears twice in one item") }
                id = try idValue()
            } else {
                try value(depth: depth)
            }
            if try closes(UInt8(ascii: "}")) { return id }
        }
    }

    /// The id: a non-empty string, or an integer kept in its textual form (GitHub's numeric ids).
    mutating func idValue() throws(JSONSyntaxError) -> String {
        guard let first = peek() else { throw truncated() }
        if first == UInt8(ascii: "\"") {
            let (range, escaped) = try skipString()
            // An escape decodes to at least one byte: only "" is empty.
            guard !range.isEmpty else { throw syntax("the id is an empty string") }
            return escaped
                ? String(decoding: try decoded(range), as: UTF8.self)
                : String(decoding: UnsafeBufferPointer(rebasing: bytes[range]), as: UTF8.self)
        }
        let start = index
        if first == UInt8(ascii: "-") || isDigit(first) {
            try number()
            let text = bytes[start..<index]
            guard text.allSatisfy({ isDigit($0) || $0 == UInt8(ascii: "-") }) else {
                throw syntax("the id must be a string or an integer, not \(String(decoding: text, as: UTF8.self))", at: start)
            }
            return String(decoding: text, as: UTF8.self)
        }
        throw syntax("the id must be a string or an integer")
    }

    mutating func value(depth: Int) throws(JSONSyntaxError) {
        guard let c = peek() else { throw truncated() }
        switch c {
        case UInt8(ascii: "{"): _ = try object(depth: depth + 1, captureID: false)
        case UInt8(ascii: "["): try array(depth: depth + 1)
        case UInt8(ascii: "\""): _ = try skipString()
        case UInt8(ascii: "t"): try literal("true")
        case UInt8(ascii: "f"): try literal("false")
        case UInt8(ascii: "n"): try literal("null")
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): try number()
        default: throw syntax("unexpected \(describe(c))")
        }
    }

    mutating func array(depth: Int) throws(JSONSyntaxError) {
        if try enter(depth: depth, closedBy: UInt8(ascii: "]")) { return }
        repeat {
            skipWhitespace()
            try value(depth: depth)
        } while try !closes(UInt8(ascii: "]"))
    }

    // The three steps every object and array takes, for the page scan and the envelope scan
    // alike. Inlined: they run at every member and element of a page.

    /// Steps into the object or array that opens at `index`, nested `depth` deep; true when it
    /// is empty, with its `close` byte stepped over too.
    @inline(__always)
    mutating func enter(depth: Int, closedBy close: UInt8) throws(JSONSyntaxError) -> Bool {
        guard depth <= maxDepth else { throw JSONSyntaxError(message: "nesting deeper than \(maxDepth) at byte \(index)") }
        index += 1
        skipWhitespace()
        guard peek() == close else { return false }
        index += 1
        return true
    }

    /// Steps over the `:` between a member's name and its value, and the white space about it.
    @inline(__always)
    mutating func memberColon() throws(JSONSyntaxError) {
        skipWhitespace()
        guard let colon = peek() else { throw truncated() }
        guard colon == UInt8(ascii: ":") else { throw syntax("expected ':' but found \(describe(colon))") }
        index += 1
        skipWhitespace()
    }

    /// Steps over what follows a member or an element: a `,` (false, another follows) or the
    /// container's `close` byte (true).
    @inline(__always)
    mutating func closes(_ close: UInt8) throws(JSONSyntaxError) -> Bool {
        skipWhitespace()
        guard let next = peek() else { throw truncated() }
        index += 1
        if next == close { return true }
        guard next == UInt8(ascii: ",") else {
            throw syntax("expected ',' or '\(Character(Unicode.Scalar(close)))' but found \(describe(next))", at: index - 1)
        }
        return false
    }

    /// Scans and checks a string without decoding it: most strings in a page are only stepped
    /// over. Returns the range between the quotes and whether it holds escapes.
    ///
    /// Inlined where strings are met: most are short and plain (member names, ids, dates), and
    /// end at the first byte that ``skipPlainStringBytes()`` stops at; the rest go on out of line.
    @inline(__always)
    mutating func skipString() throws(JSONSyntaxError) -> (Range<Int>, escaped: Bool) {
        index += 1  // opening quote
        let start = index
        skipPlainStringBytes()
        if index < bytes.count, bytes[index] == UInt8(ascii: "\"") {
            index += 1
            return (start..<(index - 1), false)
        }
        return try skipStringRest(from: start)
    }

    /// ``skipString()`` from the first byte that needs a look of its own.
    @inline(never)
    mutating func skipStringRest(from start: Int) throws(JSONSyntaxError) -> (Range<Int>, escaped: Bool) {
        var escaped = false
        while true {
            skipPlainStringBytes()
            guard index < bytes.count else { throw truncated() }
            let c = bytes[index]
            index += 1
            switch c {
            case UInt8(ascii: "\""):
                return (start..<(index - 1), escaped)
            case UInt8(ascii: "\\"):
                guard index < bytes.count else { throw truncated() }
                let e = bytes[index]
                index += 1
                escaped = true
                switch e {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"), UInt8(ascii: "f"),
                     UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
                    break
                case UInt8(ascii: "u"):
                    _ = try hex4()
                default:
                    throw syntax("invalid escape \\\(describe(e))", at: index - 2)
                }
            case 0x00..<0x20:
                throw syntax("unescaped control character in a string", at: index - 1)
            case 0x80...0xFF:
                try skipUTF8Sequence(lead: c)
            default:
                break
            }
        }
    }

    /// Steps over string bytes that need no look of their own (printable ASCII other than `"` and
    /// `\`), eight at a time, up to the first that does or the last whole eight before the end.
    ///
    /// Most of a page is such bytes inside strings; one at a time through ``skipString()``'s
    /// switch they took most of the scan.
    @inline(__always)
    mutating func skipPlainStringBytes() {
        guard let base = bytes.baseAddress else { return }
        let raw = UnsafeRawPointer(base)
        while bytes.count - index >= 8 {
            let special = Self.specialBytes(UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: index, as: UInt64.self)))
            guard special == 0 else {
                index += special.trailingZeroBitCount &>> 3
                return
            }
            index += 8
        }
    }

    /// The high bit of each byte of `word` (first byte lowest) that a string cannot simply step
    /// over: `"`, `\`, a control character or a byte above ASCII; bytes above the lowest such byte
    /// may be flagged too, so only the lowest flag counts.
    ///
    /// Each test is the classic "byte below n" check, `(x - n) & ~x & 0x80`, per byte: exact for
    /// the lowest byte it flags, because a borrow leaves a byte only when that byte is a hit.
    private static func specialBytes(_ word: UInt64) -> UInt64 {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let quote = word ^ (ones &* 0x22), backslash = word ^ (ones &* 0x5C)
        let isQuote = (quote &- ones) & ~quote
        let isBackslash = (backslash &- ones) & ~backslash
        let isControl = (word &- ones &* 0x20) & ~word
        return (isQuote | isBackslash | isControl | word) & (ones &* 0x80)
    }

    /// Steps over the rest of a multi-byte UTF-8 sequence whose `lead` byte was just read, as
    /// RFC 3629 allows it (no overlong forms, no surrogates, nothing above U+10FFFF), as Swift's
    /// own validation does.
    mutating func skipUTF8Sequence(lead: UInt8) throws(JSONSyntaxError) {
        // The range the first continuation byte must fall in, and how many follow it.
        let first: ClosedRange<UInt8>
        let more: Int
        switch lead {
        case 0xC2...0xDF: (first, more) = (0x80...0xBF, 0)
        case 0xE0: (first, more) = (0xA0...0xBF, 1)
        case 0xE1...0xEC, 0xEE...0xEF: (first, more) = (0x80...0xBF, 1)
        case 0xED: (first, more) = (0x80...0x9F, 1)
        case 0xF0: (first, more) = (0x90...0xBF, 2)
        case 0xF1...0xF3: (first, more) = (0x80...0xBF, 2)
        case 0xF4: (first, more) = (0x80...0x8F, 2)
        default: throw syntax("invalid UTF-8", at: index - 1)
        }
        guard index + more < bytes.count else { throw truncated() }
        guard first.contains(bytes[index]) else { throw syntax("invalid UTF-8", at: index) }
        index += 1
        for _ in 0..<more {
            guard (0x80...0xBF).contains(bytes[index]) else { throw syntax("invalid UTF-8", at: index) }
            index += 1
        }
    }

    /// Scans a string and returns its decoded UTF-8 bytes.
    ///
    /// ``skipString()`` checks it; the escapes, if any, are then decoded from the checked bytes.
    mutating func string() throws(JSONSyntaxError) -> [UInt8] {
        let (range, escaped) = try skipString()
        return escaped ? try decoded(range) : Array(bytes[range])
    }

    /// The decoded bytes of a string's contents at `range`, which ``skipString()`` checked and
    /// found escapes in.
    mutating func decoded(_ range: Range<Int>) throws(JSONSyntaxError) -> [UInt8] {
        let end = index
        defer { index = end }
        index = range.lowerBound
        var out: [UInt8] = []
        while index < range.upperBound {
            let c = bytes[index]
            index += 1
            guard c == UInt8(ascii: "\\") else {
                out.append(c)
                continue
            }
            let e = bytes[index]
            index += 1
            switch e {
            case UInt8(ascii: "b"): out.append(0x08)
            case UInt8(ascii: "f"): out.append(0x0C)
            case UInt8(ascii: "n"): out.append(0x0A)
            case UInt8(ascii: "r"): out.append(0x0D)
            case UInt8(ascii: "t"): out.append(0x09)
            case UInt8(ascii: "u"):
                var unit = try hex4()
                if (0xD800...0xDBFF).contains(unit), index + 1 < range.upperBound,
                    bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u") {
                    index += 2
                    let low = try hex4()
                    if (0xDC00...0xDFFF).contains(low) {
                        unit = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00)
                    } else {
                        out.append(contentsOf: Array(String(Unicode.Scalar(0xFFFD)!).utf8))
                        unit = low
                    }
                }
                let scalar = Unicode.Scalar(unit) ?? Unicode.Scalar(0xFFFD)!
                out.append(contentsOf: Array(String(scalar).utf8))
            default:
                // `"`, `\\` and `/` stand for themselves; skipString() let no other escape through.
                out.append(e)
            }
        }
        return out
    }

    mutating func hex4() throws(JSONSyntaxError) -> UInt32 {
        guard index + 4 <= bytes.count else { throw truncated() }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let c = bytes[index]
            let digit: UInt32
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = UInt32(c - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = UInt32(c - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = UInt32(c - UInt8(ascii: "A") + 10)
            default: throw syntax("invalid \\u escape")
            }
            value = value * 16 + digit
            index += 1
        }
        return value
    }

    mutating func number() throws(JSONSyntaxError) {
        if peek() == UInt8(ascii: "-") { index += 1 }
        guard let first = peek() else { throw truncated() }
        if first == UInt8(ascii: "0") {
            index += 1
        } else if isDigit(first) {
            skipDigits()
        } else {
            throw syntax("invalid number")
        }
        if peek() == UInt8(ascii: ".") {
            index += 1
            guard let d = peek() else { throw truncated() }
            guard isDigit(d) else { throw syntax("invalid number") }
            skipDigits()
        }
        if peek() == UInt8(ascii: "e") || peek() == UInt8(ascii: "E") {
            index += 1
            if peek() == UInt8(ascii: "+") || peek() == UInt8(ascii: "-") { index += 1 }
            guard let d = peek() else { throw truncated() }
            guard isDigit(d) else { throw syntax("invalid number") }
            skipDigits()
        }
    }

    mutating func literal(_ word: StaticString) throws(JSONSyntaxError) {
        let expected = UnsafeBufferPointer(start: word.utf8Start, count: word.utf8CodeUnitCount)
        for byte in expected {
            guard let c = peek() else { throw truncated() }
            guard c == byte else { throw syntax("invalid literal") }
            index += 1
        }
    }

    /// Whether `slice` holds exactly `expected`'s bytes.
    static func equal(_ slice: Slice<UnsafeBufferPointer<UInt8>>, _ expected: [UInt8]) -> Bool {
        guard slice.count == expected.count else { return false }
        guard let base = slice.base.baseAddress, !expected.isEmpty else { return true }
        return expected.withUnsafeBufferPointer { memcmp(base + slice.startIndex, $0.baseAddress!, expected.count) == 0 }
    }

    func peek() -> UInt8? { index < bytes.count ? bytes[index] : nil }

    mutating func skipWhitespace() {
        while let c = peek(), c == 0x20 || c == 0x0A || c == 0x0D || c == 0x09 { index += 1 }
    }

    mutating func skipDigits() {
        while let c = peek(), isDigit(c) { index += 1 }
    }

    func isDigit(_ c: UInt8) -> Bool { c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9") }

    func describe(_ c: UInt8) -> String {
        (0x21...0x7E).contains(c) ? "'\(Character(Unicode.Scalar(c)))'" : "byte 0x\(String(c, radix: 16))"
    }

    func truncated() -> JSONSyntaxError {
        JSONSyntaxError(message: "unexpected end of body after \(bytes.count) bytes (truncated?)")
    }

    func syntax(_ message: String, at offset: Int? = nil) -> JSONSyntaxError {
        JSONSyntaxError(message: "\(message) at byte \(offset ?? index)")
    }

    func error(_ item: Int, _ message: String, at offset: Int? = nil) -> JSONSyntaxError {
        guard peek() != nil else { return truncated() }
        return JSONSyntaxError(message: "item \(item): \(message) at byte \(offset ?? index)")
    }
}
