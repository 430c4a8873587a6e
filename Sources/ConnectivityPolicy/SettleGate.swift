/// How long online must hold before it is published, unless configured: long enough for a
/// flapping link to settle, short enough that nobody waits for it. Every part that settles
/// verdicts (the monitor's verdict streams, the per-host reachability, syncd's `[network]
/// settle`) starts from this one value.
public let defaultSettleDelay: Duration = .seconds(2)

/// Decides when a new verdict is published: offline at once, online only after it has held
/// for a settle period, so a flapping link yields one online rather than one per flap.
///
/// A change of offline reason while already offline also waits for the settle period, so the
/// same flapping link yields one offline, not one per reason it passes through.
///
/// A pure state machine over any clock's instants; the caller owns the timer.
public struct SettleGate<Instant: InstantProtocol>: Sendable where Instant.Duration == Duration {
    /// What the caller should do after feeding an input.
    public enum Action: Sendable, Equatable {
        /// Publish this verdict now.
        case publish(Verdict)
        /// Arm (or re-arm) the timer: call `deadlineReached(at:)` at this instant.
        case schedule(Instant)
        /// Nothing to publish; cancel any armed timer.
        case cancelTimer
        /// Nothing changes.
        case none
    }

    /// How long an online verdict (or a new offline reason) must hold before it is published; zero or less publishes at once.
    public let settle: Duration
    /// The last verdict published, `nil` before the first.
    public private(set) var published: Verdict?
    /// An online verdict waiting for its settle period.
    public private(set) var pending: (verdict: Verdict, due: Instant)?

    /// A gate that has published nothing yet: the first verdict it observes is published at once.
    public init(settle: Duration) {
        self.settle = settle
    }

    /// Feeds the verdict computed from the latest snapshot.
    public mutating func observe(_ verdict: Verdict, at now: Instant) -> Action {
        guard let current = published else {
            // The very first verdict is the starting state, not a transition: publish it as is.
            published = verdict
            return .publish(verdict)
        }
        if verdict.isOnline {
            if current == verdict {
                let hadPending = pending != nil
                pending = nil
                return hadPending ? .cancelTimer : .none
            }
            return hold(verdict, at: now)
        }
        if current.isOnline {
            // Losing connectivity is published at once: requests must stop now.
            pending = nil
            published = verdict
            return .publish(verdict)
        }
        if current == verdict {
            pending = nil
            return .cancelTimer
        }
        // Already offline, for another reason: while a link flaps the reason changes on every
        // step (no carrier, no route, …), and a client would redraw its banner each time. The
        // new reason is published once it has held for the settle period, like online.
        return hold(verdict, at: now)
    }

    /// Makes `verdict` the one waiting for the settle period, unless it already is.
    private mutating func hold(_ verdict: Verdict, at now: Instant) -> Action {
        if let waiting = pending, waiting.verdict == verdict { return .none }
        let due = now.advanced(by: settle)
        pending = (verdict, due)
        if settle <= .zero { return deadlineReached(at: now) }
        return .schedule(due)
    }

    /// Called when the armed timer fires.
    public mutating func deadlineReached(at now: Instant) -> Action {
        guard let waiting = pending, now >= waiting.due else { return .none }
        pending = nil
        published = waiting.verdict
        return .publish(waiting.verdict)
    }
}
