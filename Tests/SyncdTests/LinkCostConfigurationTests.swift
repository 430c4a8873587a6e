import Foundation
import LinkCost
import SyncCore
import SyncDaemon
import Testing

/// `[network] metered`, `unmetered` and `networkmanager`, and a feed's `on_metered` and
/// `metered_budget`, as the loader reads them.
@Suite struct LinkCostConfigurationTests {
    @Test func readsTheGlobsAndTheSwitch() throws {
        let defaults = try DaemonConfiguration.parse(oneFeed)
        #expect(defaults.linkCost.globs == LinkCostGlobs())
        #expect(defaults.followsNetworkManager)
        let configuration = try DaemonConfiguration.parse("""
            [network]
            metered = ["wwan*", "ppp?"]
            unmetered = ["enx*"]
            networkmanager = false
            \(oneFeed)
            """)
        #expect(configuration.linkCost.globs == LinkCostGlobs(metered: ["wwan*", "ppp?"], unmetered: ["enx*"]))
        #expect(!configuration.followsNetworkManager)
    }

    @Test func readsAFeedsPolicyAndBudget() throws {
        let defaults = try DaemonConfiguration.parse(oneFeed)
        #expect(defaults.feeds[0].sync.onMetered == .newer)
        #expect(defaults.feeds[0].sync.meteredBudget == nil)
        for (text, bytes) in [("\"50MB\"", Int64(50_000_000)), ("\"1.5 GB\"", 1_500_000_000), ("\"512KiB\"", 524_288), ("4096", 4096)] {
            let configuration = try DaemonConfiguration.parse(oneFeed + "\non_metered = \"pause\"\nmetered_budget = \(text)\n")
            #expect(configuration.feeds[0].sync.onMetered == .pause)
            #expect(configuration.feeds[0].sync.meteredBudget?.bytesPerDay == bytes, "\(text)")
            #expect(configuration.feeds[0].sync.meteredBudget?.timeZone == .current)
        }
    }

    @Test(arguments: [
        ("on_metered = \"never\"", "feed[0].on_metered", "must be one of sync, newer, pause"),
        ("on_metered = true", "feed[0].on_metered", "must be a string"),
        ("metered_budget = \"lots\"", "feed[0].metered_budget", "must be a number of bytes above 0"),
        ("metered_budget = 0", "feed[0].metered_budget", "must be a number of bytes above 0"),
        ("metered_budget = \"-5MB\"", "feed[0].metered_budget", "must be a number of bytes above 0"),
    ])
    func badFeedKeysAreLocated(line: String, key: String, message: String) {
        expectRefusal(oneFeed + "\n" + line + "\n", line: 4, key: key, message: message)
    }

    @Test(arguments: [
        ("[network]\nmetered = \"wwan*\"\n", "network.metered", "must be an array of link-name globs"),
        ("[network]\nmetered = [\"wwan*\", \"\"]\n", "network.metered", "must be an array of link-name globs"),
        ("[network]\nunmetered = [\"eth\\u0007*\"]\n", "network.unmetered", "must be an array of link-name globs"),
        ("[network]\nunmetered = [\"\(String(repeating: "e", count: 65))\"]\n", "network.unmetered", "at most 64 bytes"),
        ("[network]\nnetworkmanager = \"yes\"\n", "network.networkmanager", "must be true or false"),
    ])
    func badKeysAreLocated(text: String, key: String, message: String) {
        expectRefusal(text + oneFeed, line: 2, key: key, message: message)
    }
}
