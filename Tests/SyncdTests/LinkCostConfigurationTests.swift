import Foundation
import LinkCost
import SyncDaemon
import Testing

/// `[network] metered`, `unmetered` and `networkmanager` as the loader reads them.
@Suite struct LinkCostConfigurationTests {
    static let feed = """
        [[feed]]
        name = "home"
        url = "https://mastodon.example/api/v1/timelines/home"
        """

    @Test func readsTheGlobsAndTheSwitch() throws {
        let defaults = try DaemonConfiguration.parse(Self.feed)
        #expect(defaults.linkCost.globs == LinkCostGlobs())
        #expect(defaults.followsNetworkManager)
        let configuration = try DaemonConfiguration.parse("""
            [network]
            metered = ["wwan*", "ppp?"]
            unmetered = ["enx*"]
            networkmanager = false
            \(Self.feed)
            """)
        #expect(configuration.linkCost.globs == LinkCostGlobs(metered: ["wwan*", "ppp?"], unmetered: ["enx*"]))
        #expect(!configuration.followsNetworkManager)
    }

    @Test(arguments: [
        ("[network]\nmetered = \"wwan*\"\n", "network.metered", "must be an array of link-name globs"),
        ("[network]\nmetered = [\"wwan*\", \"\"]\n", "network.metered", "must be an array of link-name globs"),
        ("[network]\nunmetered = [\"eth\\u0007*\"]\n", "network.unmetered", "must be an array of link-name globs"),
        ("[network]\nunmetered = [\"\(String(repeating: "e", count: 65))\"]\n", "network.unmetered", "at most 64 bytes"),
        ("[network]\nnetworkmanager = \"yes\"\n", "network.networkmanager", "must be true or false"),
    ])
    func badKeysAreLocated(text: String, key: String, message: String) {
        do {
            _ = try DaemonConfiguration.parse(text + Self.feed, file: "t.toml")
            Issue.record("accepted: \(text)")
        } catch {
            #expect(error.line == 2, "\(error)")
            #expect(error.key == key, "\(error)")
            #expect(error.message.contains(message), "\(error)")
        }
    }
}
