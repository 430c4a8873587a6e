import Foundation
import HTTPFeedSource
import SyncDaemon
import Testing
import TestSupport

/// `[[feed]]`'s dialect and descriptor keys: presets, overrides, mistakes said with the key, and
/// what `syncd --check-config` and `syncd --probe` print of them.
@Suite struct DialectConfigurationTests {
    func feed(_ keys: String) throws(ConfigurationError) -> DaemonConfiguration.Feed {
        try DaemonConfiguration.parse("[[feed]]\nname = \"f\"\n\(keys)\n").feeds[0]
    }

    func refusal(_ keys: String) -> String {
        do {
            _ = try feed(keys)
            return "accepted"
        } catch {
            return error.description
        }
    }

    static func pointer(_ text: String) -> JSONPointer { (try? JSONPointer(text)) ?? .root }

    @Test func aDialectSetsItsKeysAndPageSizeParameter() throws {
        let stripe = try feed("url = \"https://api.stripe.com/v1/charges\"\ndialect = \"stripe\"\npage_size = 100")
        #expect(stripe.http.descriptor == FeedDialect.stripe.descriptor)
        #expect(stripe.http.url.absoluteString == "https://api.stripe.com/v1/charges?limit=100")
        #expect(stripe.dialect == .stripe)
        let notion = try feed("url = \"https://api.notion.com/v1/blocks/b/children\"\ndialect = \"notion\"\npage_size = 50")
        #expect(notion.http.url.absoluteString.hasSuffix("?page_size=50"))
    }

    @Test func explicitKeysOverrideTheDialect() throws {
        let slack = try feed("url = \"https://slack.com/api/conversations.history?channel=C1\"\ndialect = \"slack\"\ncursor_param = \"after\"\nitems = \"/msgs\"")
        #expect(slack.http.descriptor.older == .bodyCursor(Self.pointer("/response_metadata/next_cursor"), parameter: "after"))
        #expect(slack.http.descriptor.items == Self.pointer("/msgs"))
        #expect(slack.http.descriptor.newer == .head)
        let own = try feed("url = \"http://h/events\"\noffset_param = \"skip\"\ntotal = \"/count\"\nnewer = \"head\"\nid = \"/event/uuid\"")
        #expect(own.http.descriptor.older == .offset(parameter: "skip"))
        #expect(own.http.descriptor.end.total == Self.pointer("/count"))
        #expect(own.http.descriptor.id == Self.pointer("/event/uuid"))
        #expect(own.http.descriptor.newer == .head)
        let cursor = try feed("url = \"http://h/x\"\ncursor = \"/next\"\nnewer_param = \"since\"")
        #expect(cursor.http.descriptor.older == .bodyCursor(Self.pointer("/next"), parameter: "cursor"))
        #expect(cursor.http.descriptor.newer == .idParameter("since"))
    }

    @Test func mistakesAreSaidWithTheKeyAndTheFix() {
        #expect(refusal("url = \"http://h/x\"\ndialect = \"twitter\"").contains("feed[0].dialect: must be one of mastodon, github"))
        #expect(refusal("url = \"http://h/x\"\nolder = \"cursor\"").contains("feed[0].cursor: is required by older = \"cursor\""))
        #expect(refusal("url = \"http://h/x\"\ncursor = \"/c\"\nnext_url = \"/n\"").contains("several ways to older pages are given (next_url, cursor)"))
        #expect(refusal("url = \"http://h/x\"\nitems = \"feed\"").contains(#"feed[0].items: JSON pointer "feed" must be empty or start with '/' (RFC 6901), e.g. "/feed""#))
        #expect(refusal("url = \"http://h/x\"\nid = \"/id\"\nid_field = \"id\"").contains("give either id (a JSON pointer) or id_field"))
        #expect(refusal("url = \"http://h/x\"\nolder = \"sideways\"").contains("feed[0].older: must be one of link, next_url"))
        #expect(refusal("url = \"http://h/x\"\ncursor_param = \"a&b\"\ncursor = \"/c\"").contains("feed[0].cursor_param: must be a query parameter"))
    }

    @Test func checkConfigPrintsEachFeedsReading() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("dialects.toml")
        try """
            [[feed]]
            name = "charges"
            url = "https://api.stripe.com/v1/charges"
            dialect = "stripe"

            [[feed]]
            name = "events"
            url = "http://192.0.2.1/events"
            offset_param = "offset"
            total = "/total"
            newer = "head"
            """.write(toFile: path, atomically: true, encoding: .utf8)
        let output = try await runCommand([try BuildProducts.path("syncd"), "--config", path, "--check-config"])
        #expect(output.contains("feed charges: https://api.stripe.com/v1/charges, dialect stripe\n  items: at /data\n  id: /id\n  older pages: the last item's id, sent as starting_after=\n  newer items: the newest stored id, sent as ending_before=\n  last page: /has_more is false"), "\(output)")
        #expect(output.contains("feed events: http://192.0.2.1/events, dialect none (the keys' defaults)"))
        #expect(output.contains("  older pages: offset= counting the items read\n  newer items: the feed's URL again, walking older to the stored items\n  last page: the offset reaches /total"), "\(output)")
    }
}
