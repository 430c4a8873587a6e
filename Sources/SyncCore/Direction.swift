import Foundation

/// The three ways a feed loads, after Android Paging's refresh / append / prepend.
public enum Direction: String, Sendable, Hashable, Codable, CaseIterable, CustomStringConvertible {
    /// The first load of a feed that has nothing stored yet.
    case initial
    /// Older items appended at the bottom (infinite scroll, `max_id`).
    case older
    /// Newer items prepended at the top (pull to refresh, `min_id`).
    case newer

    /// `initial`, `older` or `newer`, as logs and the control API spell it.
    public var description: String { rawValue }
}

/// A failure of one direction, with where its retry budget stands.
public struct LoadFailure: Sendable, Hashable {
    /// The last failure.
    public var error: FeedError
    /// Consecutive failures of this direction, counting this one (1 after the first failure).
    public var attempt: Int
    /// When the next automatic attempt runs; `nil` when none is scheduled (permanent error,
    /// budget spent, or paused while offline).
    public var nextRetryAt: Date?

    /// A failure on its `attempt`-th consecutive try, retried at `nextRetryAt` when scheduled.
    public init(error: FeedError, attempt: Int, nextRetryAt: Date?) {
        self.error = error
        self.attempt = attempt
        self.nextRetryAt = nextRetryAt
    }
}

/// The load state of one direction.
public enum LoadState: Sendable, Hashable {
    /// Nothing has run yet (or a pause put it back to where it started).
    case idle
    /// A request is in flight.
    case loading
    /// The last request failed.
    case failed(LoadFailure)
    /// The last request succeeded.
    case loaded

    /// A request is in flight.
    public var isLoading: Bool { self == .loading }

    /// The failure when the last request failed, else `nil`.
    public var failure: LoadFailure? {
        if case .failed(let failure) = self { return failure }
        return nil
    }
}

/// One direction: its load state plus the orthogonal `paused` flag (TanStack Query's
/// `fetchStatus: paused`): the direction wants to run and waits for connectivity.
public struct DirectionState: Sendable, Hashable {
    /// Where the direction's loading stands.
    public var load: LoadState
    /// Waiting for connectivity. Never true while ``load`` is `.loading`.
    public var paused: Bool
    /// While ``load`` is `.loading` again after a failure: that failure. A client keeps
    /// showing it ("retrying…") instead of flashing back to a loading view on every retry.
    public var retrying: LoadFailure?
    /// The host is reachable but the link's cost holds this direction back: it would load now
    /// otherwise, and loads once the hold lifts. Never set while ``load`` is `.loading`.
    public var held: LoadHold?

    /// A direction in the given state; the defaults are a direction that has not run.
    public init(load: LoadState = .idle, paused: Bool = false, retrying: LoadFailure? = nil, held: LoadHold? = nil) {
        self.load = load
        self.paused = paused
        self.retrying = retrying
        self.held = held
    }
}
