import Foundation
import SyncDaemon
import SyncStore
import Testing

/// `[daemon] change_log_removals` as the loader reads it: the store's default when absent, the
/// value when set, and an error naming the key for a value out of range.
@Suite struct ChangeLogConfigurationTests {
    static let feed = """
        [[feed]]
        name = "home"
        url = "https://mastodon.example/api/v1/timelines/home"
        """

    @Test func removalsKeptDefaultToTheStoresAndCanBeSet() throws {
        #expect(try DaemonConfiguration.parse(Self.feed).changeLogRemovals == SQLiteFeedStore.defaultTombstoneLimit)
        #expect(try DaemonConfiguration.parse("[daemon]\nchange_log_removals = 50\n" + Self.feed).changeLogRemovals == 50)
        for bad in ["-1", "\"many\"", "20000000"] {
            #expect {
                try DaemonConfiguration.parse("[daemon]\nchange_log_removals = \(bad)\n" + Self.feed)
            } throws: { error in
                String(describing: error).contains("change_log_removals")
            }
        }
    }
}
