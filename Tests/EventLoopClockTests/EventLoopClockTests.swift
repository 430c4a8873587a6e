import Dispatch
import EventLoopClock
import NIOCore
import NIOPosix
import Synchronization
import Testing
import TestSupport

struct EventLoopClockTests {
    @Test func sleepReturnsNoEarlierThanTheDeadline() async throws {
        let clock = EventLoopClock()
        let deadline = clock.now.advanced(by: .milliseconds(30))
        try await clock.sleep(until: deadline)
        #expect(clock.now >= deadline)
    }

    /// A deadline already passed returns without a timer: the clock never asks its group for a
    /// loop. Elapsed time is not checked, as that would measure the machine; the bound only turns
    /// a hang into a failure.
    @Test(.timeLimit(.minutes(1))) func aDeadlineInThePastReturnsAtOnce() async throws {
        let group = CountingGroup()
        let clock = EventLoopClock(group: group)
        let sleeps = BoundedTask {
            try await clock.sleep(until: clock.now.advanced(by: .seconds(-5)))
            try await clock.sleep(for: .zero)
        }
        try await sleeps.value("sleeping until deadlines already passed")
        #expect(group.loopsTaken == 0, "a passed deadline scheduled a timer")
        // The count does see timers, so zero above means none.
        let before = group.loopsTaken
        try await clock.sleep(for: .milliseconds(1))
        #expect(group.loopsTaken == before + 1)
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

/// NIO's singleton loops, counting every loop taken from them: the clock schedules its timers on
/// a loop from its group, so a count of zero means no timer was scheduled.
private final class CountingGroup: EventLoopGroup, Sendable {
    private let loops = MultiThreadedEventLoopGroup.singleton
    private let taken = Atomic(0)

    /// Loops handed out by ``next()``, ``any()`` and iteration so far.
    var loopsTaken: Int { taken.load(ordering: .relaxed) }

    func next() -> any EventLoop {
        taken.add(1, ordering: .relaxed)
        return loops.next()
    }

    func any() -> any EventLoop {
        taken.add(1, ordering: .relaxed)
        return loops.any()
    }

    func makeIterator() -> EventLoopIterator {
        taken.add(1, ordering: .relaxed)
        return loops.makeIterator()
    }

    func shutdownGracefully(queue: DispatchQueue, _ callback: @escaping @Sendable ((any Error)?) -> Void) {
        loops.shutdownGracefully(queue: queue, callback)
    }
}
