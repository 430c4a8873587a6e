import Clocks
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

    /// Steps the clock 100 ms at a time (letting every task run between steps) until `condition` holds.
    ///
    /// The wall-clock deadline only guards against a hang: the full suite starts hundreds of tests
    /// at once on two cores, and a step can wait seconds for a thread, so it is generous.
    func advance(_ clock: TestClock<Duration>, until what: String, _ condition: @escaping () -> Bool) async throws {
        try await waitUntil(what, timeout: .seconds(40)) {
            await clock.advance(by: .milliseconds(100))
            await Task.megaYield()
            return condition()
        }
    }

    @Test func runsOncePerBurstAfterTheQuietPeriod() async throws {
        let clock = TestClock()
        let runs = Runs()
        let (activity, events) = AsyncStream.makeStream(of: Int.self)
        let release = QuietRelease(quiet: .seconds(1), clock: clock) { runs.add() }
        let task = Task { await release.run(following: activity) }
        defer { task.cancel() }

        // A burst: many events, one run once they stop.
        for event in 0..<50 { events.yield(event) }
        try await advance(clock, until: "the first burst is released") { runs.value == 1 }

        // Quiet: nothing more runs however long nothing happens.
        for _ in 0..<30 {
            await clock.advance(by: .milliseconds(100))
            await Task.megaYield()
        }
        #expect(runs.value == 1)

        // The next burst, another run.
        events.yield(50)
        try await advance(clock, until: "the second burst is released") { runs.value == 2 }
    }

    @Test func waitsWhileActivityGoesOn() async throws {
        let clock = TestClock()
        let runs = Runs()
        let (activity, events) = AsyncStream.makeStream(of: Int.self)
        let release = QuietRelease(quiet: .seconds(1), clock: clock) { runs.add() }
        let task = Task { await release.run(following: activity) }
        defer { task.cancel() }

        // An event every 200 ms for 4 s: never a second without one.
        for event in 0..<20 {
            events.yield(event)
            await Task.megaYield()
            await clock.advance(by: .milliseconds(200))
            await Task.megaYield()
        }
        #expect(runs.value == 0)
        try await advance(clock, until: "released after the activity stops") { runs.value == 1 }
    }

    @Test func endsWithItsActivity() async {
        let (activity, events) = AsyncStream.makeStream(of: Int.self)
        let release = QuietRelease(quiet: .seconds(1), clock: TestClock()) {}
        events.finish()
        // Returns, rather than waiting for a burst that can never come.
        await release.run(following: activity)
    }
}
