import Foundation

/// One link of an RFC 8288 `Link` header.
public struct WebLink: Sendable, Hashable {
    /// The target, resolved against the request URL.
    public var target: URL
    /// The relation types (`rel="next prev"` gives two), lower-cased.
    public var relations: [String]
    /// Other parameters, keys lower-cased, values unquoted.
    public var parameters: [String: String]
}

/// Parses `Link` headers (RFC 8288 §3): `<uri>; rel="next"; title="…", <uri2>; rel=prev`.
///
/// Quoted strings may contain commas and semicolons; relative targets are resolved against the
/// request URL; unparseable links are skipped rather than failing the page, because a page is
/// still usable without them and the absence of `next` already has a meaning (the end).
public enum LinkHeader {
    /// The links of every `Link` header of a response, in order; `base` is the request URL.
    public static func parse(_ values: [String], base: URL) -> [WebLink] {
        values.flatMap { parse($0, base: base) }
    }

    /// The links of one `Link` header value; relative targets are resolved against `base`, the request URL.
    public static func parse(_ value: String, base: URL) -> [WebLink] {
        var scanner = Scanner(Array(value.utf8))
        var links: [WebLink] = []
        while true {
            scanner.skip { isBlank($0) || $0 == UInt8(ascii: ",") }
            guard !scanner.isAtEnd else { break }
            guard scanner.peek == UInt8(ascii: "<") else {
                scanner.skipPastLinkSeparator()
                continue
            }
            scanner.advance()
            let reference = scanner.take { $0 != UInt8(ascii: ">") }
            guard scanner.peek == UInt8(ascii: ">") else { break }
            scanner.advance()
            var parameters: [String: String] = [:]
            var relations: [String] = []
            while true {
                scanner.skip(while: isBlank)
                guard scanner.peek == UInt8(ascii: ";") else { break }
                scanner.advance()
                scanner.skip(while: isBlank)
                let key = scanner.take { $0 != UInt8(ascii: "=") && $0 != UInt8(ascii: ";") && $0 != UInt8(ascii: ",") && !isBlank($0) }.lowercased()
                scanner.skip(while: isBlank)
                var parameterValue = ""
                if scanner.peek == UInt8(ascii: "=") {
                    scanner.advance()
                    scanner.skip(while: isBlank)
                    parameterValue = scanner.peek == UInt8(ascii: "\"") ? scanner.takeQuoted() : scanner.take { $0 != UInt8(ascii: ";") && $0 != UInt8(ascii: ",") && !isBlank($0) }
                }
                guard !key.isEmpty else { continue }
                // RFC 8288 §3.3: only the first rel parameter counts.
                if key == "rel", parameters["rel"] == nil {
                    relations = parameterValue.split(whereSeparator: { $0 == " " || $0 == "\t" }).map { $0.lowercased() }
                }
                if parameters[key] == nil { parameters[key] = parameterValue }
            }
            if let target = resolve(trimmingBlanks(reference), against: base) {
                links.append(WebLink(target: target, relations: relations, parameters: parameters))
            }
        }
        return links
    }

    /// `reference` as an absolute URL. Servers send absolute targets, which need no base: parsed
    /// once, instead of once against the base and again for the absolute form.
    private static func resolve(_ reference: String, against base: URL) -> URL? {
        if hasScheme(reference) { return URL(string: reference) }
        return URL(string: reference, relativeTo: base)?.absoluteURL
    }

    /// Whether `reference` starts with a scheme (RFC 3986 §3.1: a letter, then letters, digits,
    /// `+`, `-` or `.`, then `:`), which makes it an absolute URI.
    package static func hasScheme(_ reference: String) -> Bool {
        var bytes = reference.utf8.makeIterator()
        guard let first = bytes.next(), isLetter(first) else { return false }
        while let byte = bytes.next() {
            if byte == UInt8(ascii: ":") { return true }
            guard isLetter(byte) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
                || byte == UInt8(ascii: "+") || byte == UInt8(ascii: "-") || byte == UInt8(ascii: ".")
            else { return false }
        }
        return false
    }

    /// `text` without leading and trailing spaces and tabs, the only blanks a header holds.
    private static func trimmingBlanks(_ text: String) -> String {
        let bytes = text.utf8
        guard let first = bytes.firstIndex(where: { !isBlank($0) }), let last = bytes.lastIndex(where: { !isBlank($0) }) else { return "" }
        if first == bytes.startIndex, last == bytes.index(before: bytes.endIndex) { return text }
        return String(text[first...last])
    }

    private static func isBlank(_ byte: UInt8) -> Bool {
        byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t")
    }

    private static func isLetter(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte | 0x20)
    }

    /// The first link with relation `relation`.
    public static func first(_ relation: String, in links: [WebLink]) -> URL? {
        links.first { $0.relations.contains(relation) }?.target
    }

    /// The link to newer items: `rel="prev"`, or its older spelling `rel="previous"` (HTML 4,
    /// still sent by some servers).
    public static func previous(in links: [WebLink]) -> URL? {
        links.first { $0.relations.contains("prev") || $0.relations.contains("previous") }?.target
    }

    /// Scans the header's UTF-8: every delimiter is ASCII, so a multi-byte character is only
    /// ever copied through, never split.
    private struct Scanner {
        let bytes: [UInt8]
        var index = 0

        init(_ bytes: [UInt8]) { self.bytes = bytes }

        var isAtEnd: Bool { index >= bytes.count }
        var peek: UInt8? { isAtEnd ? nil : bytes[index] }
        mutating func advance() { index += 1 }

        mutating func skip(while predicate: (UInt8) -> Bool) {
            while let c = peek, predicate(c) { index += 1 }
        }

        mutating func take(while predicate: (UInt8) -> Bool) -> String {
            let start = index
            while let c = peek, predicate(c) { index += 1 }
            return String(decoding: bytes[start..<index], as: UTF8.self)
        }

        /// A quoted-string with backslash escapes; the scanner starts on the opening quote.
        mutating func takeQuoted() -> String {
            advance()
            var out: [UInt8] = []
            while let c = peek {
                index += 1
                if c == UInt8(ascii: "\"") { break }
                if c == UInt8(ascii: "\\"), let escaped = peek {
                    out.append(escaped)
                    index += 1
                } else {
                    out.append(c)
                }
            }
            return String(decoding: out, as: UTF8.self)
        }

        /// Recovers from garbage by skipping to the next top-level comma.
        mutating func skipPastLinkSeparator() {
            while let c = peek {
                if c == UInt8(ascii: "\"") { _ = takeQuoted(); continue }
                index += 1
                if c == UInt8(ascii: ",") { return }
            }
        }
    }
}
