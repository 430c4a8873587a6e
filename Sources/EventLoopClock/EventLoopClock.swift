import NIOCore
import NIOPosix

/// A clock whose sleeps are timers on SwiftNIO event loops: the continuous clock's time, without
/// `Task.sleep`.
///
/// On Linux `Task.sleep` and `ContinuousClock.sleep` hand the waiting task to libdispatch, and the
/// first time such a timer fires libdispatch starts a thread-pool monitor that wakes the process
/// every second from then on. A daemon that sleeps for an hour between refreshes would never be
/// idle. Sleeping on this clock costs one timer on an event loop the process runs anyway, and
/// nothing once it has fired or been cancelled.
///
/// Instants are `ContinuousClock` instants, so deadlines and durations mix freely with code that
/// reads `ContinuousClock.now`.
public struct EventLoopClock: Clock, Sendable {
    /// An instant of the continuous clock.
    public typealias Instant = ContinuousClock.Instant

    private let group: any EventLoopGroup

    /// A clock whose timers run on `group`'s loops (by default NIO's singleton group, which
    /// AsyncHTTPClient also uses).
    public init(group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton) {
        self.group = group
    }

    /// The continuous clock's current instant.
    public var now: Instant { ContinuousClock.now }

    /// The continuous clock's resolution.
    public var minimumResolution: Duration { ContinuousClock().minimumResolution }

    /// Suspends until `deadline`; throws `CancellationError` at once when the task is cancelled,
    /// and the timer goes with it.
    public func sleep(until deadline: Instant, tolerance: Duration? = nil) async throws {
        let delay = ContinuousClock.now.duration(to: deadline)
        guard delay > .zero else {
            try Task.checkCancellation()
            return
        }
        let (seconds, attoseconds) = delay.components
        // Saturating: a deadline centuries away is a timer that never fires, not a negative one.
        let (whole, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        let (sum, carry) = whole.addingReportingOverflow(attoseconds / 1_000_000_000)
        let nanoseconds = overflow || carry ? Int64.max : sum
        let timer = group.next().scheduleTask(in: .nanoseconds(nanoseconds)) {}
        try await withTaskCancellationHandler {
            do {
                try await timer.futureResult.get()
            } catch {
                // The only way the timer fails is by being cancelled, which only cancellation does.
                throw CancellationError()
            }
        } onCancel: {
            timer.cancel()
        }
    }
}
