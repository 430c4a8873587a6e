import ConnectivityPolicy
import Logging
import NetlinkMonitor
import ServiceLifecycle
import Synchronization
import TestSupport
import Testing

/// The monitor's thread has one owner and ends on every path: stop, release, cancellation,
/// graceful shutdown. Watches the caller's own namespace, so no root is needed.
///
/// What these tests wait for comes from the monitor's thread, and a regression here is a wait
/// that never ends: `start()`, `stop()` and the tasks the tests make are awaited through
/// ``boundedValue(of:_:timeout:)``, which the suite's time limit could not end.
@Suite(.timeLimit(.minutes(1)))
struct MonitorLifecycleTests {
    /// Starts a monitor and returns its thread's id, checked to carry the monitor's name.
    private func started(_ monitor: NetlinkMonitor) async throws -> Int32 {
        try await start(monitor)
        let tid = try #require(monitor.threadID)
        #expect(ProcessThreads.name(of: tid) == "syncd-netlink")
        return tid
    }

    @Test func releasedWithoutStopEndsItsThreadAndStreams() async throws {
        var monitor: NetlinkMonitor? = NetlinkMonitor()
        let tid = try await started(monitor!)
        var snapshots = monitor!.snapshots().makeAsyncIterator()
        #expect(await snapshots.next() != nil)
        monitor = nil
        let gone = try await ProcessThreads.waitUntilGone(tid)
        #expect(gone, "the thread of a released monitor ended")
        // Only then can the stream have finished; waiting on it otherwise would hang the test.
        if gone { #expect(await snapshots.next() == nil, "its streams finished") }
    }

    @Test func stopEndsTheThreadAndAStoppedMonitorStartsAgain() async throws {
        let monitor = NetlinkMonitor()
        let first = try await started(monitor)
        try await stop(monitor)
        // stop() returns when the thread has done its last work; it exits right after.
        #expect(try await ProcessThreads.waitUntilGone(first), "stop() ended the thread")
        #expect(monitor.threadID == nil)
        var ended = monitor.snapshots().makeAsyncIterator()
        #expect(await ended.next() == nil, "a stopped monitor's streams end at once")

        let second = try await started(monitor)
        #expect(second != first)
        var snapshots = monitor.snapshots().makeAsyncIterator()
        #expect(await snapshots.next() != nil, "the restarted monitor publishes")
        try await stop(monitor)
        try await stop(monitor)  // twice is harmless
        #expect(try await ProcessThreads.waitUntilGone(second))
    }

    @Test func startingARunningMonitorSaysSo() async throws {
        let monitor = NetlinkMonitor()
        _ = try await started(monitor)
        await #expect(throws: NetlinkError.self) { try await start(monitor) }
        try await stop(monitor)
    }

    @Test func runEndsOnCancellation() async throws {
        let monitor = NetlinkMonitor()
        let running = Task { try await monitor.run() }
        try await waitUntil("the monitor runs") { monitor.threadID != nil }
        let tid = try #require(monitor.threadID)
        running.cancel()
        try await boundedValue(of: running, "run() returns once cancelled")
        #expect(try await ProcessThreads.waitUntilGone(tid))
    }

    @Test func runEndsOnGracefulShutdownInAServiceGroup() async throws {
        let monitor = NetlinkMonitor()
        let group = ServiceGroup(configuration: .init(services: [monitor], logger: Logger(label: "test")))
        let running = Task { try await group.run() }
        try await waitUntil("the monitor runs") { monitor.threadID != nil }
        let tid = try #require(monitor.threadID)
        await group.triggerGracefulShutdown()
        try await boundedValue(of: running, "the service group returns after a graceful shutdown")
        #expect(try await ProcessThreads.waitUntilGone(tid))
    }

    @Test func tasksPreferringTheExecutorRunOnTheMonitorsThreadAndComeBackToIt() async throws {
        let monitor = NetlinkMonitor()
        let tid = try await started(monitor)
        let threads = try await boundedValue(of: Task(executorPreference: monitor.taskExecutor) { () async -> [Int32?] in
            let first = ProcessThreads.currentID
            // Resumed by a timer on another thread: that thread has to wake the monitor's.
            try? await Task.sleep(for: .milliseconds(20))
            let afterSleep = ProcessThreads.currentID
            var snapshots = monitor.snapshots().makeAsyncIterator()
            _ = await snapshots.next()
            return [first, afterSleep, ProcessThreads.currentID]
        }, "the task on the monitor's executor ends")
        #expect(threads == [tid, tid, tid])

        // A verdict consumer on the executor receives the first verdict on the monitor's thread.
        let verdictThread = try await boundedValue(of: Task(executorPreference: monitor.taskExecutor) { () async -> Int32? in
            for await _ in ConnectivityMonitor.verdicts(from: monitor, settle: .zero) {
                return ProcessThreads.currentID
            }
            return nil
        }, "the verdict consumer on the monitor's executor ends")
        #expect(verdictThread == tid)
        try await stop(monitor)
    }

    @Test func aStoppedMonitorsExecutorRunsTasksElsewhereAndNeverStrandsThem() async throws {
        let monitor = NetlinkMonitor()
        let notStarted = try await boundedValue(of: Task(executorPreference: monitor.taskExecutor) { ProcessThreads.currentID }, "a task on a monitor that never started ends")
        #expect(notStarted != nil, "a monitor that never started still runs its executor's tasks")

        let tid = try await started(monitor)
        let gate = Gate()
        // Suspended on the monitor's thread while the monitor stops; resumed after it stopped.
        let waiting = Task(executorPreference: monitor.taskExecutor) { () async -> [Int32?] in
            let before = ProcessThreads.currentID
            await gate.wait()
            return [before, ProcessThreads.currentID]
        }
        try await waitUntil("the task waits at the gate") { gate.isWaiting }
        try await stop(monitor)
        #expect(try await ProcessThreads.waitUntilGone(tid))
        gate.open()
        let threads = try await boundedValue(of: waiting, "the task resumed after the monitor stopped ends")
        #expect(threads.first == tid)
        #expect(threads.last != tid && threads.last != nil, "resumed on another thread once the monitor's had ended")

        let restarted = try await started(monitor)
        #expect(try await boundedValue(of: Task(executorPreference: monitor.taskExecutor) { ProcessThreads.currentID }, "a task on the restarted monitor ends") == restarted)
        try await stop(monitor)
    }

    /// Starts `monitor`, bounded.
    private func start(_ monitor: NetlinkMonitor) async throws {
        try await boundedValue(of: Task { try await monitor.start() }, "start() returns")
    }

    /// Stops `monitor`, bounded.
    private func stop(_ monitor: NetlinkMonitor) async throws {
        try await boundedValue(of: Task { await monitor.stop() }, "stop() returns")
    }
}

extension MonitorLifecycleTests {
    /// Many tasks hop on and off the monitor's thread (yields, which come back from the thread
    /// itself; an actor and sleeps, which come back from other threads) while the monitor stops
    /// and starts under them: every task finishes, so no job was lost or stranded.
    @Test func tasksHoppingOnAndOffWhileTheMonitorRestartsAllFinish() async throws {
        let monitor = NetlinkMonitor()
        try await start(monitor)
        let counter = HopCounter()
        let tasks = (0..<40).map { index in
            Task(executorPreference: monitor.taskExecutor) {
                for hop in 0..<25 {
                    switch (index + hop) % 3 {
                    case 0: await Task.yield()
                    case 1: await counter.add()
                    default: try? await Task.sleep(for: .microseconds(200))
                    }
                }
            }
        }
        for _ in 0..<5 {
            try await Task.sleep(for: .milliseconds(3))
            try await stop(monitor)
            try await Task.sleep(for: .milliseconds(2))
            try await start(monitor)
        }
        try await boundedValue(of: Task { for task in tasks { await task.value } }, "every hopping task finishes")
        try await stop(monitor)
        #expect(await counter.count == (0..<40).reduce(0) { total, index in total + (0..<25).filter { (index + $0) % 3 == 1 }.count })
    }
}

private actor HopCounter {
    private(set) var count = 0
    func add() { count += 1 }
}

/// A continuation one task waits on and another opens, from any thread.
private final class Gate: Sendable {
    private let state = Mutex<(waiter: CheckedContinuation<Void, Never>?, open: Bool)>((nil, false))

    var isWaiting: Bool { state.withLock { $0.waiter != nil } }

    func wait() async {
        await withCheckedContinuation { continuation in
            let openAlready = state.withLock { state -> Bool in
                if state.open { return true }
                state.waiter = continuation
                return false
            }
            if openAlready { continuation.resume() }
        }
    }

    func open() {
        let waiter = state.withLock { state in
            state.open = true
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
    }
}
