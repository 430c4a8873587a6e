import Foundation
import Testing
import Varlink

/// The control protocol reads JSON exactly as RFC 8259 writes it, and an error names the field.
@Suite("Strict JSON", .timeLimit(.minutes(3)))
struct StrictJSONTests {
    @Test(arguments: [
        "{\"a\": 1,}", "[1, 2,]", "{\"a\": 1, \"a\": 2}", "{\"a\": {\"b\": 1, \"b\": 1}}", "[01]", "[1.]", "[.5]", "[+1]",
        "[NaN]", "[Infinity]", "{'a': 1}", "{\"a\": 1} x", "[\"\u{01}\"]", "[\"\\ud800\"]", "[\"\\x41\"]", "// c\n{}",
        "[1e400]", "{\"a\" 1}", "[true false]", "",
    ])
    func rejects(_ text: String) {
        #expect(throws: StrictJSON.Failure.self) { try StrictJSON.parse(Array(text.utf8)) }
    }

    @Test func rejectsInvalidUTF8() {
        #expect(throws: StrictJSON.Failure.self) { try StrictJSON.parse([0x22, 0xFF, 0xFE, 0x22]) }
    }

    @Test func acceptsTheRFCGrammar() throws {
        let value = try StrictJSON.parse(Array(#" {"a": [1, -0, 1.5e3, -2E-2, true, false, null, "\u00e9\ud83d\ude00\n\/"], "b": {}} "#.utf8))
        #expect(value == ["a": [1, 0, .double(1500), .double(-0.02), true, false, nil, "é😀\n/"], "b": [:]])
        #expect(try StrictJSON.parse(Array("9223372036854775807".utf8)) == .int(Int64.max))
        #expect(try StrictJSON.parse(Array("9223372036854775808".utf8)) == .double(9_223_372_036_854_775_808))
    }

    @Test func failuresSayWhere() {
        do {
            _ = try StrictJSON.parse(Array(#"{"parameters": {"limit": 1,  "limit": 2}}"#.utf8))
            Issue.record("a duplicate member was accepted")
        } catch {
            #expect(error.reason == "duplicate member")
            #expect(error.path == ["parameters", "limit"])
        }
    }

    /// Over the socket: each bad `limit` is InvalidParameter `limit`, never `parameters` or a
    /// sentence; duplicates and trailing commas are refused; the connection goes on.
    @Test(arguments: [
        (#"{"method": "io.syncd.ListItems", "parameters": {"feed": "home", "limit": 1.5}}"#, "limit"),
        (#"{"method": "io.syncd.ListItems", "parameters": {"feed": "home", "limit": 1e300}}"#, "limit"),
        (#"{"method": "io.syncd.ListItems", "parameters": {"feed": "home", "limit": 9223372036854775808}}"#, "limit"),
        (#"{"method": "io.syncd.ListItems", "parameters": {"feed": "home", "limit": -3}}"#, "limit"),
        (#"{"method": "io.syncd.ListItems", "parameters": {"feed": "home", "limit": 1e400}}"#, "limit"),
        (#"{"method": "io.syncd.ListItems", "parameters": {"feed": "home", "limit": 1, "limit": 500}}"#, "limit"),
        (#"{"method": "io.syncd.ListItems", "parameters": {"feed": "home", "feed": "work"}}"#, "feed"),
        (#"{"method": "io.syncd.GetStatus", "method": "io.syncd.Refresh"}"#, "method"),
        (#"{"method": "io.syncd.GetStatus",}"#, "message is not valid JSON"),
        (#"{"method": "io.syncd.ListItems", "parameters": {"feed": "home",}}"#, "parameters"),
    ])
    func controlErrorsNameTheField(message: String, parameter: String) async throws {
        try await expectInvalidParameter(message, named: parameter)
    }
}
