import Foundation
import HTTPFeedSource
import SyncCore
import SyncDaemon
import Testing
import TestSupport

/// The keys for pagination, TLS and retention.
@Suite struct FeedKeysConfigurationTests {
    @Test func paginationAndPageSizeParameter() throws {
        let config = try DaemonConfiguration.parse(feedTables(
            .init(name: "issues", url: "https://api.github.com/repos/o/p/issues?state=all", pageSize: 50),
            .init(name: "home", url: "https://mastodon.example/api/v1/timelines/home", pageSize: 40),
            .init(name: "custom", url: "https://feeds.example/items", pageSize: 25,
                  lines: [#"pagination = "page""#, #"page_size_parameter = "count""#, "gap_pages = 3"])))
        let issues = config.feeds[0], home = config.feeds[1], custom = config.feeds[2]
        #expect(issues.http.pagination == .page, "api.github.com pages by number")
        #expect(issues.http.url.query == "state=all&per_page=50", "GitHub reads per_page, not limit")
        #expect(home.http.pagination == .automatic)
        #expect(home.http.url.query == "limit=40")
        #expect(custom.http.pagination == .page)
        #expect(custom.http.url.query == "count=25")
        #expect(custom.sync.gapPageLimit == 3)
    }

    @Test func retentionKeys() throws {
        let config = try DaemonConfiguration.parse(feedTables(
            .init(name: "a", url: "https://h.example/f", backfill: 400, lines: ["keep_items = 500", "keep_days = 1.5"])))
        #expect(config.feeds[0].keepItems == 500)
        #expect(config.feeds[0].keepAge == .seconds(129_600))
    }

    @Test func revalidationKeys() throws {
        let config = try DaemonConfiguration.parse(feedTables(
            .init(name: "a", url: "https://h.example/f", lines: ["revalidate = 200", #"revalidate_interval = "15m""#]),
            .init(name: "b", url: "https://h.example/g", lines: [#"revalidate = "all""#]),
            .init(name: "c", url: "https://h.example/h")))
        #expect(config.feeds[0].sync.revalidate == .items(200))
        #expect(config.feeds[0].sync.revalidateInterval == .seconds(900))
        #expect(config.feeds[1].sync.revalidate == .all)
        #expect(config.feeds[1].sync.revalidateInterval == SyncConfiguration.default.revalidateInterval)
        #expect(config.feeds[2].sync.revalidate == nil, "off unless asked for")
    }

    @Test func deletionMarkKeys() throws {
        let config = try DaemonConfiguration.parse(feedTables(
            .init(name: "a", url: "https://h.example/f", lines: [#"deleted = "/deleted""#]),
            .init(name: "b", url: "https://h.example/g", lines: [#"deleted = "/status""#, #"deleted_value = "deleted""#]),
            .init(name: "c", url: "https://h.example/h", lines: [#"deleted = "/state/gone""#, "deleted_value = 1"])))
        #expect(config.feeds[0].http.descriptor.deleted == DeletionMark(pointer: JSONPointer(tokens: ["deleted"]), value: .bool(true)))
        #expect(config.feeds[1].http.descriptor.deleted == DeletionMark(pointer: JSONPointer(tokens: ["status"]), value: .string("deleted")))
        #expect(config.feeds[2].http.descriptor.deleted == DeletionMark(pointer: JSONPointer(tokens: ["state", "gone"]), value: .number("1")))
    }

    @Test func orderKey() throws {
        let config = try DaemonConfiguration.parse("[[feed]]\nname = \"a\"\nurl = \"https://h.example/f\"\norder = \"oldest_first\"\n")
        #expect(config.feeds[0].http.descriptor.order == .oldestFirst)
        #expect(try DaemonConfiguration.parse("[[feed]]\nname = \"a\"\nurl = \"https://h.example/f\"\n").feeds[0].http.descriptor.order == .newestFirst)
    }

    @Test func tlsFilesAreReadAtLoad() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("syncd-conf-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let missing = dir.appendingPathComponent("ca.pem").path
        expectRefusal("[[feed]]\nname = \"a\"\nurl = \"https://h.example/f\"\nca_file = \"\(missing)\"\n", line: 4, key: "feed[0].ca_file", message: missing)
    }

    @Test(arguments: [
        ("[[feed]]\nname = \"a\"\nurl = \"http://h/f\"\npagination = \"offset\"\n", 4, "feed[0].pagination", "must be one of"),
        ("[[feed]]\nname = \"a\"\nurl = \"http://h/f\"\npage_size_parameter = \"per page\"\n", 4, "feed[0].page_size_parameter", "query parameter"),
        ("[[feed]]\nname = \"a\"\nurl = \"http://h/f\"\nca_file = \"/ca.pem\"\n", 4, "feed[0].ca_file", "https"),
        ("[[feed]]\nname = \"a\"\nurl = \"https://h/f\"\nclient_key = \"/k\"\n", 4, "feed[0].client_key", "client_certificate"),
        ("[[feed]]\nname = \"a\"\nurl = \"http://h/f\"\nkeep_days = 0\n", 4, "feed[0].keep_days", "above 0"),
        ("[[feed]]\nname = \"a\"\nurl = \"http://h/f\"\nkeep_items = 10\nbackfill = 100\n", 5, "feed[0].backfill", "keep_items"),
        ("[[feed]]\nname = \"a\"\nurl = \"http://h/f\"\ngap_pages = 0\n", 4, "feed[0].gap_pages", "between"),
        ("[[feed]]\nname = \"a\"\nurl = \"http://h/f\"\nrevalidate = 0\n", 4, "feed[0].revalidate", "a number of items"),
        ("[[feed]]\nname = \"a\"\nurl = \"http://h/f\"\ndeleted_value = true\n", 4, "feed[0].deleted_value", "needs deleted"),
        ("[[feed]]\nname = \"a\"\nurl = \"http://h/f\"\norder = \"asc\"\n", 4, "feed[0].order", "newest_first, oldest_first"),
        ("[[feed]]\nname = \"a\"\nurl = \"http://h/f\"\norder = \"oldest_first\"\nrevalidate = 50\n", 5, "feed[0].revalidate", "oldest_first"),
        ("[[feed]]\nname = \"a\"\nurl = \"http://h/f\"\ndeleted = \"\"\n", 4, "feed[0].deleted", "inside the item"),
        ("[[feed]]\nname = \"a\"\nurl = \"http://h/f\"\nrevalidate = \"some\"\n", 4, "feed[0].revalidate", "or \"all\""),
        ("[[feed]]\nname = \"a\"\nurl = \"http://h/f\"\nrevalidate_interval = \"5m\"\n", 4, "feed[0].revalidate_interval", "needs revalidate"),
    ] as [(String, Int, String, String)])
    func badKeysAreLocated(text: String, line: Int, key: String, message: String) {
        expectRefusal(text, file: "test.toml", line: line, key: key, message: message)
    }
}
