/// A strict RFC 8259 reader for Varlink messages.
///
/// Control messages are untrusted input, and a lenient reader lets two programs see different
/// messages in the same bytes (`{"limit": 1, "limit": 500}`). This one accepts exactly the
/// RFC's grammar (no trailing commas, no comments, no leading zeros, no control characters or
/// invalid UTF-8 or lone surrogates in strings), rejects duplicate keys, bounds nesting, and
/// says where a problem is as a path of keys, so a reply can name the offending field.
public enum StrictJSON {
    /// Deeper nesting is refused (it would only cost stack; no Varlink message needs it).
    public static let maxDepth = 64

    /// Why a message was refused, and where: `path` is the keys (and array indices) leading to
    /// the offending value, empty at the top level.
    public struct Failure: Error, Sendable, Hashable, CustomStringConvertible {
        /// What is wrong, e.g. "duplicate key" or "nested too deeply".
        public var reason: String
        /// The keys and array indices leading to the offending value.
        public var path: [String]
        /// Byte offset of the problem.
        public var offset: Int

        /// The reason with its path and offset.
        public var description: String {
            path.isEmpty ? "\(reason) at byte \(offset)" : "\(reason) at \(path.joined(separator: ".")) (byte \(offset))"
        }
    }

    /// Parses one JSON text.
    public static func parse(_ bytes: some Collection<UInt8>) throws(Failure) -> JSONValue {
        var parser = Parser(bytes: Array(bytes))
        return try parser.document()
    }

    private struct Parser {
        let bytes: [UInt8]
        var index = 0
        var path: [String] = []

        init(bytes: [UInt8]) { self.bytes = bytes }

        func fail(_ reason: String) -> Failure {
            Failure(reason: reason, path: path, offset: index)
        }

        var current: UInt8? { index < bytes.count ? bytes[index] : nil }

        mutating func skipWhitespace() {
            while let byte = current, byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D { index += 1 }
        }

        mutating func expect(_ byte: UInt8, _ what: String) throws(Failure) {
            guard current == byte else { throw fail("expected \(what)") }
            index += 1
        }

        mutating func document() throws(Failure) -> JSONValue {
            skipWhitespace()
            let value = try value(depth: 0)
            skipWhitespace()
            guard index == bytes.count else { throw fail("unexpected data after the JSON value") }
            return value
        }

        mutating func value(depth: Int) throws(Failure) -> JSONValue {
            guard depth < StrictJSON.maxDepth else { throw fail("nested deeper than \(StrictJSON.maxDepth)") }
            guard let byte = current else { throw fail("unexpected end of input") }
            switch byte {
            case UInt8(ascii: "{"): return try object(depth: depth)
            case UInt8(ascii: "["): return try array(depth: depth)
            case UInt8(ascii: "\""): return .string(try string())
            case UInt8(ascii: "t"): try literal("true"); return .bool(true)
            case UInt8(ascii: "f"): try literal("false"); return .bool(false)
            case UInt8(ascii: "n"): try literal("null"); return .null
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try number()
            default: throw fail("unexpected character")
            }
        }

        mutating func literal(_ word: String) throws(Failure) {
            for byte in word.utf8 {
                guard current == byte else { throw fail("invalid literal") }
                index += 1
            }
        }

        mutating func object(depth: Int) throws(Failure) -> JSONValue {
            index += 1
            var members: [String: JSONValue] = [:]
            skipWhitespace()
            if current == UInt8(ascii: "}") {
                index += 1
                return .object(members)
            }
            while true {
                skipWhitespace()
                guard current == UInt8(ascii: "\"") else {
                    throw fail(current == UInt8(ascii: "}") ? "trailing comma in object" : "expected a member name")
                }
                let key = try string()
                skipWhitespace()
                try expect(UInt8(ascii: ":"), "':' after a member name")
                skipWhitespace()
                path.append(key)
                if members[key] != nil { throw fail("duplicate member") }
                members[key] = try value(depth: depth + 1)
                path.removeLast()
                skipWhitespace()
                switch current {
                case UInt8(ascii: ","): index += 1
                case UInt8(ascii: "}"): index += 1; return .object(members)
                default: throw fail("expected ',' or '}' in object")
                }
            }
        }

