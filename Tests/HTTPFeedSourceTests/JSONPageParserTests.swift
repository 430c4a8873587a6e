import Foundation
import HTTPFeedSource
import SyncCore
import Testing

@Suite("Page body parsing")
struct JSONPageParserTests {
    let parser = JSONPageParser()

    private func parse(_ text: String, idField: String = "id") throws(FeedError) -> [FeedItem] {
        try JSONPageParser(idField: idField).parse(Array(text.utf8))
    }

    private func malformed(_ text: String, idField: String = "id", sourceLocation: SourceLocation = #_sourceLocation) -> String? {
        do {
            let items = try parse(text, idField: idField)
            Issue.record("parsed \(items.count) items from a bad body", sourceLocation: sourceLocation)
            return nil
        } catch {
            #expect(error.kind == .malformed, sourceLocation: sourceLocation)
            return error.message
        }
    }

    @Test("items keep their bytes exactly: spacing, key order, escapes, numbers")
    func bytesPreserved() throws {
        let first = #"{ "text" : "caf\u00e9 \"q\" \/ \ud83c\udf89",  "id":"b", "n": -1.5e+3, "deep": {"a": [1, {"b": null}], "t": true} }"#
        let second = #"{"id":"a","x":[]}"#
        let items = try parse("\n [ \(first) ,\n\t\(second)\r\n] \n")
        #expect(items.map(\.id) == ["b", "a"])
        #expect(items[0].payload == Data(first.utf8))
        #expect(items[1].payload == Data(second.utf8))
    }

