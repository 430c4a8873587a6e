import Foundation
import Logging
import SyncDaemon

/// The embedded default: syncd with no configuration file syncs a bundled demo feed.
enum DemoDefaults {
    static let feedName = "demo"
    static let directory = "/tmp/syncd-demo"

    /// The demo feed starts with this many items…
    static let items = 1000
    /// …and gains one every two seconds.
    static let itemsPerSecond = 0.5

    /// The daemon configuration for the demo; `port` is the demo server's.
    static func configuration(port: Int = 8080, overriding base: DaemonConfiguration? = nil) -> DaemonConfiguration {
        var configuration = base ?? DaemonConfiguration()
        if base == nil {
            configuration.storePath = "\(directory)/syncd.sqlite"
            configuration.controlSocketPath = geteuid() == 0 ? "/run/syncd/io.syncd" : "\(directory)/io.syncd"
            configuration.settle = .seconds(1)
            configuration.reconnectSpread = .milliseconds(200)
        }
        let text = """
            [[feed]]
            name = "\(feedName)"
            url = "http://127.0.0.1:\(port)/feeds/\(feedName)"
            page_size = 50
            refresh_interval = "5s"
            backfill = 1000
            """
        // The same parser as real configurations, so the demo exercises it too.
        let feeds = (try? DaemonConfiguration.parse(text, file: "<demo>"))?.feeds ?? []
        configuration.feeds = feeds.map { feed in
            var feed = feed
            feed.sync.reconnectSpread = configuration.reconnectSpread
            return feed
        }
        return configuration
    }
}
