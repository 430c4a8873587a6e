import Foundation
import SyncDaemon
import SyncMetrics
import Testing

/// `[metrics]` and `stale_after` as the loader reads them, and where it says what is wrong.
@Suite struct MetricsConfigurationTests {
    @Test func metricsAreOffByDefault() throws {
        let configuration = try DaemonConfiguration.parse(oneFeed)
        #expect(configuration.metricsEndpoint == nil)
        #expect(configuration.metricsTextfile == nil)
        #expect(configuration.feeds[0].staleAfter == nil)
    }

    @Test func readsEveryMetricsKey() throws {
        let configuration = try DaemonConfiguration.parse("""
            [metrics]
            listen = "[::1]:9559"
            textfile = "/var/lib/prometheus/node-exporter/syncd.prom"
            textfile_interval = "30s"
            \(oneFeed)
            stale_after = "2h"
            """)
        #expect(configuration.metricsEndpoint?.address == .tcp(host: "::1", port: 9559))
        #expect(configuration.metricsTextfile?.path == "/var/lib/prometheus/node-exporter/syncd.prom")
        #expect(configuration.metricsTextfile?.interval == .seconds(30))
        #expect(configuration.feeds[0].staleAfter == .seconds(7200))
        // The defaults are the modules' own.
        let defaults = try DaemonConfiguration.parse("[metrics]\nlisten = \"/run/syncd/metrics.sock\"\ntextfile = \"/x/syncd.prom\"\n" + oneFeed)
        #expect(defaults.metricsEndpoint?.address == .unix(path: "/run/syncd/metrics.sock"))
        #expect(defaults.metricsEndpoint?.maxConnections == MetricsEndpoint.Configuration(address: .unix(path: "/")).maxConnections)
        #expect(defaults.metricsTextfile?.interval == MetricsTextfileConfiguration(path: "/").interval)
    }

    @Test(arguments: [
        ("[metrics]\nlisten = \"9559\"\n", 2, "metrics.listen", "must be HOST:PORT"),
        ("[metrics]\nlisten = \"127.0.0.1:70000\"\n", 2, "metrics.listen", "must be HOST:PORT"),
        ("[metrics]\ntextfile = \"syncd.prom\"\n", 2, "metrics.textfile", "must be an absolute path"),
        ("[metrics]\ntextfile = \"/x/syncd.txt\"\n", 2, "metrics.textfile", "must end in .prom"),
        ("[metrics]\ntextfile_interval = \"5s\"\n", 2, "metrics.textfile_interval", "needs textfile"),
        ("[metrics]\nport = 1\n", 2, "metrics.port", "unknown key"),
    ])
    func badMetricsAreLocated(text: String, line: Int, key: String, message: String) {
        expectRefusal(text + oneFeed, line: line, key: key, message: message)
    }

    @Test func staleAfterMustBeADuration() {
        #expect(throws: ConfigurationError.self) { try DaemonConfiguration.parse(oneFeed + "\nstale_after = \"soon\"") }
        #expect(throws: ConfigurationError.self) { try DaemonConfiguration.parse(oneFeed + "\nstale_after = 0") }
        // Past Int64's milliseconds the conversion used to trap: now it is a clear error.
        #expect(throws: ConfigurationError.self) { try DaemonConfiguration.parse(oneFeed + "\nstale_after = \"1e300h\"") }
    }
}
