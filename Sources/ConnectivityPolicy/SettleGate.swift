/// Decides when a new verdict is published: offline at once, online only after it has held
/// for a settle period, so a flapping link yields one online rather than one per flap.
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

    public let settle: Duration
    /// The last verdict published, `nil` before the first.
    public private(set) var published: Verdict?
    /// An online verdict waiting for its settle period.
    public private(set) var pending: (verdict: Verdict, due: Instant)?

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
            if let waiting = pending, waiting.verdict == verdict { return .none }
            let due = now.advanced(by: settle)
            pending = (verdict, due)
            if settle <= .zero { return deadlineReached(at: now) }
            return .schedule(due)
        }
        pending = nil
        if current == verdict { return .cancelTimer }
        published = verdict
        return .publish(verdict)
    }

    /// Called when the armed timer fires.
    public mutating func deadlineReached(at now: Instant) -> Action {
        guard let waiting = pending, now >= waiting.due else { return .none }
        pending = nil
        published = waiting.verdict
        return .publish(waiting.verdict)
    }
}
