import DemoFeedServer
import Foundation
import HTTPFeedSource
import SyncCore
import Synchronization
import SyncdTesting
import Testing
import TestSupport

/// Every injected fault surfaces as the right ``FeedError`` and leaves nothing half-stored.
@Suite("Fault injection: each fault maps to the right error")
struct FaultInjectionTests {
    /// One request with `fault` injected through the query, with a small body cap. The request
    /// timeout is the suite's hang guard unless the fault is a timeout: at the start of a full
    /// run, with every test starting at once on two cores, the reset test once took 8.5 s and did
    /// not get its transport error within the 5 s it had then.
    private func error(for fault: String, timeout: Duration = TestSupport.hangGuard, maxBody: Int = 1 << 20) async throws -> FeedError? {
        try await withFeedServer(.init(feeds: [.init(name: "home", initialCount: 50)])) { server, client in
            let source = try server.source("home", client: client, query: "fault=\(fault)") {
                $0.requestTimeout = timeout
                $0.maxBodyBytes = maxBody
            }
            let error = await expectFeedError { try await source.fetchInitial() }
            // The server is fine afterwards: the same source without the fault succeeds (within
            // the hang guard, `source`'s default).
            let healthy = try server.source("home", client: client)
            #expect(try await healthy.fetchInitial().items.count == 20)
            return error
        }
    }

    @Test("HTTP status codes map to .httpStatus; 4xx other than 408/429 are permanent", arguments: [500, 502, 503, 504, 408, 429, 400, 401, 403, 404, 410])
    func status(code: Int) async throws {
        let error = try #require(try await error(for: "status:\(code)"))
        #expect(error.kind == .httpStatus(code))
        #expect(error.retryAfter == nil)
        #expect(error.isPermanent == ((400..<500).contains(code) && code != 408 && code != 429))
        #expect(error.message.contains("\(code)"))
    }

    @Test("429 and 503 carry Retry-After in seconds")
    func retryAfterSeconds() async throws {
        #expect(try await error(for: "status:429:7")?.retryAfter == .seconds(7))
        #expect(try await error(for: "status:503:2")?.retryAfter == .seconds(2))
    }

    @Test("Retry-After as an HTTP-date becomes a delay")
    func retryAfterDate() async throws {
        let started = ContinuousClock.now
        let error = try #require(try await error(for: "status:503:date+30"))
        let elapsed = ContinuousClock.now - started
        #expect(error.kind == .httpStatus(503))
        // Whole-second dates: the server's Date header may be up to a second behind its clock,
        // and on a loaded machine its once-a-second refresh may lag by as long as the request took.
        let delay = try #require(error.retryAfter)
        #expect(delay >= .seconds(29) && delay <= .seconds(31) + elapsed, "delay \(delay), request took \(elapsed)")
    }

    @Test("a stall before the headers is a timeout")
    func stallHeaders() async throws {
        #expect(try await error(for: "stall", timeout: .milliseconds(500))?.kind == .timeout)
    }

    @Test("a stall in the middle of the body is a timeout too (the whole request is bounded)")
    func stallBody() async throws {
        #expect(try await error(for: "stall:body", timeout: .milliseconds(500))?.kind == .timeout)
    }

    @Test("latency below the timeout is fine; above it, a timeout")
    func latency() async throws {
        try await withFeedServer(.init(feeds: [.init(name: "home", initialCount: 50)])) { server, client in
            let slow = try server.source("home", client: client, query: "fault=latency:100") { $0.requestTimeout = TestSupport.hangGuard }
            #expect(try await slow.fetchInitial().items.count == 20)
        }
        #expect(try await error(for: "latency:1500", timeout: .milliseconds(300))?.kind == .timeout)
    }

    @Test("a body that is not JSON is malformed")
    func malformed() async throws {
        let error = try #require(try await error(for: "malformed"))
        #expect(error.kind == .malformed)
        // The fault sends an HTML page, which is said as such.
        #expect(error.message.hasSuffix("the server answered with an HTML page, not the feed's JSON"))
    }

    @Test("a correctly framed but truncated JSON body is malformed")
    func truncated() async throws {
        let error = try #require(try await error(for: "truncated"))
        #expect(error.kind == .malformed)
        #expect(error.message.contains("truncated"))
    }

