import DemoFeedServer
import Foundation
import HTTPFeedSource
import SyncdTesting
import TestSupport
import Testing

@Suite("Demo feed server: protocol, admin API, lifecycle")
struct DemoFeedServerTests {
    @Test("pages newest first; max_id strictly older; next omitted at the end; prev carries min_id")
    func paging() async throws {
        try await withFeedServer(.init(feeds: [.init(name: "home", initialCount: 25)])) { server, _ in
            let url = try #require(server.feedURL("home", limit: 10))
            let first = try await rawRequest(url)
            #expect(first.status == 200)
            #expect(ids(first.body) == (16...25).reversed().map(id))
            let link = try #require(first.header("link"))
            #expect(link.contains("max_id=\(id(16))>; rel=\"next\""))
            #expect(link.contains("min_id=\(id(25))>; rel=\"prev\""))

            let last = try await rawRequest(url + "&max_id=\(id(6))")
            #expect(ids(last.body) == (1...5).reversed().map(id))
            #expect(last.header("link")?.contains("rel=\"next\"") == false)

            let beyond = try await rawRequest(url + "&max_id=\(id(1))")
            #expect(beyond.body.trimmingCharacters(in: .whitespacesAndNewlines) == "[]")
            #expect(beyond.header("link") == nil)
        }
    }

    @Test("min_id gives the items immediately newer (no gap); since_id the newest ones")
    func newer() async throws {
        try await withFeedServer(.init(feeds: [.init(name: "home", initialCount: 50)])) { server, _ in
            let url = try #require(server.feedURL("home", limit: 5))
            let minPage = try await rawRequest(url + "&min_id=\(id(10))")
            #expect(ids(minPage.body) == (11...15).reversed().map(id))
            let sincePage = try await rawRequest(url + "&since_id=\(id(10))")
            #expect(ids(sincePage.body) == (46...50).reversed().map(id))
            let caughtUp = try await rawRequest(url + "&min_id=\(id(50))")
            #expect(ids(caughtUp.body).isEmpty)
            #expect(caughtUp.header("link") == nil)
            let window = try await rawRequest(url + "&min_id=\(id(10))&max_id=\(id(13))")
            #expect(ids(window.body) == [id(12), id(11)])
        }
    }

    @Test("limit: default, clamped to the maximum, bad values rejected with a reason")
    func limit() async throws {
        let feed = FeedDefinition(name: "home", initialCount: 300, defaultLimit: 20, maxLimit: 100)
        try await withFeedServer(.init(feeds: [feed])) { server, _ in
            let base = try #require(server.feedURL("home"))
            #expect(ids(try await rawRequest(base).body).count == 20)
            #expect(ids(try await rawRequest(base + "?limit=1000").body).count == 100)
            let bad = try await rawRequest(base + "?limit=zero")
            #expect(bad.status == 400)
            #expect(bad.body.contains("limit"))
            #expect(try await rawRequest(base + "?limit=-1").status == 400)
            #expect(try await rawRequest(try #require(server.baseURL) + "/feeds/nope").status == 404)
        }
    }

    @Test("other query parameters survive in Link URLs; fault does not")
    func linkKeepsParameters() async throws {
        try await withFeedServer(.init(feeds: [.init(name: "home", initialCount: 30)])) { server, _ in
            let url = try #require(server.feedURL("home", limit: 5)) + "&only_media=true&fault=latency:1"
            let link = try #require(try await rawRequest(url).header("link"))
            #expect(link.contains("only_media=true"))
            #expect(!link.contains("fault"))
        }
    }

