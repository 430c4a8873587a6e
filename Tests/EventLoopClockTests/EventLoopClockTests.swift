import EventLoopClock
import NIOPosix
import Testing
import TestSupport

struct EventLoopClockTests {
    @Test func sleepReturnsNoEarlierThanTheDeadline() async throws {
        let clock = EventLoopClock()
        let deadline = clock.now.advanced(by: .milliseconds(30))
        try await clock.sleep(until: deadline)
        #expect(clock.now >= deadline)
    }

    @Test func aDeadlineInThePastReturnsAtOnce() async throws {
        let clock = EventLoopClock()
        try await clock.sleep(until: clock.now.advanced(by: .seconds(-5)))
        try await clock.sleep(for: .zero)
    }

    /// A cancelled hour-long sleep must end now, with `CancellationError`, not when the timer fires.
    @Test(.timeLimit(.minutes(1))) func cancellationEndsALongSleepWithCancellationError() async throws {
        let clock = EventLoopClock()
        let sleeper = Task { try await clock.sleep(for: .seconds(3600)) }
        try await clock.sleep(for: .milliseconds(20))
        sleeper.cancel()
        let ended = try await boundedResult(of: sleeper, "the cancelled sleep ends")
        #expect(throws: CancellationError.self) { try ended.get() }
    }

    @Test(.timeLimit(.minutes(1))) func aTaskCancelledBeforeSleepingThrows() async throws {
        let clock = EventLoopClock()
        let sleeper = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            try await clock.sleep(for: .seconds(3600))
        }
        let ended = try await boundedResult(of: sleeper, "the sleep of a cancelled task ends")
        #expect(throws: CancellationError.self) { try ended.get() }
    }

    @Test func sleepsOnTheGroupItIsGiven() async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let clock = EventLoopClock(group: group)
        let start = clock.now
        try await clock.sleep(for: .milliseconds(10))
        #expect(start.duration(to: clock.now) >= .milliseconds(10))
        try await group.shutdownGracefully()
    }
}