    @Test("ids: strings (escapes decoded) and integers as their digits; a configurable key")
    func ids() throws {
        #expect(try parse(#"[{"id":"x\u0041\n"}]"#).map(\.id) == ["xA\n"])
        #expect(try parse(#"[{"id":"\ud83c\udf89\/\"\\"},{"id":"\ud83cA"},{"id":"\ud83c\u0041B"}]"#).map(\.id)
                == ["🎉/\"\\", "\u{FFFD}A", "\u{FFFD}AB"])
        // Member names are compared decoded: an escaped spelling of the id key is the id key.
        #expect(try parse(#"[{"\u0069d":"e1","i\"d":"not it"}]"#).map(\.id) == ["e1"])
        #expect(try parse(#"[{"id":1296269},{"id":-3}]"#).map(\.id) == ["1296269", "-3"])
        #expect(try parse(#"[{"id":"ignored","uid":"u1","nested":{"uid":"no"}}]"#, idField: "uid").map(\.id) == ["u1"])
        #expect(try parse("[]").isEmpty)
        #expect(try parse(" [ ] ").isEmpty)
    }

    @Test("bad pages are rejected as a unit with a reason")
    func rejected() {
        #expect(malformed("")?.contains("empty") == true)
        #expect(malformed("<html>502</html>")?.contains("JSON array") == true)
        #expect(malformed(#"{"items":[]}"#)?.contains("JSON array") == true)
        #expect(malformed(#"[{"id":"1","text":"cut"#)?.contains("truncated") == true)
        #expect(malformed(#"[{"id":"1"},"#)?.contains("truncated") == true)
        #expect(malformed(#"[{"id":"1"}"#)?.contains("truncated") == true)
        #expect(malformed(#"[{"id":"1"}] trailing"#)?.contains("after the array") == true)
        #expect(malformed(#"[{"id":"1"} {"id":"2"}]"#) != nil)
        #expect(malformed(#"[{"id":"1"},]"#) != nil)
        #expect(malformed(#"[{"text":"no id"}]"#)?.contains("no \"id\"") == true)
        #expect(malformed(#"[{"id":""}]"#)?.contains("empty") == true)
        #expect(malformed(#"[{"id":1.5}]"#)?.contains("integer") == true)
        #expect(malformed(#"[{"id":null}]"#) != nil)
        #expect(malformed(#"[{"id":"1","id":"2"}]"#)?.contains("twice") == true)
        #expect(malformed(#"[{"id":"1"},{"id":"1"}]"#)?.contains("twice") == true)
        #expect(malformed(#"["not an object"]"#) != nil)
        #expect(malformed(#"[{"id":"1","v":tru}]"#) != nil)
        #expect(malformed(#"[{"id":"1","v":01}]"#) != nil)
        #expect(malformed("[{\"id\":\"1\",\"v\":\"raw\ttab\"}]") != nil)
        #expect(malformed(#"[{"id":"1","v":"\x"}]"#) != nil)
        #expect(malformed(#"[{"id":"1","v":"\u12G4"}]"#) != nil)
        #expect(malformed(#"[{"id":"1","v":"\u12"#)?.contains("truncated") == true)
        #expect(malformed(#"[{"i\qd":"1"}]"#)?.contains("invalid escape") == true)
        #expect(malformed("[{\"id\":\"1\",\"k\u{1}\":2}]")?.contains("control character") == true)
        #expect(malformed(String(repeating: "[", count: 300) + "]") != nil)
        #expect(malformed("[{\"id\":\"1\",\"d\":" + String(repeating: "[", count: 1000) + String(repeating: "]", count: 1000) + "}]")?.contains("nesting") == true)
    }

    @Test("a repeated id is found whatever the order of the page's ids")
    func repeatsInAnyOrder() {
        let orders = [["3", "2", "1", "2"], ["1", "3", "2", "3"], ["5", "4", "9", "4"], ["a", "b", "c", "a"], ["b", "a", "b"],
                      ["2", "2"], ["x", "y", "x", "z"], ["9", "10", "9"], ["caf\\u00e9", "cafe\\u0301", "caf\\u00e9"]]
        for ids in orders {
            let body = "[" + ids.map { #"{"id":"\#($0)"}"# }.joined(separator: ",") + "]"
            #expect(malformed(body)?.contains("twice") == true, "\(ids)")
        }
        // Distinct ids in any order, NFC and NFD spellings included, are all kept.
        for ids in [["3", "2", "1"], ["1", "2", "3"], ["2", "3", "1"], ["b", "a", "c", "d"], ["caf\\u00e9", "cafe\\u0301"], ["10", "9", "1"]] {
            let body = "[" + ids.map { #"{"id":"\#($0)"}"# }.joined(separator: ",") + "]"
            #expect(((try? parse(body)) ?? []).count == ids.count, "\(ids)")
        }
    }

    @Test("a Data body gives the same items, whose payloads are slices of it")
    func dataBody() throws {
        let text = #"[ {"id":"2","t":"é"} , {"id":"1"} ]"#
        var padded = Data("xx".utf8) + Data(text.utf8)
        padded = padded[2...]
        let items = try parser.parse(padded)
        #expect(items == (try parser.parse(Array(text.utf8))))
        #expect(items.map(\.payload) == [Data(#"{"id":"2","t":"é"}"#.utf8), Data(#"{"id":"1"}"#.utf8)])
        #expect(items.map { String(decoding: $0.payload, as: UTF8.self) } == [#"{"id":"2","t":"é"}"#, #"{"id":"1"}"#])
    }

    @Test("strings are stepped over eight bytes at a time: a byte that ends or breaks one is found at every offset and at the end")
    func stringBytesAtEveryOffset() throws {
        // Plain bytes run up to the byte under test at each offset of the eight-byte words the
        // scan reads, and the page ends at every distance after it.
        let plain = Array("abcdefghijklmnopqrstuvwxyz0123456789".utf8)
        for length in 0..<24 {
            let before = Array(plain.prefix(length))
            func item(_ text: [UInt8]) -> [UInt8] { Array(#"{"id":"1","t":""#.utf8) + text + Array(#""}"#.utf8) }
            func page(_ text: [UInt8]) -> [UInt8] { Array("[".utf8) + item(text) + Array("]".utf8) }

            // Bytes a string may hold as they are, the edges of each test among them.
            for byte: UInt8 in [0x20, 0x21, 0x23, 0x5B, 0x5D, 0x7E, 0x7F] {
                let text = before + [byte] + before
                #expect(try parser.parse(page(text)).first?.payload == Data(item(text)), "\(length) \(byte)")
            }
            // Escapes, multi-byte characters, and the decoded id behind the plain bytes.
            for text in [before + Array(#"\"\\\/\n\u00e9"#.utf8) + before, before + Array("é☕🎉".utf8) + before] {
                #expect(try parser.parse(page(text)).first?.payload == Data(item(text)), "\(length)")
            }
            let name = String(decoding: before, as: UTF8.self)
            let escapedID = try parser.parse(Array(#"[{"id":""#.utf8) + before + Array(#"\u0041"}]"#.utf8))
            #expect(escapedID.map(\.id) == [name + "A"], "\(length)")
            if length > 0 {
                #expect(try parse(#"[{"\#(name)":1,"id":"\#(name)"}]"#).map(\.id) == [name])
            }

            // Bytes that break a string: a control character, a byte that starts no character.
            for byte: UInt8 in [0x00, 0x01, 0x09, 0x0A, 0x1F] {
                #expect(malformed(String(decoding: page(before + [byte] + before), as: UTF8.self))?.contains("control character") == true,
                        "\(length) \(byte)")
            }
            for byte: UInt8 in [0x80, 0xBF, 0xC0, 0xFF] {
                #expect(throws: FeedError(.malformed, "page body is not valid UTF-8"), "\(length) \(byte)") {
                    try parser.parse(page(before + [byte] + before))
                }
            }
            // The body ends inside the string, after the plain bytes or after a lone backslash.
            let open = Array(#"[{"id":"1","t":""#.utf8) + before
            #expect(malformed(String(decoding: open, as: UTF8.self))?.contains("truncated") == true, "\(length)")
            #expect(malformed(String(decoding: open + Array("\\".utf8), as: UTF8.self))?.contains("truncated") == true, "\(length)")
        }
    }

    @Test("invalid UTF-8 is rejected")
    func invalidUTF8() {
        #expect(throws: FeedError.self) { try parser.parse(page(with: [0xC3, 0x28])) }
    }

    /// A page whose one item has `sequence` as the bytes of a string member.
    private func page(with sequence: [UInt8]) -> [UInt8] {
        Array(#"[{"id":"a","t":""#.utf8) + sequence + Array(#""}]"#.utf8)
    }

    @Test("UTF-8 in strings: every class of bad sequence is reported as such, every boundary of a good one is kept")
    func utf8Classes() throws {
        let bad: [[UInt8]] = [
            [0xC3, 0x28], [0xC0, 0x80], [0xC1, 0xBF], [0xE0, 0x80, 0x80], [0xE0, 0x9F, 0xBF], [0xED, 0xA0, 0x80],
            [0xED, 0xBF, 0xBF], [0xF0, 0x8F, 0xBF, 0xBF], [0xF4, 0x90, 0x80, 0x80], [0xF5, 0x80, 0x80, 0x80], [0x80], [0xBF],
            [0xFF], [0xFE], [0xE2, 0x82], [0xF0, 0x9F, 0x8E], [0xE2, 0x82, 0x41], [0xF0, 0x9F, 0x8E, 0x22],
        ]
        for sequence in bad {
            #expect(throws: FeedError(.malformed, "page body is not valid UTF-8"), "\(sequence)") { try parser.parse(page(with: sequence)) }
        }
        // Outside a string too, and at the very end of a body.
        #expect(throws: FeedError(.malformed, "page body is not valid UTF-8")) { try parser.parse(Array("[".utf8) + [0xFF]) }
        #expect(throws: FeedError(.malformed, "page body is not valid UTF-8")) { try parser.parse(page(with: []) + [0xE2, 0x82]) }
        let good: [String] = ["\u{80}", "\u{7FF}", "\u{800}", "\u{D7FF}", "\u{E000}", "\u{FFFF}", "\u{10000}", "\u{10FFFF}", "é€🎉"]
        for text in good {
            let items = try parser.parse(page(with: Array(text.utf8)))
            #expect(items.first?.payload == Data((#"{"id":"a","t":""# + text + #""}"#).utf8))
        }
        // Above ASCII but valid UTF-8 outside a string is still not JSON.
        #expect(throws: FeedError.self) { try parser.parse(Array("[é]".utf8)) }
    }

    @Test("UTF-8 in strings agrees with Swift's own validation over every two-byte sequence and lead bytes of longer ones")
    func utf8AgreesWithSwift() {
        var sequences: [[UInt8]] = []
        for a in 0x80...0xFF { for b in 0...0xFF { sequences.append([UInt8(a), UInt8(b)]) } }
        let edges: [UInt8] = [0x00, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xFF]
        for a in 0xE0...0xEF { for b in 0...0xFF { for c in edges { sequences.append([UInt8(a), UInt8(b), c]) } } }
        for a in 0xF0...0xF7 { for b in 0...0xFF { for c in edges { for d in [0x80, 0xBF, 0x41] as [UInt8] { sequences.append([UInt8(a), UInt8(b), c, d]) } } } }
        var disagreements: [[UInt8]] = []
        for sequence in sequences {
            let body = page(with: sequence)
            let valid = body.withUnsafeBufferPointer { String(validating: $0, as: UTF8.self) } != nil
            do {
                let items = try parser.parse(body)
                // A body that parses is valid UTF-8, and its bytes are kept.
                if !valid || items.first?.payload != Data(body.dropFirst().dropLast()) { disagreements.append(sequence) }
            } catch {
                // Invalid UTF-8 is always reported as such; valid UTF-8 that is all above ASCII
                // (a character, not a quote or a control byte) always parses.
                if !valid, error.message != "page body is not valid UTF-8" { disagreements.append(sequence) }
                if valid, sequence.allSatisfy({ $0 >= 0x80 }) { disagreements.append(sequence) }
            }
        }
        #expect(disagreements.count == 0, "first: \(disagreements.prefix(10))")
    }
}
