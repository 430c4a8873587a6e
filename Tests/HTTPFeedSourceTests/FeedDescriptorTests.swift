import Foundation
@testable import HTTPFeedSource
import SyncCore
import Testing
import TestSupport

/// The pieces of a ``FeedDescriptor`` apart from any server: JSON pointers, reading envelopes
/// (items, nested ids, body values, finding the items), and where each way of paging leads.
@Suite("Feed descriptors: pointers, envelopes and cursors")
struct FeedDescriptorTests {
    private func pointer(_ text: String) throws -> JSONPointer { try JSONPointer(text) }

    @Test("JSON pointers: RFC 6901 tokens and escapes, and the mistakes refused with the fix")
    func pointers() throws {
        #expect(try pointer("").tokens == [])
        #expect(try pointer("/feed").tokens == ["feed"])
        #expect(try pointer("/post/uri").tokens == ["post", "uri"])
        #expect(try pointer("/a~1b/~0c/0").tokens == ["a/b", "~c", "0"])
        #expect(try pointer("/a~1b/~0c/0").description == "/a~1b/~0c/0")
        #expect(try pointer("/").tokens == [""])
        do {
            _ = try JSONPointer("feed")
            Issue.record("a pointer without '/' was taken")
        } catch {
            #expect(error.message.contains("\"/feed\""))
        }
        #expect(throws: FeedError.self) { try JSONPointer("/a~2") }
        #expect(throws: FeedError.self) { try JSONPointer("/a~") }
    }

