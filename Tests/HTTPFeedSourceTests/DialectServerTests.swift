import Foundation
import Testing
import TestSupport

/// `Oracle/dialects.py` checked against itself: walking a dialect's pages the way its API
/// documents yields exactly the ids `/admin/ids` lists, newest first, none twice and none missing,
/// and its controls do what they say. Later tests compare syncd's mirror with that list, so a
/// difference there must be syncd's, not the oracle's.
@Suite(.timeLimit(.minutes(2)))
struct DialectServerTests {
    /// A page's body decoded, failing with the status and body when it is not a success.
    func page<T: Decodable>(_ type: T.Type, _ url: String) async throws -> T {
        let response = try await rawRequest(url)
        try #require(response.status == 200, "\(url): \(response.status) \(response.body)")
        return try JSONDecoder().decode(T.self, from: Data(response.body.utf8))
    }

    /// A walk's ids against the server's truth; duplicates named apart, as they are the usual slip.
    func expectTruth(_ walked: [String], _ server: DialectServer, _ dialect: String, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let truth = try await server.ids(dialect)
        #expect(Set(walked).count == walked.count, "\(dialect): an id came twice", sourceLocation: sourceLocation)
        #expect(walked == truth, "\(dialect): the walk is not the truth", sourceLocation: sourceLocation)
    }

    /// A cursor as a query value: Slack's are base64, whose `+`, `/` and `=` must not be read raw.
    func escaped(_ value: String) -> String {
        value.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
    }

    @Test("Stripe: starting_after walks to the oldest; ending_before brings the adjacent newer items")
    func stripe() async throws {
        struct Charge: Decodable { var id: String }
        struct List: Decodable { var has_more: Bool; var data: [Charge] }
        try await withDialectServer(items: 45) { server in
            var walked: [String] = []
            var url = server.url("/v1/charges?limit=20").absoluteString
            while true {
                let list = try await page(List.self, url)
                walked += list.data.map(\.id)
                guard list.has_more, let last = list.data.last else { break }
                url = server.url("/v1/charges?limit=20&starting_after=\(last.id)").absoluteString
            }
            try await expectTruth(walked, server, "stripe")

            try await server.add(25)
            var newer: [String] = []
            var before = walked[0]
            while true {
                let list = try await page(List.self, server.url("/v1/charges?limit=10&ending_before=\(before)").absoluteString)
                newer = list.data.map(\.id) + newer
                guard list.has_more, let first = list.data.first else { break }
                before = first.id
            }
            #expect(newer.count == 25)
            try await expectTruth(newer + walked, server, "stripe")
        }
    }

    @Test("Slack: next_cursor walks to the oldest; oldest= gives the newest page above it")
    func slack() async throws {
        struct Message: Decodable { var ts: String }
        struct Metadata: Decodable { var next_cursor: String }
        struct History: Decodable { var ok: Bool; var messages: [Message]; var has_more: Bool; var response_metadata: Metadata? }
        try await withDialectServer(items: 45) { server in
            func walk(_ query: String) async throws -> [String] {
                var walked: [String] = []
                var cursor = ""
                while true {
                    let history = try await page(History.self, server.url("/api/conversations.history?channel=C123&limit=7\(query)" + (cursor.isEmpty ? "" : "&cursor=\(escaped(cursor))")).absoluteString)
                    #expect(history.ok)
                    walked += history.messages.map(\.ts)
                    cursor = history.response_metadata?.next_cursor ?? ""
                    #expect(history.has_more == !cursor.isEmpty)
                    if cursor.isEmpty { return walked }
                }
            }
            let walked = try await walk("")
            try await expectTruth(walked, server, "slack")
            // Items 45...31 lie above item 30; the first page is still 45...39, not 37...31.
            let above = try await walk("&oldest=\(walked[15])")
            #expect(above == Array(walked[0..<15]))
            let first = try await page(History.self, server.url("/api/conversations.history?channel=C123&limit=7&oldest=\(walked[15])").absoluteString)
            #expect(first.messages.map(\.ts) == Array(walked[0..<7]))
            // Slack's failures are HTTP 200 too, with no messages at all.
            struct Failure: Decodable { var ok: Bool; var error: String }
            let unknown = try await page(Failure.self, server.url("/api/conversations.history?channel=C999").absoluteString)
            #expect(!unknown.ok && unknown.error == "channel_not_found")
        }
    }