    @Test("an oversized body is refused, by Content-Length or while streaming")
    func oversized() async throws {
        #expect(try await error(for: "oversized:300000", maxBody: 100_000)?.kind == .tooLarge)
        #expect(try await error(for: "oversized:300000:chunked", maxBody: 100_000)?.kind == .tooLarge)
        // Under the cap, the padded page is still a valid page.
        try await withFeedServer(.init(feeds: [.init(name: "home", initialCount: 50)])) { server, client in
            let source = try server.source("home", client: client, query: "fault=oversized:50000:chunked") { $0.maxBodyBytes = 100_000 }
            #expect(try await source.fetchInitial().items.count == 20)
        }
    }

    @Test("a connection reset before or during the response is a transport error")
    func reset() async throws {
        #expect(try await error(for: "reset")?.kind == .transport)
        #expect(try await error(for: "reset:body")?.kind == .transport)
    }

    @Test("nothing listening is a transport error that says so at once, not a connect timeout")
    func connectionRefused() async throws {
        // Bound but not listening: refused, and no parallel test's server can take the port.
        let reserved = ReservedPort()
        let port = reserved.port
        // Long timeouts: a pool that retried the refused connect would end in a timeout instead.
        let client = HTTPFeedClient(options: .init(connectTimeout: .seconds(60)))
        for (host, expected) in [
            ("127.0.0.1", "GET http://127.0.0.1:\(port)/feeds/home: Connection refused"),
            // A name: every address it resolves to is tried, and each one's reason is given.
            ("localhost", "cannot connect to localhost port \(port): "),
        ] {
            let source = try HTTPFeedSource(
                configuration: .init(url: URL(string: "http://\(host):\(port)/feeds/home")!, requestTimeout: .seconds(90)),
                client: client, logger: quietLogger)
            let error = await expectFeedError { try await source.fetchInitial() }
            #expect(error?.kind == .transport, "\(String(describing: error))")
            #expect(error?.message.contains(expected) == true, "\(String(describing: error))")
            #expect(error?.message.contains("Connection refused") == true, "\(String(describing: error))")
        }
        try await client.shutdown()
        withExtendedLifetime(reserved) {}
    }

    @Test("cancellation stops a stalled request promptly with CancellationError")
    func cancellation() async throws {
        try await withFeedServer(.init(feeds: [.init(name: "home", initialCount: 5)])) { server, client in
            // Cancelled, not timed out: its time is far beyond the wait for the stall below.
            let source = try server.source("home", client: client, query: "fault=stall") { $0.requestTimeout = .seconds(120) }
            let task = BoundedTask { try await source.fetchInitial() }
            try await waitUntil("a request stalled") { await server.stalledRequestCount() > 0 }
            task.cancel()
            let result = try await task.result("the cancelled request ended")
            #expect(throws: CancellationError.self) { try result.get() }
        }
    }
}

/// Faults scripted into specific directions of a real sync: each gives its error once, the
/// retry succeeds, and the synced copy equals the server's feed with no loss or duplicate.
@Suite("Fault injection during sync: no loss, no duplicates")
struct FaultDuringSyncTests {
    static let faults = [
        "status:500", "status:503:1", "status:429:1", "status:503:date+1", "stall", "stall:body",
        "malformed", "truncated", "oversized:400000", "oversized:400000:chunked", "reset", "reset:body",
    ]

