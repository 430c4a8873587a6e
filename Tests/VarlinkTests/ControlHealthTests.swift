import Foundation
import SyncControl
import Testing

/// What `syncctl status`'s exit status says for each state of the feeds.
@Suite("Health from the status")
struct ControlHealthTests {
    static let now = Samples.now
    static let presentation = ControlPresentation(main: .empty)

    static func feed(_ name: String, lastSync: TimeInterval?, staleAfter: Int? = nil, older: ControlDirection = .loaded) -> ControlFeed {
        ControlFeed(
            name: name, initial: .loaded, older: older, newer: .loaded,
            lastSync: lastSync.map { now.addingTimeInterval(-$0) }, presentation: presentation, staleAfter: staleAfter)
    }

    static func health(_ feeds: [ControlFeed], started: TimeInterval? = 10_000, staleAfter: Duration? = nil) -> ControlHealth {
        ControlHealth(ControlStatus(version: "t", feeds: feeds, started: started.map { now.addingTimeInterval(-$0) }), now: now, staleAfter: staleAfter)
    }

    @Test func healthyWhenEveryFeedSyncedWithinItsLimit() {
        let health = Self.health([Self.feed("a", lastSync: 60, staleAfter: 3600), Self.feed("b", lastSync: 7200)])
        #expect(health.exitStatus == .healthy)
        #expect(health.exitStatus.rawValue == 0)
    }

    @Test func staleWhenNoPageForLongerThanTheLimit() {
        let health = Self.health([Self.feed("a", lastSync: 3601, staleAfter: 3600), Self.feed("b", lastSync: 10)])
        #expect(health.stale == ["a"])
        #expect(health.exitStatus == .stale)
        #expect(health.exitStatus.rawValue == 2)
    }

    /// A feed that never stored a page counts from syncd's start.
    @Test func neverSyncedCountsFromStart() {
        #expect(Self.health([Self.feed("a", lastSync: nil, staleAfter: 600)], started: 601).exitStatus == .stale)
        #expect(Self.health([Self.feed("a", lastSync: nil, staleAfter: 600)], started: 599).exitStatus == .healthy)
        #expect(Self.health([Self.feed("a", lastSync: nil, staleAfter: 600)], started: nil).exitStatus == .healthy)
    }

    /// The command line's limit replaces each feed's own, also where a feed has none.
    @Test func theOptionOverridesTheFeedsLimit() {
        let feeds = [Self.feed("a", lastSync: 120, staleAfter: 3600), Self.feed("b", lastSync: 30)]
        #expect(Self.health(feeds, staleAfter: .seconds(60)).stale == ["a"])
        #expect(Self.health(feeds, staleAfter: .seconds(20)).stale == ["a", "b"])
    }

    /// Failed means nothing will try again by itself; a retry due or a pause is not failed.
    @Test func failedOnlyWithoutAnAutomaticRetry() {
        let permanent = ControlDirection.failed("HTTP 404", attempt: 1, nextRetryAt: nil)
        let retrying = ControlDirection.failed("timeout", attempt: 2, nextRetryAt: Self.now.addingTimeInterval(5))
        let paused = ControlDirection.failed("timeout", attempt: 2, nextRetryAt: nil, paused: true)
        #expect(Self.health([Self.feed("a", lastSync: 1, older: permanent)]).exitStatus == .failed)
        #expect(Self.health([Self.feed("a", lastSync: 1, older: permanent)]).exitStatus.rawValue == 3)
        #expect(Self.health([Self.feed("a", lastSync: 1, older: retrying)]).exitStatus == .healthy)
        #expect(Self.health([Self.feed("a", lastSync: 1, older: paused)]).exitStatus == .healthy)
        // Failed outranks stale.
        let both = Self.health([Self.feed("a", lastSync: 1, older: permanent), Self.feed("b", lastSync: 9000, staleAfter: 60)])
        #expect(both.failed == ["a"] && both.stale == ["b"])
        #expect(both.exitStatus == .failed)
    }

    /// The sample status the other syncctl tests use is healthy: they expect exit 0.
    @Test func theSampleStatusIsHealthy() {
        #expect(ControlHealth(Samples.status(), now: Samples.now).exitStatus == .healthy)
    }
}
