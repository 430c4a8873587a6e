import Foundation
import SyncCore

/// Maps a clock's instants to wall-clock dates for display (offline since, next retry, last sync).
///
/// Scheduling stays on the injected clock; dates are derived from it, so with a test clock and a
/// fixed origin every date in a feed's state is reproducible.
struct TimeBase<C: Clock>: Sendable where C.Duration == Duration {
    let clock: C
    let origin: C.Instant
    let wallOrigin: Date

    init(clock: C, wallOrigin: Date) {
        self.clock = clock
        self.origin = clock.now
        self.wallOrigin = wallOrigin
    }

    var now: Date { date(at: clock.now) }

    func date(at instant: C.Instant) -> Date {
        wallOrigin.addingTimeInterval(origin.duration(to: instant).secondsValue)
    }
}
