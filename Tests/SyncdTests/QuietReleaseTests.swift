import Synchronization
@testable import SyncDaemon
import Testing
import TestSupport

/// The daemon's memory release after syncing goes quiet, on a test clock.
@Suite(.timeLimit(.minutes(1)))
struct QuietReleaseTests {
    /// Counts the action's runs.
    final class Runs: Sendable {
        private let count = Atomic<Int>(0)
        func add() { count.add(1, ordering: .relaxed) }
        var value: Int { count.load(ordering: .relaxed) }
    }

    /// The test's activity, counting how far the release has read it: once it asks for element
    /// `n + 1`, it has counted the first `n` (the count and the signal come before the next ask).
    struct CountedActivity: AsyncSequence, Sendable {
        typealias Element = Int
        typealias Failure = Never
        let events: AsyncStream<Int>
        let asks = Runs()

        struct AsyncIterator: AsyncIteratorProtocol {
            typealias Element = Int
            typealias Failure = Never
            var inner: AsyncStream<Int>.AsyncIterator
            let asks: Runs
            mutating func next() async -> Int? {
                asks.add()
                return await inner.next()
            }
        }

        func makeAsyncIterator() -> AsyncIterator { AsyncIterator(inner: events.makeAsyncIterator(), asks: asks) }

        /// Waits until the release has counted `count` events.
        func waitUntilCounted(_ count: Int) async throws {
            try await waitUntil("the release has counted \(count) events") { asks.value > count }
        }
    }

    /// Runs `body` beside a release with a quiet period of one second on `clock`, following the
    /// `activity` that `body` feeds through `events`, and counting its `runs`.
    private func withRelease(
        _ body: (_ clock: ManualClock, _ runs: Runs, _ events: AsyncStream<Int>.Continuation, _ activity: CountedActivity) async throws -> Void
    ) async throws {
        let clock = ManualClock()
        let runs = Runs()
        let (stream, events) = AsyncStream.makeStream(of: Int.self)
        let activity = CountedActivity(events: stream)
        let release = QuietRelease(quiet: .seconds(1), clock: clock) { runs.add() }
        let task = Task { await release.run(following: activity) }
        defer { task.cancel() }
        try await body(clock, runs, events, activity)
    }

    @Test func runsOncePerBurstAfterTheQuietPeriod() async throws {
        try await withRelease { clock, runs, events, activity in
            // A burst: many events, one run once they stop. Time moves only once all are counted,
            // and only while the quiet wait sleeps (it sleeps again if it began before the last one).
            for event in 0..<50 { events.yield(event) }
            try await activity.waitUntilCounted(50)
            try await clock.advance(by: .seconds(1), eachTimeAsleepUntil: "the first burst is released") { runs.value == 1 }

            // Quiet: nothing sleeps, and nothing more runs however long nothing happens.
            try await waitUntil("the quiet wait has ended") { clock.sleepers.isEmpty }
            await clock.advance(by: .seconds(3600))
            await Task.megaYield()
            #expect(runs.value == 1)

            // The next burst, another run.
            events.yield(50)
            try await activity.waitUntilCounted(51)
            try await clock.advance(by: .seconds(1), eachTimeAsleepUntil: "the second burst is released") { runs.value == 2 }
        }
    }

    @Test func waitsWhileActivityGoesOn() async throws {
        try await withRelease { clock, runs, events, activity in
            // An event every 200 ms for 4 s: never a second without one. Each step waits until the
            // event is counted and the quiet wait sleeps past the step.
            for event in 0..<20 {
                events.yield(event)
                try await activity.waitUntilCounted(event + 1)
                try await waitUntil("the quiet wait sleeps") { !clock.sleepers.isEmpty }
                await clock.advance(by: .milliseconds(200))
            }
            #expect(runs.value == 0)
            try await clock.advance(by: .seconds(1), eachTimeAsleepUntil: "released after the activity stops") { runs.value == 1 }
        }
    }

    @Test func endsWithItsActivity() async {
        let (activity, events) = AsyncStream.makeStream(of: Int.self)
        let release = QuietRelease(quiet: .seconds(1), clock: ManualClock()) {}
        events.finish()
        // Returns, rather than waiting for a burst that can never come.
        await release.run(following: activity)
    }
}
