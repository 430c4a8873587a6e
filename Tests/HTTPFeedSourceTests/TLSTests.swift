import Foundation
import HTTPFeedSource
import SyncCoordinator
import SyncCore
import SyncStore
import Testing
import TestSupport

/// A CA, server and client certificates made by the test with the openssl CLI.
struct TestPKI: Sendable {
    let directory: TemporaryDirectory
    var ca: String { directory.file("ca.pem") }
    /// For 127.0.0.1, signed by the CA.
    var server: (certificate: String, key: String) { (directory.file("server.pem"), directory.file("server.key")) }
    /// For elsewhere.example only, signed by the CA.
    var wrongHost: (certificate: String, key: String) { (directory.file("wrong.pem"), directory.file("wrong.key")) }
    /// A client certificate signed by the CA.
    var client: (certificate: String, key: String) { (directory.file("client.pem"), directory.file("client.key")) }

    static func make() async throws -> TestPKI {
        let directory = try TemporaryDirectory(prefix: "syncd-pki")
        let d = directory.path
        let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        try await runCommand(["openssl", "req", "-x509"] + ec + ["-keyout", "\(d)/ca.key", "-out", "\(d)/ca.pem", "-days", "2", "-subj", "/CN=syncd test CA"])
        for (name, san) in [("server", "IP:127.0.0.1"), ("wrong", "DNS:elsewhere.example"), ("client", "DNS:syncd-client")] {
            try await runCommand(["openssl", "req"] + ec + ["-keyout", "\(d)/\(name).key", "-out", "\(d)/\(name).csr", "-subj", "/CN=\(name)"])
            try "subjectAltName=\(san)\n".write(toFile: "\(d)/\(name).ext", atomically: true, encoding: .utf8)
            try await runCommand([
                "openssl", "x509", "-req", "-in", "\(d)/\(name).csr", "-CA", "\(d)/ca.pem", "-CAkey", "\(d)/ca.key",
                "-CAcreateserial", "-out", "\(d)/\(name).pem", "-days", "2", "-extfile", "\(d)/\(name).ext",
            ])
        }
        return TestPKI(directory: directory)
    }

    var origins: [GitHubStyleServer.Secure] {
        [
            .init(name: "good", certificate: server.certificate, key: server.key),
            .init(name: "wrong", certificate: wrongHost.certificate, key: wrongHost.key),
            .init(name: "mtls", certificate: server.certificate, key: server.key, clientCA: ca),
        ]
    }
}

/// A real HTTPS server on loopback (Python's ssl module) with a CA the test makes.
@Suite("TLS: a private CA, host names, client certificates, errors in words", .serialized)
struct TLSTests {
    func source(_ url: URL, _ client: HTTPFeedClient, tls: FeedTLS? = nil, token: String? = nil) throws -> HTTPFeedSource {
        var http = HTTPFeedConfiguration(url: url, requestTimeout: hangGuard, tls: tls)
        http.authorization = token.map { .bearer(BearerToken($0)) }
        return try HTTPFeedSource(configuration: http, client: client, logger: quietLogger)
    }

    @Test("untrusted without ca_file (permanent, in words); with ca_file the feed syncs to an exact copy")
    func privateCA() async throws {
        let pki = try await TestPKI.make()
        try await withGitHubStyleServer(secure: pki.origins) { server in
            try await server.add(35)
            try await withFeedClient { client in
                let url = server.secureURL("good", query: "per_page=10")
                let untrusted = try #require(await expectFeedError { try await source(url, client).fetchInitial() })
                #expect(untrusted.kind == .tls)
                #expect(untrusted.isPermanent)
                #expect(untrusted.message.contains("certificate not trusted (issuer CN=syncd test CA)"), "\(untrusted.message)")
                #expect(!untrusted.message.contains(".cc") && !untrusted.message.contains("error:"), "no BoringSSL dump: \(untrusted.message)")

                let trusted = try source(url, client, tls: FeedTLS(caFile: pki.ca))
                try await withStore { store in
                    try await withSyncedFeed("secure", from: trusted, into: store) { feed in
                        try await waitFor(feed, "backfill to the end") { $0.endReached && !$0.older.load.isLoading }
                    }
                    #expect(try await store.items(feed: "secure", offset: 0, limit: 100) == (try await server.items()))
                }
            }
        }
    }

    @Test("a certificate for another host: host name mismatch, permanent")
    func hostNameMismatch() async throws {
        let pki = try await TestPKI.make()
        try await withGitHubStyleServer(secure: pki.origins) { server in
            try await withFeedClient { client in
                let source = try source(server.secureURL("wrong"), client, tls: FeedTLS(caFile: pki.ca))
                let error = try #require(await expectFeedError { try await source.fetchInitial() })
                #expect(error.kind == .tls)
                #expect(error.isPermanent)
                #expect(error.message.contains("host name mismatch"), "\(error.message)")
            }
        }
    }

    @Test("mTLS: refused without a client certificate, served with one")
    func clientCertificate() async throws {
        let pki = try await TestPKI.make()
        try await withGitHubStyleServer(secure: pki.origins) { server in
            try await server.add(4)
            try await withFeedClient { client in
                let url = server.secureURL("mtls")
                let refused = try #require(await expectFeedError { try await source(url, client, tls: FeedTLS(caFile: pki.ca)).fetchInitial() })
                #expect(refused.kind == .tls && refused.isPermanent)
                #expect(refused.message.contains("refused") && refused.message.contains("CERTIFICATE_REQUIRED"), "\(refused.message)")
                #expect(!refused.message.contains(".cc"), "\(refused.message)")
                let tls = FeedTLS(caFile: pki.ca, certificateFile: pki.client.certificate, keyFile: pki.client.key)
                let page = try await source(url, client, tls: tls).fetchInitial()
                #expect(page.items == (try await server.items()))
            }
        }
    }

    @Test("missing or bad certificate files are configuration errors that name the file")
    func badFiles() async throws {
        let pki = try await TestPKI.make()
        try await withFeedClient { client in
            let url = URL(string: "https://127.0.0.1:1/feed")!
            for (tls, expected) in [
                (FeedTLS(caFile: pki.directory.file("missing.pem")), "ca_file \(pki.directory.file("missing.pem"))"),
                (FeedTLS(caFile: pki.server.key), "ca_file \(pki.server.key)"),
                (FeedTLS(certificateFile: pki.client.certificate, keyFile: pki.directory.file("nokey")), "client_key"),
            ] {
                #expect {
                    try source(url, client, tls: tls)
                } throws: { error in
                    (error as? FeedError)?.message.hasPrefix(expected) == true
                }
            }
        }
    }

    @Test("http to https on the same host is followed, with the token; SSL_CERT_FILE names the trust store")
    func upgradeAndSSLCertFile() async throws {
        let pki = try await TestPKI.make()
        try await withGitHubStyleServer(secure: pki.origins) { server in
            try await server.add(3)
            try await server.redirect("/feed", status: 302, to: server.secureURL("good").absoluteString)
            // Set only while this client is made: it reads the variable once, as syncd does at start.
            setenv("SSL_CERT_FILE", pki.ca, 1)
            let client = HTTPFeedClient(options: .init(connectTimeout: hangGuard))
            unsetenv("SSL_CERT_FILE")
            defer { Task { try? await client.shutdown() } }
            let page = try await source(server.url(), client, token: "upgrade-token").fetchInitial()
            #expect(page.items == (try await server.items()))
            let received = try await server.received()
            #expect(received.map(\.origin) == ["main", "good"])
            #expect(received.allSatisfy { $0.headers["authorization"] == "Bearer upgrade-token" })
        }
    }
}
