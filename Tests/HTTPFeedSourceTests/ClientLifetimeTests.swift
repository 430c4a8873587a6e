import AsyncHTTPClient
import DemoFeedServer
import Foundation
import HTTPFeedSource
import SyncCore
import Testing

/// An `HTTPFeedClient` that is released without `shutdown()` must not take the process down
/// (AsyncHTTPClient traps on an HTTPClient released while running, in debug builds), and a
/// client on a caller's `HTTPClient` leaves that client to the caller.
@Suite("HTTP feed client lifetime")
struct ClientLifetimeTests {
    @Test func aClientReleasedWithoutShutdownClosesItsPoolItself() async throws {
        var configuration = DemoFeedServer.Configuration(feeds: [.init(name: "home", initialCount: 10)])
        configuration.host = "127.0.0.1"
        configuration.port = 0
        let server = try DemoFeedServer(configuration: configuration, logger: quietLogger)
        try await server.start()
        do {
            // Used, with a pooled connection open, then dropped: this test process is the check.
            var client: HTTPFeedClient? = HTTPFeedClient()
            let page = try await server.source("home", client: client!).fetchInitial()
            #expect(page.items.count == 10)
            client = nil
            // A second shutdown of an owned client is harmless too.
            let owned = HTTPFeedClient()
            try await owned.shutdown()
            try await owned.shutdown()
        } catch {
            await server.stop()
            throw error
        }
        await server.stop()
    }

    @Test func aSharedHTTPClientStaysTheCallers() async throws {
        var configuration = DemoFeedServer.Configuration(feeds: [.init(name: "home", initialCount: 3)])
        configuration.host = "127.0.0.1"
        configuration.port = 0
        let server = try DemoFeedServer(configuration: configuration, logger: quietLogger)
        try await server.start()
        let http = HTTPClient(eventLoopGroupProvider: .singleton, configuration: .init(redirectConfiguration: .disallow, decompression: .enabled(limit: .ratio(100))))
        do {
            let client = HTTPFeedClient(sharing: http)
            #expect(try await server.source("home", client: client).fetchInitial().items.count == 3)
            try await client.shutdown()  // not its pool: does nothing
            let again = HTTPFeedClient(sharing: http)
            #expect(try await server.source("home", client: again).fetchInitial().items.count == 3, "the shared client still works")
        } catch {
            await server.stop()
            try? await http.shutdown()
            throw error
        }
        await server.stop()
        try await http.shutdown()
    }
}