    @Test("a scripted fault in every direction", arguments: faults)
    func scripted(fault spec: String) async throws {
        let fault = try Fault(spec: spec)
        try await withFeedServer(.init(feeds: [.init(name: "home", initialCount: 120)])) { server, client in
            // Every request has the hang guard for its time (`source`'s default), so that a healthy
            // request on a loaded machine (tests run in parallel on two cores) never times out,
            // which would add an error the test does not expect.
            let source = try server.source("home", client: client, limit: 25) { $0.maxBodyBytes = 200_000 }
            var driver = SyncDriver(source: source)
            if case .stall = fault {
                // A stall ends only with its request's time. The script stalls the first request
                // in each direction, so those three alone get a short time; the retries keep the
                // hang guard. (A stall that came elsewhere would still be one timeout, later.)
                let short = try server.source("home", client: client, limit: 25) {
                    $0.requestTimeout = .seconds(2)
                    $0.maxBodyBytes = 200_000
                }
                driver = SyncDriver(source: FirstInEachDirection(first: short, rest: source))
            }
            for kind in RequestKind.allCases {
                try await server.scriptFault(.init(fault, count: 1, feed: "home", kind: kind))
            }
            try await driver.initial()
            try await server.appendItems(feed: "home", count: 60)
            try await driver.olderToTheEnd()
            try await driver.newerUntilCaughtUp()

            #expect(driver.errors.count == 3, "one failure per direction: \(driver.errors.map(\.message))")
            let expected: FeedError.Kind = switch fault {
            case .status(let code, _): .httpStatus(code)
            case .stall: .timeout
            case .malformed, .truncated: .malformed
            case .oversized: .tooLarge
            case .reset: .transport
            case .latency: .other
            }
            #expect(driver.errors.allSatisfy { $0.kind == expected }, "\(driver.errors.map(\.message))")
            if case .status(_, let retryAfter?) = fault {
                #expect(driver.errors.allSatisfy { $0.retryAfter != nil })
                // The driver slept each Retry-After before retrying: the retry reached the
                // server no sooner than the server asked.
                let requests = await server.requests(feed: "home")
                for (index, record) in requests.enumerated() where record.fault != nil && index + 1 < requests.count {
                    let floor: Duration = switch retryAfter {
                    case .seconds(let s): .seconds(s)
                    case .date(let ahead): .seconds(ahead - 1)  // whole-second HTTP dates
                    }
                    #expect(requests[index + 1].receivedAt - record.receivedAt >= floor)
                }
            }
            #expect(driver.log.items == (try await server.expectedItems("home")))
            #expect(await server.pendingScriptedFaults().isEmpty)
        }
    }

    @Test("random faults of every kind at startup-flag rates: the copy still equals the feed")
    func randomFaults() async throws {
        let faults: [RandomFault] = try [
            "status:500=0.04", "status:503:0=0.04", "status:429:0=0.04", "reset=0.03", "reset:body=0.03",
            "malformed=0.03", "truncated=0.03", "oversized:400000:chunked=0.03", "stall=0.02", "stall:body=0.02",
        ].map { try RandomFault(spec: $0) }
        let configuration = DemoFeedServer.Configuration(
            feeds: [.init(name: "home", initialCount: 2000, maxLimit: 100)], latencyMilliseconds: 0...3)
        try await withFeedServer(configuration, faults: .init(randomFaults: faults, seed: 42)) { server, client in
            // Each stall costs the hang guard (`source`'s default); anything shorter lets a
            // healthy request on a loaded machine time out too and count as a fault that never
            // happened. The seed makes the faults, and so the stalls, the same every run.
            let source = try server.source("home", client: client, limit: 100) { $0.maxBodyBytes = 200_000 }
            var driver = SyncDriver(source: source)
            try await driver.initial()
            try await server.appendItems(feed: "home", count: 150)
            try await driver.olderToTheEnd()
            try await server.appendItems(feed: "home", count: 333)
            try await driver.newerUntilCaughtUp()
            #expect(driver.log.items == (try await server.expectedItems("home")))
            // The faults really happened, and each request that failed failed for a reason.
            let faulted = await server.requests(feed: "home").filter { $0.fault != nil }
            #expect(faulted.count == driver.errors.count)
            #expect(!driver.errors.isEmpty)
        }
    }
}

/// Sends the first request in each direction (initial, older, newer) to `first`, and every other
/// to `rest`: a faulted request and its retries through sources that differ in their settings.
private final class FirstInEachDirection: FeedSource {
    let first: any FeedSource
    let rest: any FeedSource
    private let sent = Mutex<Set<RequestKind>>([])

    init(first: any FeedSource, rest: any FeedSource) {
        self.first = first
        self.rest = rest
    }

    private func source(_ kind: RequestKind) -> any FeedSource {
        sent.withLock { $0.insert(kind).inserted } ? first : rest
    }

    func fetchInitial() async throws -> FeedPage { try await source(.initial).fetchInitial() }
    func fetchOlder(cursor: String) async throws -> FeedPage { try await source(.older).fetchOlder(cursor: cursor) }
    func fetchNewer(cursor: String) async throws -> FeedPage { try await source(.newer).fetchNewer(cursor: cursor) }
}
