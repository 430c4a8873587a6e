import Foundation
import SyncCore

/// Whether syncd's feeds are healthy, as a fleet's checks read it from `syncctl status`'s exit
/// status.
///
/// A feed is **failed** when a direction's last load failed and no automatic retry is due (a
/// permanent error such as 404 or an untrusted certificate, or the retry budget spent) while its
/// host is not the reason (a paused direction waits for connectivity, it has not failed). A
/// feed is **stale** when no page was stored for longer than its age limit: since its last
/// stored page, or, for a feed that never stored one, since syncd started.
public struct ControlHealth: Sendable, Hashable {
    /// Feeds that failed, in status order.
    public var failed: [String]
    /// Feeds that are stale (and not failed), in status order.
    public var stale: [String]

    /// The exit status `syncctl status` ends with, as documented in docs/operations.md.
    public enum ExitStatus: Int32, Sendable, CaseIterable {
        /// Every feed is healthy.
        case healthy = 0
        /// syncctl could not get a status (syncd not running, no permission to connect, a feed
        /// name that is not configured). A malformed command line exits 64 (`EX_USAGE`) before
        /// anything is asked.
        case unavailable = 1
        /// Some feed is stale, none failed.
        case stale = 2
        /// Some feed failed.
        case failed = 3
    }

    /// The health of `status` at `now`; `staleAfter` overrides every feed's own limit.
    public init(_ status: ControlStatus, now: Date, staleAfter: Duration? = nil) {
        var failed: [String] = []
        var stale: [String] = []
        for feed in status.feeds {
            if Self.hasFailed(feed) {
                failed.append(feed.name)
                continue
            }
            let limit = staleAfter.map(\.secondsValue) ?? feed.staleAfter.map(Double.init)
            guard let limit, let since = feed.lastSync ?? status.started else { continue }
            if now.timeIntervalSince(since) > limit { stale.append(feed.name) }
        }
        self.failed = failed
        self.stale = stale
    }

    /// The exit status this health maps to: failed outranks stale.
    public var exitStatus: ExitStatus {
        if !failed.isEmpty { return .failed }
        if !stale.isEmpty { return .stale }
        return .healthy
    }

    /// A direction failed and nothing will try it again by itself.
    static func hasFailed(_ feed: ControlFeed) -> Bool {
        feed.directions.contains { _, state in
            state.phase == .failed && !state.paused && state.nextRetryAt == nil
        }
    }
}
