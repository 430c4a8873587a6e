import Foundation
import Testing
import TestSupport

/// `syncd --probe`: one page read from a server written in the tests (`Oracle/dialects.py`),
/// described, and nothing stored; a page that does not fit says what to set.
@Suite("syncd --probe", .timeLimit(.minutes(2)))
struct ProbeCommandTests {
    /// The output of `syncd --probe` with `arguments`, which must exit 0.
    private func probeOutput(_ arguments: String...) async throws -> String {
        try await runCommand([try BuildProducts.path("syncd"), "--probe"] + arguments)
    }

    /// The exit status and output of `syncd --probe` with `arguments`, for a probe that may fail.
    private func probeExit(_ arguments: String...) async throws -> (status: Int32, output: String) {
        let directory = try TemporaryDirectory(prefix: "probe")
        let probe = try ChildProcess([try BuildProducts.path("syncd"), "--probe"] + arguments, logPath: directory.file("out"))
        let status = await probe.stop(signal: 0)
        // The output is read from the log, which goes with the directory.
        return (status, probe.output)
    }

    @Test("a Stripe list in its dialect: items, first ids, and the older and newer URLs")
    func stripe() async throws {
        try await withDialectServer(items: 45) { server in
            let url = server.url("/v1/charges?limit=3").absoluteString
            let output = try await probeOutput(url, "--dialect", "stripe")
            #expect(output.contains("  dialect: stripe\n  items: at /data\n"), "\(output)")
            #expect(output.contains("  items: 3, at /data\n  first ids: ch_0000000045, ch_0000000044, ch_0000000043\n"), "\(output)")
            #expect(output.contains("  older page: \(url)&starting_after=ch_0000000043\n"), "\(output)")
            #expect(output.contains("  newer items from: \(url)&ending_before=ch_0000000045\n"), "\(output)")
            #expect(output.hasSuffix("nothing was stored\n"))
        }
    }

    @Test("a Bluesky feed without its dialect: exit 1 and what is missing; an unknown dialect: exit 64")
    func misfits() async throws {
        try await withDialectServer(items: 5) { server in
            let url = server.url("/xrpc/app.bsky.feed.getAuthorFeed?actor=alice.test&limit=3").absoluteString
            let probe = try await probeExit(url)
            #expect(probe.status == 1)
            #expect(probe.output.contains("syncd: probe: GET \(url): malformed page: item 0 has no string or integer at /id"), "\(probe.output)")
            let unknown = try await probeExit(url, "--dialect", "myspace")
            #expect(unknown.status == 64)
            #expect(unknown.output.contains("unknown dialect 'myspace' (known: mastodon, github"))
            let found = try await probeOutput(url, "--dialect", "bluesky")
            #expect(found.contains("  items: 3, at /feed\n  first ids: at://did:plc:alice/app.bsky.feed.post/"), "\(found)")
        }
    }

    /// Read as a `Link` feed, a bare array paged by offset ended after its first page without a
    /// word (status synced): a full first page with no `Link` is now said, once, with what to set.
    @Test("a full first page without a Link says that older pages need a key")
    func unpagedFirstPage() async throws {
        try await withDialectServer(items: 45) { server in
            let url = server.url("/bareoffset/items?limit=10").absoluteString
            let probe = try await probeExit(url)
            #expect(probe.status == 0)
            #expect(probe.output.contains(#"the feed's first page is full (10 items) and has no Link rel="next": if the API pages by offset, page number or a cursor, set older"#), "\(probe.output)")
            let last = try await probeExit(server.url("/bareoffset/items?limit=50").absoluteString)
            #expect(last.status == 0)
            #expect(!last.output.contains("first page is full"), "45 of 50: the whole feed")
        }
    }

    @Test("an Atom archive and an RSS channel, found by their bodies")
    func syndication() async throws {
        try await withDialectServer(items: 45) { server in
            let atom = try await probeOutput(server.url("/atom/current.xml").absoluteString)
            #expect(atom.contains("  items: 5, an Atom document's entries\n  first ids: tag:example.test,2026:item-45, "), "\(atom)")
            #expect(atom.contains("  older page: \(server.url("/atom/archive/2.xml").absoluteString)\n"), "\(atom)")
            let rss = try await probeOutput(server.url("/rss.xml").absoluteString, "--dialect", "rss")
            #expect(rss.contains("  items: 20, an RSS channel's items\n  first ids: item-45, item-44"), "\(rss)")
        }
    }
}
