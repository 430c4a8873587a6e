import Synchronization

/// A clock that moves only when a test advances it, and that tells the test who is asleep on it.
///
/// A test that advances a clock before the code under test has started the sleep it means to
/// wake races that code: the sleep is registered after the advance, from the advanced `now`, and
/// the wake never comes. So the advances that mean to wake or approach a sleeper first wait,
/// bounded by real time, until that sleeper is asleep: ``advance(by:waking:timeout:)`` and
/// ``advance(by:before:timeout:)``. A plain ``advance(by:)`` is for moving time where no sleeper
/// is expected (and ``sleepers`` can show that none is).
///
/// swift-clocks' `TestClock` keeps its suspensions private, so a test cannot wait for one; this
/// clock's sleep is otherwise the same contract (a sleep whose deadline has come returns at once,
/// a cancelled sleep throws `CancellationError` and leaves no sleeper behind).
public final class ManualClock: Clock, Sendable {
    /// A point on the clock: the time advanced since the clock was made.
    public struct Instant: InstantProtocol, CustomStringConvertible {
        /// Time since the clock's start.
        public let offset: Duration

        /// An instant `offset` after the clock's start.
        public init(offset: Duration = .zero) { self.offset = offset }

        public func advanced(by duration: Duration) -> Instant { Instant(offset: offset + duration) }
        public func duration(to other: Instant) -> Duration { other.offset - offset }
        public static func < (lhs: Instant, rhs: Instant) -> Bool { lhs.offset < rhs.offset }
        public var description: String { "+\(offset)" }
    }

    private struct Sleeper {
        var deadline: Instant
        var continuation: CheckedContinuation<Void, any Error>
    }

    private struct State {
        var now = Instant()
        var nextID: UInt64 = 0
        var sleepers: [UInt64: Sleeper] = [:]
    }

    private let state = Mutex(State())

    /// A clock at its start, with nobody asleep on it.
    public init() {}

    /// The current instant; it changes only through the `advance` calls.
    public var now: Instant { state.withLock { $0.now } }

    /// The clock does not round deadlines.
    public var minimumResolution: Duration { .zero }

    /// The deadlines of the sleeps under way, earliest first.
    public var sleepers: [Instant] { state.withLock { $0.sleepers.values.map(\.deadline).sorted() } }

