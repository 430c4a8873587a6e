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

    @Test("invalid UTF-8 is rejected")
    func invalidUTF8() {
        let bytes: [UInt8] = Array(#"[{"id":"a","t":""#.utf8) + [0xC3, 0x28] + Array(#""}]"#.utf8)
        #expect(throws: FeedError.self) { try parser.parse(bytes) }
    }
}