    @Test("JSON:API cursor pagination: links.next to the oldest, links.prev back from there")
    func jsonAPI() async throws {
        struct Resource: Decodable { var id: String }
        struct Links: Decodable { var prev: String?; var next: String? }
        struct Document: Decodable { var data: [Resource]; var links: Links }
        try await withDialectServer(items: 45) { server in
            var walked: [String] = []
            var url: String? = server.url("/jsonapi/articles?page%5Bsize%5D=20").absoluteString
            var last: Document?
            while let next = url {
                let document = try await page(Document.self, next)
                if walked.isEmpty { #expect(document.links.prev == nil, "nothing is newer than the head page") }
                walked += document.data.map(\.id)
                last = document
                url = document.links.next
            }
            try await expectTruth(walked, server, "jsonapi")

            var back = try #require(last).data.map(\.id)
            url = try #require(last).links.prev
            while let prev = url {
                let document = try await page(Document.self, prev)
                back = document.data.map(\.id) + back
                url = document.links.prev
            }
            try await expectTruth(back, server, "jsonapi")
        }
    }

    @Test("Atom (RFC 5005): the subscription document, then prev-archive to the first archive")
    func atom() async throws {
        try await withDialectServer(items: 45) { server in
            var walked: [String] = []
            var sizes: [Int] = []
            var url: String? = server.url("/atom/current.xml").absoluteString
            while let next = url {
                let response = try await rawRequest(next)
                try #require(response.status == 200, "\(next): \(response.status)")
                #expect(response.header("Content-Type")?.hasPrefix("application/atom+xml") == true)
                let entries = response.body.matches(of: /<entry><id>([^<]+)<\/id>/).map { String($0.output.1) }
                walked += entries
                sizes.append(entries.count)
                #expect(response.body.contains("<fh:archive/>") == (next != server.url("/atom/current.xml").absoluteString))
                url = response.body.firstMatch(of: /<link rel="prev-archive" href="([^"]+)"\/>/).map { String($0.output.1) }
            }
            #expect(sizes == [5, 20, 20], "the current document holds what is above the last complete archive")
            try await expectTruth(walked, server, "atom")
        }
    }

    @Test("Controls: requests are recorded, down closes unanswered, hold waits for release")
    func controls() async throws {
        try await withDialectServer(items: 45) { server in
            try await server.clearRequests()
            let headerCursor = try await rawRequest(server.url("/headercursor/items?limit=5").absoluteString)
            #expect(headerCursor.header("X-Next-Cursor") != nil)
            #expect(try await server.requests() == [.init(path: "/headercursor/items", query: "limit=5")])

            try await server.down()
            await #expect(throws: (any Error).self) { try await rawRequest(server.url("/pages/items").absoluteString) }
            try await server.up()
            #expect(try await rawRequest(server.url("/pages/items").absoluteString).status == 200)

            try await server.hold(1)
            let url = server.url("/offset/items?limit=1").absoluteString
            let held = BoundedTask { try await rawRequest(url).body }
            try await waitUntil("the request is held", interval: .milliseconds(20)) { try await server.held() == 1 }
            try await server.add(1)
            try await server.release()
            struct Offset: Decodable { struct Item: Decodable { var id: String }; var total: Int; var items: [Item] }
            let answer = try JSONDecoder().decode(Offset.self, from: Data(try await held.value("the held request").utf8))
            #expect(answer.total == 46 && answer.items.map(\.id) == ["46"], "answered as of its release")
        }
    }
}
