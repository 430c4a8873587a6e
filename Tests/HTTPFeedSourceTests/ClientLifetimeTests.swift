import AsyncHTTPClient
import DemoFeedServer
import Foundation
import HTTPFeedSource
import NIOCore
import SyncCore
import Testing
import TestSupport

/// An `HTTPFeedClient` that is released without `shutdown()` must not take the process down
/// (AsyncHTTPClient traps on an HTTPClient released while running, in debug builds), and a
/// client on a caller's `HTTPClient` leaves that client to the caller.
@Suite("HTTP feed client lifetime")
struct ClientLifetimeTests {
    @Test func aClientReleasedWithoutShutdownClosesItsPoolItself() async throws {
        try await withDemoServer(.init(feeds: [.init(name: "home", initialCount: 10)])) { server in
            // Used, with a pooled connection open, then dropped: this test process is the check.
            var client: HTTPFeedClient? = HTTPFeedClient(options: .init(connectTimeout: hangGuard))
            let page = try await server.source("home", client: client!).fetchInitial()
            #expect(page.items.count == 10)
            client = nil
            // A second shutdown of an owned client is harmless too.
            let owned = HTTPFeedClient()
            try await owned.shutdown()
            try await owned.shutdown()
        }
    }

    /// A pooled connection left idle past `idleTimeout` is closed, and one within it is kept;
    /// the kernel's table of TCP sockets is the judge.
    ///
    /// A connection's idle time runs from its response's end, which comes after the request was
    /// asked for: each "still open" check holds only while less than the idle time has passed
    /// since the asking, and is skipped when a congested run took longer than that.
    @Test func anIdleConnectionIsClosedAfterTheIdleTimeout() async throws {
        let configuration = DemoFeedServer.Configuration(feeds: [.init(name: "home", initialCount: 3)])
        try await withFeedServer(configuration, faults: nil, clientOptions: .init(connectTimeout: hangGuard, idleTimeout: .seconds(3))) { shortServer, short in
            try await withFeedServer(configuration, faults: nil, clientOptions: .init(connectTimeout: hangGuard, idleTimeout: .seconds(60))) { longServer, long in
                let shortPort = try #require(shortServer.port), longPort = try #require(longServer.port)
                // Only the connections made here: a test before may have left one to a server that
                // stopped, whose port one of these servers now has.
                let stale = Set(try establishedLocalPorts(toPort: shortPort) + establishedLocalPorts(toPort: longPort))
                func connections(to port: Int) throws -> Int { try establishedLocalPorts(toPort: port).count { !stale.contains($0) } }
                let longAsked = ContinuousClock.now
                #expect(try await longServer.source("home", client: long).fetchInitial().items.count == 3)
                let shortAsked = ContinuousClock.now
                #expect(try await shortServer.source("home", client: short).fetchInitial().items.count == 3)
                let open = try connections(to: shortPort)
                let readAfter = ContinuousClock.now - shortAsked
                // Seen open within its three seconds (2.5, for the check's own time).
                if readAfter < .milliseconds(2_500) { #expect(open == 1, "open after the fetch (read \(readAfter) after asking)") }
                #expect(try connections(to: longPort) == 1)
                try await waitUntil("the short client's connection closed after its idle time") { try connections(to: shortPort) == 0 }
                let kept = try connections(to: longPort)
                // Within its 60 s, unless this run took 50 s to get here (the wait above is bounded by 30).
                if ContinuousClock.now - longAsked < .seconds(50) { #expect(kept == 1, "kept within 60 s") }
            }
        }
    }

    @Test func aSharedHTTPClientStaysTheCallers() async throws {
        let configuration = HTTPClient.Configuration(
            redirectConfiguration: .disallow, timeout: .init(connect: TimeAmount(hangGuard)), decompression: .enabled(limit: .ratio(100)))
        try await withHTTPClient(configuration) { http in
            try await withDemoServer(.init(feeds: [.init(name: "home", initialCount: 3)])) { server in
                let client = HTTPFeedClient(sharing: http)
                #expect(try await server.source("home", client: client).fetchInitial().items.count == 3)
                try await client.shutdown()  // not its pool: does nothing
                let again = HTTPFeedClient(sharing: http)
                #expect(try await server.source("home", client: again).fetchInitial().items.count == 3, "the shared client still works")
            }
        }
    }
}
