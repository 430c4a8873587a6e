import DemoFeedServer
import Foundation
import Logging
import SyncDaemon

/// The embedded default: syncd with no configuration file syncs a bundled demo feed.
enum DemoDefaults {
    static let feedName = "demo"
    static let directory = "/tmp/syncd-demo"

    /// A demo feed of 1,000 items, gaining one every two seconds, on a free loopback port.
    static func server(logger: Logger) throws -> DemoFeedServer {
        var configuration = DemoFeedServer.Configuration()
        configuration.host = "127.0.0.1"
        configuration.port = 0
        configuration.feeds = [FeedDefinition(name: feedName, initialCount: 1000, itemsPerSecond: 0.5)]
        return try DemoFeedServer(configuration: configuration, logger: logger)
    }

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
