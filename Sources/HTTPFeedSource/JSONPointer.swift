import Foundation
import SyncCore

/// An RFC 6901 JSON Pointer: where a value lies in a JSON document.
///
/// `""` is the whole document, `/feed` the member `feed` of the top-level object, `/post/uri` a
/// member of a member, `/data/0` the first element of an array. In a token, `~1` stands for `/`
/// and `~0` for `~`, so every member name can be reached.
public struct JSONPointer: Sendable, Hashable, CustomStringConvertible {
    /// The reference tokens, unescaped: `["post", "uri"]` for `/post/uri`; empty for the whole document.
    public let tokens: [String]

    /// Parses `text`, which must be empty or start with `/`, and whose every `~` is followed by
    /// `0` or `1`.
    public init(_ text: String) throws(FeedError) {
        if text.isEmpty {
            tokens = []
            return
        }
        guard text.hasPrefix("/") else {
            throw FeedError(.other, "JSON pointer \"\(text)\" must be empty or start with '/' (RFC 6901), e.g. \"/\(text)\"")
        }
        var parsed: [String] = []
        for raw in text.dropFirst().split(separator: "/", omittingEmptySubsequences: false) {
            var token = ""
            var characters = raw.makeIterator()
            while let character = characters.next() {
                guard character == "~" else {
                    token.append(character)
                    continue
                }
                switch characters.next() {
                case "0": token.append("~")
                case "1": token.append("/")
                default: throw FeedError(.other, "JSON pointer \"\(text)\": '~' must be followed by 0 or 1 (RFC 6901)")
                }
            }
            parsed.append(token)
        }
        tokens = parsed
    }

    /// A pointer made of `tokens` as they are (no escapes to undo).
    public init(tokens: [String]) {
        self.tokens = tokens
    }

    /// The whole document.
    public static let root = JSONPointer(tokens: [])

    /// Whether it names the whole document.
    public var isRoot: Bool { tokens.isEmpty }

    /// The pointer as written, with `~` and `/` inside tokens escaped.
    public var description: String {
        tokens.map { "/" + $0.replacingOccurrences(of: "~", with: "~0").replacingOccurrences(of: "/", with: "~1") }.joined()
    }
}
