import Foundation
import SyncDaemon
import SyncStore
import Testing

/// `[daemon] change_log_removals` as the loader reads it: the store's default when absent, the
/// value when set, and an error naming the key for a value out of range.
@Suite struct ChangeLogConfigurationTests {
    @Test func removalsKeptDefaultToTheStoresAndCanBeSet() throws {
        #expect(try DaemonConfiguration.parse(oneFeed).changeLogRemovals == SQLiteFeedStore.defaultTombstoneLimit)
        #expect(try DaemonConfiguration.parse("[daemon]\nchange_log_removals = 50\n" + oneFeed).changeLogRemovals == 50)
        for bad in ["-1", "\"many\"", "20000000"] {
            #expect {
                try DaemonConfiguration.parse("[daemon]\nchange_log_removals = \(bad)\n" + oneFeed)
            } throws: { error in
                String(describing: error).contains("change_log_removals")
            }
        }
    }
}