    /// Returns once an advance has reached `deadline` (at once if it already has); throws
    /// `CancellationError` when the task is cancelled first.
    public func sleep(until deadline: Instant, tolerance: Duration? = nil) async throws {
        let id = state.withLock { state in
            defer { state.nextID += 1 }
            return state.nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                // Cancellation is flagged before its handler runs, so a cancel that came before
                // this point is seen here, and one that comes after finds the sleeper below.
                let immediate: Result<Void, any Error>? = state.withLock { state in
                    if Task.isCancelled { return .failure(CancellationError()) }
                    if deadline <= state.now { return .success(()) }
                    state.sleepers[id] = Sleeper(deadline: deadline, continuation: continuation)
                    return nil
                }
                if let immediate { continuation.resume(with: immediate) }
            }
        } onCancel: {
            state.withLock { $0.sleepers.removeValue(forKey: id) }?.continuation.resume(throwing: CancellationError())
        }
    }

    /// Moves the clock `duration` forward, waking each sleeper whose deadline it passes in
    /// deadline order (`now` stands at each one's deadline as it wakes), and lets the woken tasks
    /// run before it returns.
    ///
    /// It does not wait for anybody to fall asleep: a sleep that starts after this call is
    /// counted from the new `now`. To wake a sleeper, use ``advance(by:waking:timeout:)``.
    public func advance(by duration: Duration) async {
        let target = now.advanced(by: duration)
        while true {
            let woken: Sleeper? = state.withLock { state in
                guard let (id, next) = state.sleepers.min(by: { $0.value.deadline < $1.value.deadline }),
                      next.deadline <= target else {
                    state.now = max(state.now, target)
                    return nil
                }
                state.sleepers[id] = nil
                state.now = max(state.now, next.deadline)
                return next
            }
            guard let woken else { break }
            woken.continuation.resume()
            await Self.letOthersRun()
        }
        await Self.letOthersRun()
    }

    /// Waits until somebody is asleep with a deadline within `duration` from now, then advances
    /// by `duration`, so at least that sleeper wakes.
    ///
    /// - Parameter what: the sleeper the test means to wake, named in the error.
    /// - Throws: ``WaitTimedOut`` when no such sleeper comes within `timeout` of real time.
    public func advance(by duration: Duration, waking what: String, timeout: Duration = hangGuard) async throws {
        try await waitForSleeper(what, timeout: timeout, dueWithin: duration) { $0 <= $1 }
        await advance(by: duration)
    }

    /// Waits until somebody is asleep with a deadline later than `duration` from now, then
    /// advances by `duration`: time comes close to that sleeper's deadline without reaching it.
    ///
    /// For a check that something does not happen before its time: without the wait, the sleep
    /// could start after the advance and be counted from its end, and the check would prove
    /// nothing.
    ///
    /// - Parameter what: the sleeper the test approaches, named in the error.
    /// - Throws: ``WaitTimedOut`` when no such sleeper comes within `timeout` of real time.
    public func advance(by duration: Duration, before what: String, timeout: Duration = hangGuard) async throws {
        try await waitForSleeper(what, timeout: timeout, dueWithin: duration) { $0 > $1 }
        await advance(by: duration)
    }

    /// Advances by `step` each time somebody is asleep on the clock, until `condition` holds.
    ///
    /// For code that sleeps an unknown number of times before it gets somewhere (a quiet period
    /// that restarts while events are still being counted): time moves only while somebody waits
    /// for it, never ahead of a sleep that has not started.
    ///
    /// - Parameter what: what the test waits for, named in the error.
    /// - Throws: ``WaitTimedOut`` when `condition` does not hold within `timeout` of real time.
    public func advance(
        by step: Duration, eachTimeAsleepUntil what: String, timeout: Duration = hangGuard,
        _ condition: () async throws -> Bool
    ) async throws {
        try await waitUntil(what, timeout: timeout, interval: .milliseconds(1)) {
            if try await condition() { return true }
            if !sleepers.isEmpty { await advance(by: step) }
            return try await condition()
        }
    }

    /// Waits until a sleeper's deadline and `now + duration` satisfy `matches`.
    private func waitForSleeper(
        _ what: String, timeout: Duration, dueWithin duration: Duration, _ matches: (Instant, Instant) -> Bool
    ) async throws {
        do {
            try await waitUntil("\(what) is asleep on the test clock", timeout: timeout, interval: .milliseconds(1)) {
                let (now, deadlines) = state.withLock { state in (state.now, state.sleepers.values.map(\.deadline)) }
                return deadlines.contains { matches($0, now.advanced(by: duration)) }
            }
        } catch let error as WaitTimedOut {
            throw WaitTimedOut(description: "\(error.description) (an advance by \(duration) from \(now); sleepers: \(sleepers))")
        }
    }

    /// Lets the tasks just woken run up to their next suspension, as far as yielding can: a
    /// test that needs one of them to have got somewhere waits for that, not for this.
    private static func letOthersRun() async {
        await Task.megaYield()
    }
}

extension Task where Success == Never, Failure == Never {
    /// Yields `count` times, letting other tasks run as far as they get meanwhile.
    ///
    /// Only for checks that something did *not* happen (a request not sent, a count not grown):
    /// such a check cannot fail because the machine is slow. To wait for something to happen,
    /// wait for it (``waitUntil(_:timeout:interval:isolation:_:)``).
    public static func megaYield(count: Int = 20) async {
        for _ in 0..<count { await Task.yield() }
    }
}
