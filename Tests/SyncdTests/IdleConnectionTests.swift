import Foundation
import HTTPFeedSource
import SyncCore
import Testing
@testable import SyncDaemon

/// How long syncd keeps an idle feed connection follows the feeds' refresh intervals.
struct IdleConnectionTests {
    private func configuration(refreshing intervals: [Duration?]) -> DaemonConfiguration {
        var configuration = DaemonConfiguration()
        configuration.feeds = intervals.enumerated().map { index, interval in
            DaemonConfiguration.Feed(
                name: "f\(index)", http: HTTPFeedConfiguration(url: URL(string: "http://127.0.0.1:1/f\(index)")!),
                sync: SyncConfiguration(refreshInterval: interval), keepItems: nil, keepAge: nil)
        }
        return configuration
    }

    @Test func withNoRefreshWithinAMinuteTheConnectionGoesSoon() {
        #expect(configuration(refreshing: []).idleConnectionTimeout == .seconds(2))
        #expect(configuration(refreshing: [nil, .seconds(3600)]).idleConnectionTimeout == .seconds(2))
        #expect(configuration(refreshing: [.seconds(56)]).idleConnectionTimeout == .seconds(2), "56 s + 5 s is past a minute")
    }

    @Test func theSoonestRefreshWithinAMinuteReusesIt() {
        #expect(configuration(refreshing: [.seconds(3600), .seconds(30), nil]).idleConnectionTimeout == .seconds(35))
        #expect(configuration(refreshing: [.seconds(55)]).idleConnectionTimeout == .seconds(60))
    }
}
