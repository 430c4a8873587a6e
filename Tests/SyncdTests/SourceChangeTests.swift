import Foundation
import SyncControl
import Testing
import TestSupport

/// The configured url is the authority: syncd restarted with another url for a feed starts
/// that source afresh, keeps the stored items, and says so in its log.
@Suite(.enabled(if: Privileges.rootTestsEnabled, Comment(rawValue: Privileges.skipReason)))
struct SourceChangeTests {
    @Test func aChangedURLResetsTheCursorsAndKeepsTheItems() async throws {
        try Privileges.requireRoot()
        let rig = try await EndToEndTests.Rig(initialItems: 60)
        try await rig.using { rig in
            _ = try await rig.waitForStatus("the first full sync") { $0.feeds.first.map { $0.itemCount == 60 && $0.endReached } == true }
            #expect(await rig.daemon.stop(signal: SIGTERM) == 0)
            #expect(!rig.daemon.output.contains("feed url changed"))

            // The same server under another url, and items that arrived meanwhile.
            try await EndToEndTests.Rig.admin(rig.topology, "POST", "/admin/feeds/demo/items?count=30")
            let path = rig.directory.file("syncd.toml")
            let config = try String(contentsOfFile: path, encoding: .utf8)
            #expect(config.contains("/feeds/demo\"\n"))
            try config.replacingOccurrences(of: "/feeds/demo\"\n", with: "/feeds/demo?view=all\"\n").write(toFile: path, atomically: true, encoding: .utf8)
            let restarted = try ChildProcess(
                ["ip", "netns", "exec", rig.topology.client.name, try BuildProducts.path("syncd"), "--config", path],
                logPath: rig.directory.file("syncd-2.log"))
            defer { Task { [restarted] in _ = await restarted.stop() } }
            let client = SyncControlClient(socketPath: rig.directory.file("io.syncd"))
            var status: ControlStatus?
            do {
                try await waitUntil("the restarted syncd synced the new source", timeout: hangGuard * 2, interval: .milliseconds(100)) {
                    status = try? await client.boundedStatus()
                    guard let feed = status?.feeds.first else { return false }
                    return feed.itemCount == 90 && feed.endReached && feed.older.phase != .loading
                }
            } catch is WaitTimedOut {
                // The expectations below name what was missing, with the last status and the log.
            }
            #expect(status?.feeds.first?.itemCount == 90, "\(String(describing: status))\n\(restarted.output)")
            #expect(restarted.output.contains("feed url changed"), "\(restarted.output)")
            #expect(restarted.output.contains("view=all"))
            #expect(try await rig.storedIDs() == EndToEndTests.ids(1...90), "kept items and the new source's, in order, once each")
        }
    }
}