    @Test("a Bluesky-style envelope: items at /feed, each id at /post/uri, the cursor beside them, bytes kept")
    func blueskyEnvelope() throws {
        let first = #"{"post":{"uri":"at://did:plc:a/app.bsky.feed.post/3k2","record":{"text":"hi \"there\""},"indexedAt":"2026-11-27T10:00:00Z"}}"#
        let second = #"{"post":{"record":{},"uri":"at://did:plc:a/app.bsky.feed.post/3k1","indexedAt":"2026-11-27T09:00:00Z"}}"#
        let body = Data(#"{"cursor":"MTcwMDAw+/=","feed":[\#(first) , \#(second)]}"#.utf8)
        let parser = JSONPageParser(id: try pointer("/post/uri"), updated: try pointer("/post/indexedAt"))
        let page = try parser.read(body, items: try pointer("/feed"), values: [try pointer("/cursor"), try pointer("/missing")])
        #expect(page.items.map(\.id) == ["at://did:plc:a/app.bsky.feed.post/3k2", "at://did:plc:a/app.bsky.feed.post/3k1"])
        #expect(page.items.map(\.payload) == [Data(first.utf8), Data(second.utf8)])
        #expect(page.items.map(\.version) == ["2026-11-27T10:00:00Z", "2026-11-27T09:00:00Z"])
        #expect(page.values == [try pointer("/cursor"): .string("MTcwMDAw+/=")])
    }

    @Test("values of every kind, nested and in arrays; an escaped member name is its decoded name")
    func values() throws {
        let body = Data(#"{"data":[{"id":7}],"has_more":false,"meta":{"total":120,"next":null,"a\/b":"x"},"links":[{"href":"u"}],"obj":{"k":[1]}}"#.utf8)
        let wanted = try ["/has_more", "/meta/total", "/meta/next", "/meta/a~1b", "/links/0/href", "/obj"].map(pointer)
        let page = try JSONPageParser().read(body, items: try pointer("/data"), values: wanted)
        #expect(page.items.map(\.id) == ["7"])
        #expect(page.values[wanted[0]] == .bool(false))
        #expect(page.values[wanted[1]] == .number("120"))
        #expect(page.values[wanted[2]] == .null)
        #expect(page.values[wanted[3]] == .string("x"))
        #expect(page.values[wanted[4]] == .string("u"))
        #expect(page.values[wanted[5]] == .container)
    }

    @Test("items found under a common name, and a body that does not fit says what it holds and what to set")
    func findingItems() throws {
        let parser = JSONPageParser()
        #expect(try parser.read(Data(#"{"object":"list","data":[{"id":"ch_1"}],"has_more":true}"#.utf8), items: nil).itemsAt == pointer("/data"))
        #expect(try parser.read(Data(#"[{"id":"a"}]"#.utf8), items: nil).itemsAt == .root)
        #expect(try parser.read(Data(#"{"results":[],"next_cursor":null}"#.utf8), items: nil).items.isEmpty)
        func refusal(_ body: String, items: JSONPointer?) -> String {
            do {
                _ = try parser.read(Data(body.utf8), items: items)
                return "parsed"
            } catch {
                #expect(error.kind == .malformed)
                return error.message
            }
        }
        #expect(refusal(#"{"cursor":"x","posts_v2":[{"id":"1"}]}"#, items: nil).contains(#"the body is a JSON object with keys "cursor", "posts_v2": set items = "/posts_v2""#))
        #expect(refusal(#"{"feed":[{"id":"1"}],"cursor":"c"}"#, items: try pointer("/data")).contains(#"no array of items at "/data"; the body is a JSON object with keys "feed", "cursor": set items = "/feed""#))
        #expect(refusal(#"{"_embedded":{"things":[]},"_links":{}}"#, items: nil).contains(#"e.g. "/_embedded/items""#))
        #expect(refusal(#"[{"id":"1"}]"#, items: try pointer("/data")).contains(#"the body is a JSON array: set items = """#))
        #expect(refusal(#"{"feed":[{"post":{}}]}"#, items: try pointer("/feed")).contains("item 0 has no string or integer at /id"))
        #expect(refusal(#"{"data":[{"id":"1"},{"id":"1"}]}"#, items: nil).contains(#"id "1" appears twice"#))
        #expect(refusal(#"{"data":[{"id":"1"}]"#, items: nil).contains("truncated"))
        #expect(refusal(#"{"data":[1,2]}"#, items: nil).contains("expected an object"))
    }

    @Test("truncated and corrupted envelopes: a clear error, never a partial page", arguments: [UInt64(1), 2, 3])
    func fuzzEnvelopes(seed: UInt64) throws {
        var random = SeededRandomSource(seed: seed)
        let parser = JSONPageParser(id: try pointer("/post/uri"))
        let items = (0..<5).map { #"{"post":{"uri":"u\#($0)","text":"t \u00e9 \#($0)","n":[\#($0),{"x":null}]}}"# }
        let body = Array(#"{"feed":[\#(items.joined(separator: ","))],"cursor":"c1","more":true}"#.utf8)
        let cursor = try pointer("/cursor"), feed = try pointer("/feed")
        let whole = try parser.read(Data(body), items: feed, values: [cursor])
        #expect(whole.items.count == 5)
        for _ in 0..<400 {
            var bytes = body
            switch Int.random(in: 0..<3, using: &random) {
            case 0: bytes = Array(bytes.prefix(Int.random(in: 0..<bytes.count, using: &random)))
            case 1: bytes[Int.random(in: 0..<bytes.count, using: &random)] = UInt8.random(in: 0...255, using: &random)
            default: bytes.insert(UInt8.random(in: 0...255, using: &random), at: Int.random(in: 0...bytes.count, using: &random))
            }
            do {
                let page = try parser.read(Data(bytes), items: feed, values: [cursor])
                // A change that keeps the body valid JSON (inside a string, say) keeps the page whole.
                #expect(page.items.count == 5, "a partial page from \(String(decoding: bytes, as: UTF8.self))")
            } catch {
                #expect(error.kind == .malformed)
                #expect(error.message.hasPrefix("malformed page") || error.message == "page body is not valid UTF-8")
            }
        }
        for _ in 0..<200 {
            let noise = (0..<Int.random(in: 0..<64, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) }
            #expect(throws: FeedError.self) { try parser.read(Data(noise), items: nil) }
        }
    }

    @Test("random pointers read back as written", arguments: [UInt64(7)])
    func pointerRoundTrip(seed: UInt64) throws {
        var random = SeededRandomSource(seed: seed)
        let alphabet = Array("ab~/0 é\"")
        for _ in 0..<500 {
            let tokens = (0..<Int.random(in: 0..<4, using: &random)).map { _ in
                String((0..<Int.random(in: 0..<5, using: &random)).map { _ in alphabet[Int.random(in: 0..<alphabet.count, using: &random)] })
            }
            let written = JSONPointer(tokens: tokens).description
            #expect(try JSONPointer(written).tokens == tokens)
        }
    }

    // MARK: Cursors

    private func answer(_ url: String, ids: [String], values: [JSONPointer: JSONScalar] = [:], header: String? = nil) -> PageCursors.Answer {
        PageCursors.Answer(url: URL(string: url)!, items: ids.map { FeedItem(id: $0, payload: Data("{}".utf8)) }, values: values, links: [], cursorHeader: header)
    }

    @Test("each way to older pages, and the body's word that a page is the last")
    func olderCursors() throws {
        let feed = URL(string: "http://h/v1/list?limit=2")!
        func cursors(_ older: OlderPages, newer: NewerPages = .head, end: PageEnd = PageEnd()) -> PageCursors {
            PageCursors(descriptor: FeedDescriptor(older: older, newer: newer, end: end), feedURL: feed)
        }
        let hasMore = try pointer("/has_more"), total = try pointer("/total"), next = try pointer("/cursor")
        let stripe = cursors(.lastItemID(parameter: "starting_after"), newer: .idParameter("ending_before"), end: PageEnd(hasMore: hasMore))
        #expect(stripe.older(answer("http://h/v1/list?limit=2&ending_before=ch_9", ids: ["ch_8", "ch_7"], values: [hasMore: .bool(true)]))
                == "http://h/v1/list?limit=2&starting_after=ch_7")
        #expect(stripe.older(answer("http://h/v1/list?limit=2", ids: ["ch_2", "ch_1"], values: [hasMore: .bool(false)])) == nil)
        #expect(stripe.newer(answer("http://h/v1/list?limit=2&starting_after=ch_5", ids: ["ch_4", "ch_3"])) == "http://h/v1/list?limit=2&ending_before=ch_4")
        let offset = cursors(.offset(parameter: "offset"), end: PageEnd(total: total))
        #expect(offset.older(answer("http://h/v1/list?limit=2", ids: ["5", "4"], values: [total: .number("5")])) == "http://h/v1/list?limit=2&offset=2")
        #expect(offset.older(answer("http://h/v1/list?limit=2&offset=2", ids: ["3", "2"], values: [total: .number("5")])) == "http://h/v1/list?limit=2&offset=4")
        #expect(offset.older(answer("http://h/v1/list?limit=2&offset=4", ids: ["1"], values: [total: .number("5")])) == nil)
        #expect(cursors(.offset(parameter: "offset")).older(answer("http://h/v1/list?offset=6", ids: [])) == nil)
        let pages = cursors(.pageNumber(parameter: "page", first: 1))
        #expect(pages.older(answer("http://h/v1/list?limit=2", ids: ["a"])) == "http://h/v1/list?limit=2&page=2")
        #expect(pages.older(answer("http://h/v1/list?limit=2&page=2", ids: ["b"])) == "http://h/v1/list?limit=2&page=3")
        #expect(pages.older(answer("http://h/v1/list?limit=2&page=3", ids: [])) == nil)
        // A cursor's '+', '/' and '=' arrive as themselves.
        let body = cursors(.bodyCursor(next, parameter: "cursor"))
        #expect(body.older(answer("http://h/v1/list?limit=2", ids: ["a"], values: [next: .string("a+b/c=")])) == "http://h/v1/list?limit=2&cursor=a%2Bb/c%3D"
                || body.older(answer("http://h/v1/list?limit=2", ids: ["a"], values: [next: .string("a+b/c=")])) == "http://h/v1/list?limit=2&cursor=a%2Bb/c=")
        #expect(body.older(answer("http://h/v1/list?limit=2", ids: ["a"], values: [next: .string("")])) == nil)
        #expect(body.older(answer("http://h/v1/list?limit=2", ids: ["a"], values: [next: .null])) == nil)
        let header = cursors(.headerCursor(header: "X-Next-Cursor", parameter: "cursor"))
        #expect(header.older(answer("http://h/v1/list?limit=2&cursor=old", ids: ["a"], header: "new")) == "http://h/v1/list?limit=2&cursor=new")
        #expect(header.older(answer("http://h/v1/list?limit=2", ids: ["a"])) == nil)
        let url = cursors(.bodyURL(try pointer("/links/next")), newer: .bodyURL(try pointer("/links/prev")))
        let links: [JSONPointer: JSONScalar] = [try pointer("/links/next"): .string("/v1/list?page%5Bafter%5D=5"), try pointer("/links/prev"): .string("http://h/v1/list?page%5Bbefore%5D=6")]
        #expect(url.older(answer("http://h/v1/list", ids: ["6"], values: links)) == "http://h/v1/list?page%5Bafter%5D=5")
        #expect(url.newer(answer("http://h/v1/list", ids: ["6"], values: links)) == "http://h/v1/list?page%5Bbefore%5D=6")
        let jira = cursors(.bodyCursor(try pointer("/nextPageToken"), parameter: "nextPageToken"), end: PageEnd(isLast: try pointer("/isLast")))
        #expect(jira.older(answer("http://h/s", ids: ["1"], values: [try pointer("/nextPageToken"): .string("t"), try pointer("/isLast"): .bool(true)])) == nil)
    }
}
