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
        var scanner = Scanner(Array(value.unicodeScalars))
        var links: [WebLink] = []
        while true {
            scanner.skip { $0 == " " || $0 == "\t" || $0 == "," }
            guard !scanner.isAtEnd else { break }
            guard scanner.peek == "<" else {
                scanner.skipPastLinkSeparator()
                continue
            }
            scanner.advance()
            let reference = scanner.take { $0 != ">" }
            guard scanner.peek == ">" else { break }
            scanner.advance()
            var parameters: [String: String] = [:]
            var relations: [String] = []
            while true {
                scanner.skip { $0 == " " || $0 == "\t" }
                guard scanner.peek == ";" else { break }
                scanner.advance()
                scanner.skip { $0 == " " || $0 == "\t" }
                let key = scanner.take { $0 != "=" && $0 != ";" && $0 != "," && $0 != " " && $0 != "\t" }.lowercased()
                scanner.skip { $0 == " " || $0 == "\t" }
                var parameterValue = ""
                if scanner.peek == "=" {
                    scanner.advance()
                    scanner.skip { $0 == " " || $0 == "\t" }
                    parameterValue = scanner.peek == "\"" ? scanner.takeQuoted() : scanner.take { $0 != ";" && $0 != "," && $0 != " " && $0 != "\t" }
                }
                guard !key.isEmpty else { continue }
                // RFC 8288 §3.3: only the first rel parameter counts.
                if key == "rel", parameters["rel"] == nil {
                    relations = parameterValue.split(whereSeparator: { $0 == " " || $0 == "\t" }).map { $0.lowercased() }
                }
                if parameters[key] == nil { parameters[key] = parameterValue }
            }
            if let target = URL(string: reference.trimmingCharacters(in: .whitespaces), relativeTo: base)?.absoluteURL {
                links.append(WebLink(target: target, relations: relations, parameters: parameters))
            }
        }
        return links
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

    private struct Scanner {
        let scalars: [Unicode.Scalar]
        var index = 0

        init(_ scalars: [Unicode.Scalar]) { self.scalars = scalars }

        var isAtEnd: Bool { index >= scalars.count }
        var peek: Unicode.Scalar? { isAtEnd ? nil : scalars[index] }
        mutating func advance() { index += 1 }

        mutating func skip(while predicate: (Unicode.Scalar) -> Bool) {
            while let c = peek, predicate(c) { index += 1 }
        }

        mutating func take(while predicate: (Unicode.Scalar) -> Bool) -> String {
            var out = String.UnicodeScalarView()
            while let c = peek, predicate(c) {
                out.append(c)
                index += 1
            }
            return String(out)
        }

        /// A quoted-string with backslash escapes; the scanner starts on the opening quote.
        mutating func takeQuoted() -> String {
            advance()
            var out = String.UnicodeScalarView()
            while let c = peek {
                index += 1
                if c == "\"" { break }
                if c == "\\", let escaped = peek {
                    out.append(escaped)
                    index += 1
                } else {
                    out.append(c)
                }
            }
            return String(out)
        }

        /// Recovers from garbage by skipping to the next top-level comma.
        mutating func skipPastLinkSeparator() {
            while let c = peek {
                if c == "\"" { _ = takeQuoted(); continue }
                index += 1
                if c == "," { return }
            }
        }
    }
}
