import Foundation

/// How a failed direction is retried automatically: capped exponential backoff with jitter,
/// the server's `Retry-After` as a floor, and an optional budget.
///
/// Defaults (``RetryPolicy/default``) and why:
/// - `base` 1 s, `multiplier` 1.6, `cap` 120 s are gRPC's connection-backoff constants
///   (INITIAL_BACKOFF, MULTIPLIER, MAX_BACKOFF). 1.6 grows more gently than doubling, so a
///   short outage is retried a few times within its first ten seconds, while the 120 s cap keeps
///   a long outage to one request per feed every minute on average, which no server minds.
/// - Full jitter (a uniform delay in `0...ceiling`): AWS's "Exponential Backoff And Jitter"
///   measured it to finish the work with the fewest calls of all the variants, and it spreads
///   a fleet of daemons that failed at the same moment (a server restart) instead of
///   synchronising them. gRPC's ±20 % jitter keeps clients bunched up.
/// - No attempt limit: syncd mirrors feeds unattended, and transient errors (timeouts, 5xx,
///   429) do end; the cap bounds the cost. Permanent errors (4xx other than 408 and 429) are
///   never retried automatically, whatever the budget.
/// - `Retry-After` is a floor, even above the cap: the server said when it can take a request.
public struct RetryPolicy: Sendable, Hashable {
    /// How the delay is randomised below its ceiling.
    public enum Jitter: String, Sendable, Hashable, Codable {
        /// A uniform delay in `0...ceiling` (AWS "full jitter").
        case full
        /// Exactly the ceiling (for tests and special needs).
        case none
    }

    /// The ceiling after the first failure.
    public var base: Duration
    /// Growth of the ceiling per further failure.
    public var multiplier: Double
    /// The largest ceiling.
    public var cap: Duration
    /// Automatic attempts allowed before giving up until a manual retry; `nil` for no limit.
    /// Counts failures: with 3, a direction that failed three times in a row waits for `retry()`.
    public var maxAutomaticAttempts: Int?
    /// How the actual delay is drawn below the ceiling.
    public var jitter: Jitter

    /// A policy; the defaults are syncd's: 1 s, ×1.6, at most 2 min, no attempt limit, full jitter.
    public init(
        base: Duration = .seconds(1),
        multiplier: Double = 1.6,
        cap: Duration = .seconds(120),
        maxAutomaticAttempts: Int? = nil,
        jitter: Jitter = .full
    ) {
        self.base = base
        self.multiplier = max(1, multiplier)
        self.cap = cap
        self.maxAutomaticAttempts = maxAutomaticAttempts
        self.jitter = jitter
    }

    /// gRPC's constants with full jitter and no attempt limit; see the type's documentation.
    public static let `default` = RetryPolicy()

    /// The largest delay after `attempt` consecutive failures (1-based): `min(cap, base × multiplier^(attempt-1))`.
    public func ceiling(afterAttempt attempt: Int) -> Duration {
        let exponent = Double(max(0, attempt - 1))
        // Computed in seconds so a long failure streak saturates at the cap instead of overflowing.
        let seconds = min(cap.secondsValue, base.secondsValue * pow(multiplier, exponent))
        return seconds >= cap.secondsValue ? cap : .seconds(seconds)
    }

    /// The delay before the next automatic attempt.
    ///
    /// - Parameters:
    ///   - attempt: consecutive failures so far, counting the one just seen.
    ///   - retryAfter: the server's `Retry-After`, a floor for the delay.
    ///   - fraction: a random value in `0...1` from a ``RandomSource``.
    public func delay(afterAttempt attempt: Int, retryAfter: Duration?, fraction: Double) -> Duration {
        let ceiling = ceiling(afterAttempt: attempt)
        let jittered: Duration
        switch jitter {
        case .none: jittered = ceiling
        case .full: jittered = .seconds(ceiling.secondsValue * min(1, max(0, fraction)))
        }
        guard let retryAfter else { return jittered }
        return max(jittered, retryAfter)
    }

    /// Whether a failure may be retried without being asked to.
    public func retriesAutomatically(_ error: FeedError, attempt: Int) -> Bool {
        if error.isPermanent { return false }
        if let limit = maxAutomaticAttempts, attempt >= limit { return false }
        return true
    }
}