        mutating func array(depth: Int) throws(Failure) -> JSONValue {
            index += 1
            var elements: [JSONValue] = []
            skipWhitespace()
            if current == UInt8(ascii: "]") {
                index += 1
                return .array(elements)
            }
            while true {
                skipWhitespace()
                if current == UInt8(ascii: "]") { throw fail("trailing comma in array") }
                path.append(String(elements.count))
                elements.append(try value(depth: depth + 1))
                path.removeLast()
                skipWhitespace()
                switch current {
                case UInt8(ascii: ","): index += 1
                case UInt8(ascii: "]"): index += 1; return .array(elements)
                default: throw fail("expected ',' or ']' in array")
                }
            }
        }

        mutating func string() throws(Failure) -> String {
            index += 1
            var utf8: [UInt8] = []
            while true {
                guard let byte = current else { throw fail("unterminated string") }
                index += 1
                switch byte {
                case UInt8(ascii: "\""):
                    guard let text = String(validating: utf8, as: UTF8.self) else { throw fail("string is not valid UTF-8") }
                    return text
                case UInt8(ascii: "\\"):
                    try escape(into: &utf8)
                case 0x00..<0x20:
                    throw fail("control character in string")
                default:
                    utf8.append(byte)
                }
            }
        }

        mutating func escape(into utf8: inout [UInt8]) throws(Failure) {
            guard let byte = current else { throw fail("unterminated escape") }
            index += 1
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): utf8.append(byte)
            case UInt8(ascii: "b"): utf8.append(0x08)
            case UInt8(ascii: "f"): utf8.append(0x0C)
            case UInt8(ascii: "n"): utf8.append(0x0A)
            case UInt8(ascii: "r"): utf8.append(0x0D)
            case UInt8(ascii: "t"): utf8.append(0x09)
            case UInt8(ascii: "u"):
                var code = try hex4()
                if (0xD800...0xDBFF).contains(code) {
                    guard current == UInt8(ascii: "\\"), index + 1 < bytes.count, bytes[index + 1] == UInt8(ascii: "u") else {
                        throw fail("unpaired surrogate")
                    }
                    index += 2
                    let low = try hex4()
                    guard (0xDC00...0xDFFF).contains(low) else { throw fail("unpaired surrogate") }
                    code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                } else if (0xDC00...0xDFFF).contains(code) {
                    throw fail("unpaired surrogate")
                }
                guard let scalar = Unicode.Scalar(code) else { throw fail("invalid \\u escape") }
                utf8.append(contentsOf: Array(String(Character(scalar)).utf8))
            default:
                throw fail("invalid escape")
            }
        }

        mutating func hex4() throws(Failure) -> UInt32 {
            var code: UInt32 = 0
            for _ in 0..<4 {
                guard let byte = current, let digit = Self.hexValue(byte) else { throw fail("invalid \\u escape") }
                code = code << 4 | digit
                index += 1
            }
            return code
        }

        static func hexValue(_ byte: UInt8) -> UInt32? {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): UInt32(byte - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): UInt32(byte - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): UInt32(byte - UInt8(ascii: "A") + 10)
            default: nil
            }
        }

        mutating func digits() -> Int {
            let start = index
            while let byte = current, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) { index += 1 }
            return index - start
        }

        /// RFC 8259 numbers. Integers that fit stay integers; anything else is a double (a
        /// typed decoder then refuses it for an integer field, naming that field). A number
        /// too large for a double is refused here, with its path.
        mutating func number() throws(Failure) -> JSONValue {
            let start = index
            if current == UInt8(ascii: "-") { index += 1 }
            if current == UInt8(ascii: "0") {
                index += 1
                if let byte = current, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) { throw fail("leading zero in number") }
            } else if digits() == 0 {
                throw fail("invalid number")
            }
            var integral = true
            if current == UInt8(ascii: ".") {
                index += 1
                integral = false
                guard digits() > 0 else { throw fail("invalid number") }
            }
            if current == UInt8(ascii: "e") || current == UInt8(ascii: "E") {
                index += 1
                integral = false
                if current == UInt8(ascii: "+") || current == UInt8(ascii: "-") { index += 1 }
                guard digits() > 0 else { throw fail("invalid number") }
            }
            let text = String(decoding: bytes[start..<index], as: UTF8.self)
            if integral, let value = Int64(text) { return .int(value) }
            guard let value = Double(text), value.isFinite else { throw fail("number out of range") }
            return .double(value)
        }
    }
}
