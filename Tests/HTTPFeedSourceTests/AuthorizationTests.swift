import DemoFeedServer
import Foundation
import HTTPFeedSource
import SyncCore
import Testing
import TestSupport

@Suite("Bearer token: sent where it belongs, never shown")
struct AuthorizationTests {
    static let token = "s3cr3t-t0ken-value"

    @Test("the configured token is sent and accepted; without it the server answers 401 (permanent)")
    func bearer() async throws {
        try await withFeedServer(.init(feeds: [.init(name: "home", initialCount: 30)], bearerToken: Self.token)) { server, client in
            let anonymous = try server.source("home", client: client)
            let denied = try #require(await expectFeedError { try await anonymous.fetchInitial() })
            #expect(denied.kind == .httpStatus(401))
            #expect(denied.isPermanent)

            let authorised = try server.source("home", client: client, limit: 10) { $0.authorization = .bearer(BearerToken(Self.token)) }
            var driver = SyncDriver(source: authorised)
            try await driver.initial()
            try await driver.olderToTheEnd()
            #expect(driver.log.items == (try await server.expectedItems("home")))
            let sent = await server.requests(feed: "home").dropFirst().map(\.authorization)
            #expect(sent.allSatisfy { $0 == "Bearer \(Self.token)" })
        }
    }

    @Test("a token file is read for every request, so rotation needs no restart; a missing file is a clear error")
    func tokenFile() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("syncd-token-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        try Data("first-token\n".utf8).write(to: URL(fileURLWithPath: path))
        try await withFeedServer(.init(feeds: [.init(name: "home", initialCount: 5)])) { server, client in
            let source = try server.source("home", client: client) { $0.authorization = .bearerTokenFile(path: path) }
            _ = try await source.fetchInitial()
            try Data("second-token".utf8).write(to: URL(fileURLWithPath: path))
            _ = try await source.fetchInitial()
            #expect(await server.requests(feed: "home").map(\.authorization) == ["Bearer first-token", "Bearer second-token"])

            try FileManager.default.removeItem(atPath: path)
            let error = try #require(await expectFeedError { try await source.fetchInitial() })
            #expect(error.kind == .other)
            #expect(error.message.contains(path))
            // Nothing was sent without the token.
            #expect(await server.requestCount(feed: "home") == 2)
        }
    }

    @Test("the token is not sent to another origin named by a cursor")
    func crossOrigin() async throws {
        try await withFeedServer(.init(feeds: [.init(name: "home", initialCount: 30)])) { other, _ in
            try await withFeedServer(.init(feeds: [.init(name: "home", initialCount: 30)])) { server, client in
                let source = try server.source("home", client: client) { $0.authorization = .bearer(BearerToken(Self.token)) }
                let foreign = try #require(other.feedURL("home", limit: 5)) + "&max_id=\(id(20))"
                _ = try await source.fetchOlder(cursor: foreign)
                #expect(await other.requests(feed: "home").map(\.authorization) == [nil])
                _ = try await source.fetchInitial()
                #expect(await server.requests(feed: "home").map(\.authorization) == ["Bearer \(Self.token)"])
            }
        }
    }

    @Test("the token never appears in descriptions, dumps or error messages")
    func neverShown() async throws {
        let token = BearerToken(Self.token)
        var configuration = HTTPFeedConfiguration(url: URL(string: "http://127.0.0.1:9/feed?access_token=\(Self.token)&limit=5")!)
        configuration.authorization = .bearer(token)
        var dumped = ""
        dump(configuration, to: &dumped)
        for text in ["\(token)", String(reflecting: token), "\(configuration)", String(reflecting: configuration), dumped,
                     "\(FeedAuthorization.bearer(token))"] {
            #expect(!text.contains(Self.token), "\(text)")
        }
        // The query-string token is redacted in errors too (port 9 on loopback: nothing listens,
        // so the connect is refused at once; the long timeout only keeps it the one outcome).
        let client = HTTPFeedClient(options: .init(connectTimeout: hangGuard))
        let source = try HTTPFeedSource(configuration: configuration, client: client, logger: quietLogger)
        let error = await expectFeedError { try await source.fetchInitial() }
        try await client.shutdown()
        #expect(error?.message.contains(Self.token) == false)
        #expect(error?.message.contains("REDACTED") == true)
    }
}