    @Test("the Mastodon-like path serves the same feed")
    func mastodonPath() async throws {
        try await withFeedServer(.init(feeds: [.init(name: "home", initialCount: 3)])) { server, _ in
            let a = try await rawRequest(try #require(server.feedURL("home")))
            let b = try await rawRequest(try #require(server.baseURL) + "/api/v1/timelines/home")
            #expect(ids(a.body) == ids(b.body))
            #expect(b.header("link")?.contains("/api/v1/timelines/home?") == true)
        }
    }

    @Test("gzip only when offered; the encoding is real gzip")
    func gzip() async throws {
        try await withFeedServer(.init(feeds: [.init(name: "home", initialCount: 10)])) { server, client in
            let url = try #require(server.feedURL("home"))
            let plain = try await rawRequest(url)
            #expect(plain.header("content-encoding") == nil)
            let zipped = try await rawRequest(url, headers: [("Accept-Encoding", "gzip")])
            #expect(zipped.header("content-encoding") == "gzip")
            #expect(try await rawRequest(url, headers: [("Accept-Encoding", "gzip;q=0")]).header("content-encoding") == nil)
            // The feed client offers gzip and decodes it to the same items.
            let page = try await server.source("home", client: client).fetchInitial()
            #expect(page.items.map(\.id) == ids(plain.body))
        }
    }

    @Test("admin API over HTTP: append items, script faults, read request counters")
    func adminAPI() async throws {
        try await withFeedServer(.init(feeds: [.init(name: "home", initialCount: 5), .init(name: "other", initialCount: 0)])) { server, _ in
            let base = try #require(server.baseURL)
            let appended = try await rawRequest(base + "/admin/feeds/home/items?count=7", method: .POST)
            #expect(appended.status == 200)
            #expect(appended.body.contains("\"count\":12"))
            #expect(try await server.items(feed: "home").count == 12)

            let scripted = try await rawRequest(base + "/admin/faults?fault=status:503&count=2&feed=home&kind=older", method: .POST)
            #expect(scripted.status == 200)
            #expect(try await rawRequest(base + "/admin/faults").body.contains("status:503"))
            // An initial request is not an older one: it is not faulted.
            #expect(try await rawRequest(base + "/feeds/home").status == 200)
            #expect(try await rawRequest(base + "/feeds/home?max_id=\(id(9))").status == 503)
            #expect(try await rawRequest(base + "/feeds/home?max_id=\(id(9))").status == 503)
            #expect(try await rawRequest(base + "/feeds/home?max_id=\(id(9))").status == 200)
            #expect(await server.pendingScriptedFaults().isEmpty)

            let summary = try await rawRequest(base + "/admin/feeds/home")
            #expect(summary.body.contains("\"requests\":4"))
            #expect(summary.body.contains("\"newest_id\":\"\(id(12))\""))
            #expect(await server.requestCount(feed: "home") == 4)
            #expect(await server.requestCount(feed: "other") == 0)
            let log = try await rawRequest(base + "/admin/feeds/home/requests")
            #expect(log.body.contains("\"kind\":\"older\""))
            #expect(log.body.contains("\"fault\":\"status:503\""))

            #expect(try await rawRequest(base + "/admin/faults?fault=bogus", method: .POST).status == 400)
            #expect(try await rawRequest(base + "/admin/faults?fault=reset&feed=nope", method: .POST).status == 404)
            #expect(try await rawRequest(base + "/admin/feeds/home/items?count=x", method: .POST).status == 400)
            #expect(try await rawRequest(base + "/admin/faults", method: .DELETE).status == 200)
            #expect(try await rawRequest(base + "/admin/requests", method: .DELETE).status == 200)
            #expect(await server.requestCount(feed: "home") == 0)
        }
    }

    @Test("without a request hook, as shipped: fault= is an ordinary parameter and there is no /admin/faults")
    func noHook() async throws {
        let server = try DemoFeedServer(configuration: .init(feeds: [.init(name: "home", initialCount: 30)]), logger: quietLogger)
        try await server.start()
        do {
            let base = try #require(server.baseURL)
            let page = try await rawRequest(try #require(server.feedURL("home", limit: 5)) + "&fault=status:503")
            #expect(page.status == 200)
            #expect(try #require(page.header("link")).contains("fault=status%3A503"))
            #expect(try await rawRequest(base + "/feeds/home?fault=bogus").status == 200)
            #expect(try await rawRequest(base + "/admin/faults?fault=status:503", method: .POST).status == 404)
            #expect(try await rawRequest(base + "/admin/feeds/home").body.contains("\"stalled\":0"))
            #expect(await server.requests(feed: "home").allSatisfy { $0.intervention == nil })
            await #expect(throws: DemoFeedServerError.self) { try await server.scriptFault(.init(.malformed)) }
            await server.stop()
        } catch {
            await server.stop()
            throw error
        }
    }

    @Test("a bad per-request fault spec is the client's error")
    func badFaultQuery() async throws {
        try await withFeedServer(.init(feeds: [.init(name: "home", initialCount: 5)])) { server, _ in
            let response = try await rawRequest(try #require(server.feedURL("home")) + "?fault=status:200")
            #expect(response.status == 400)
            #expect(response.body.contains("400...599"))
        }
    }

    @Test("feeds grow on their own over time")
    func growth() async throws {
        let feed = FeedDefinition(name: "live", initialCount: 0, itemsPerSecond: 200)
        try await withFeedServer(.init(feeds: [feed], tickInterval: .milliseconds(20))) { server, _ in
            // Waits for growth rather than timing it: the assertion is only that items appear.
            try await waitUntil("the live feed grew to 5 items") { try await server.items(feed: "live").count >= 5 }
            let items = try await server.items(feed: "live")
            #expect(items.map(\.id) == (1...items.count).map(id))
        }
    }

    @Test("stop() ends stalled requests and returns; the port is closed afterwards")
    func stopWithStalls() async throws {
        let server = try DemoFeedServer(configuration: .init(feeds: [.init(name: "home", initialCount: 5)]), faults: .init(), logger: quietLogger)
        let port = try await server.start()
        #expect(port > 0)
        let url = try #require(server.feedURL("home"))
        let stalled = BoundedTask { try? await rawRequest(url + "?fault=stall") }
        let stalledBody = BoundedTask { try? await rawRequest(url + "?fault=stall:body") }
        try await waitUntil("two requests stalled") { await server.stalledRequestCount() >= 2 }
        await server.stop()
        _ = try await stalled.value("the stalled request ended")
        _ = try await stalledBody.value("the request stalled in its body ended")
        await #expect(throws: (any Error).self) { try await rawRequest(url) }
        await server.stop()  // idempotent
    }

    @Test("starting twice is refused; a taken port is a clear error")
    func startErrors() async throws {
        try await withFeedServer(.init()) { server, _ in
            await #expect(throws: DemoFeedServerError.alreadyStarted) { try await server.start() }
            let port = try #require(server.port)
            let second = try DemoFeedServer(configuration: .init(port: port), logger: quietLogger)
            await #expect(throws: DemoFeedServerError.self) { try await second.start() }
        }
    }

    @Test("flag syntax: feeds and faults parse, round-trip and reject nonsense")
    func specs() throws {
        let feed = try FeedDefinition(spec: "home:500:2.5")
        #expect(feed.name == "home" && feed.initialCount == 500 && feed.itemsPerSecond == 2.5)
        #expect(throws: DemoFeedServerError.self) { try FeedDefinition(spec: "bad/name") }
        #expect(throws: DemoFeedServerError.self) { try FeedDefinition(spec: "home:-1") }
        let specs = ["status:503", "status:429:2", "status:503:date+3", "latency:250", "stall", "stall:body",
                     "malformed", "truncated", "oversized:1000", "oversized:1000:chunked", "reset", "reset:body"]
        for spec in specs { #expect(try Fault(spec: spec).description == spec) }
        #expect(try Fault(spec: "502") == .status(502, retryAfter: nil))
        #expect(try Fault(spec: "oversized") == .oversized(bytes: Fault.defaultOversizedBytes, chunked: false))
        for bad in ["status:200", "status:429:soon", "latency", "stall:forever", "explode", "oversized:0"] {
            #expect(throws: DemoFeedServerError.self) { try Fault(spec: bad) }
        }
        #expect(try RandomFault(spec: "status:429:2=0.25") == RandomFault(fault: .status(429, retryAfter: .seconds(2)), probability: 0.25))
        #expect(throws: DemoFeedServerError.self) { try RandomFault(spec: "reset=2") }
        #expect(throws: DemoFeedServerError.self) { try DemoFeedServer(configuration: .init(feeds: [])) }
        #expect(throws: DemoFeedServerError.self) {
            try DemoFeedServer(configuration: .init(feeds: [.init(name: "a"), .init(name: "a")]))
        }
    }

    @Test("items are deterministic and their JSON is valid")
    func deterministicItems() throws {
        let a = DemoFeedItem.generate(feed: "f", sequence: 5, idWidth: 10, idField: "id")
        let b = DemoFeedItem.generate(feed: "f", sequence: 5, idWidth: 10, idField: "id")
        #expect(a == b)
        let parsed = try JSONPageParser().parse(Array("[\(a.json)]".utf8))
        #expect(parsed.map(\.id) == [id(5)])
        let object = try JSONSerialization.jsonObject(with: a.jsonData) as? [String: Any]
        #expect(object?["text"] as? String == "Item 5 of f: caf\u{E9} \u{2615} \"quoted\", back\\slash\nnew line, tab\t, \u{1F389}")
    }
}

/// The server's id for sequence number `n`.
func id(_ n: Int) -> String {
    let digits = String(n)
    return String(repeating: "0", count: 10 - digits.count) + digits
}

/// The ids in a page body, in order.
func ids(_ body: String) -> [String] {
    (try? JSONPageParser().parse(Array(body.utf8)).map(\.id)) ?? ["<unparseable>"]
}
