import ConnectivityPolicy
import Logging
import NetlinkMonitor
import ServiceLifecycle
import Synchronization
import TestSupport
import Testing

/// The monitor's thread has one owner and ends on every path: stop, release, cancellation,
/// graceful shutdown. Watches the caller's own namespace, so no root is needed.
@Suite(.timeLimit(.minutes(1)))
struct MonitorLifecycleTests {
    /// Starts a monitor and returns its thread's id, checked to carry the monitor's name.
    private func started(_ monitor: NetlinkMonitor) async throws -> Int32 {
        try await monitor.start()
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
        await monitor.stop()
        // stop() returns when the thread has done its last work; it exits right after.
        #expect(try await ProcessThreads.waitUntilGone(first), "stop() ended the thread")
        #expect(monitor.threadID == nil)
        var ended = monitor.snapshots().makeAsyncIterator()
        #expect(await ended.next() == nil, "a stopped monitor's streams end at once")

        let second = try await started(monitor)
        #expect(second != first)
        var snapshots = monitor.snapshots().makeAsyncIterator()
        #expect(await snapshots.next() != nil, "the restarted monitor publishes")
        await monitor.stop()
        await monitor.stop()  // twice is harmless
        #expect(try await ProcessThreads.waitUntilGone(second))
    }

    @Test func startingARunningMonitorSaysSo() async throws {
        let monitor = NetlinkMonitor()
        _ = try await started(monitor)
        await #expect(throws: NetlinkError.self) { try await monitor.start() }
        await monitor.stop()
    }

    @Test func runEndsOnCancellation() async throws {
        let monitor = NetlinkMonitor()
        let running = Task { try await monitor.run() }
        try await waitUntil("the monitor runs") { monitor.threadID != nil }
        let tid = try #require(monitor.threadID)
        running.cancel()
        try await running.value
        #expect(try await ProcessThreads.waitUntilGone(tid))
    }

    @Test func runEndsOnGracefulShutdownInAServiceGroup() async throws {
        let monitor = NetlinkMonitor()
        let group = ServiceGroup(configuration: .init(services: [monitor], logger: Logger(label: "test")))
        let running = Task { try await group.run() }
        try await waitUntil("the monitor runs") { monitor.threadID != nil }
        let tid = try #require(monitor.threadID)
        await group.triggerGracefulShutdown()
        try await running.value
        #expect(try await ProcessThreads.waitUntilGone(tid))
    }

    @Test func tasksPreferringTheExecutorRunOnTheMonitorsThreadAndComeBackToIt() async throws {
        let monitor = NetlinkMonitor()
        let tid = try await started(monitor)
        let threads = await Task(executorPreference: monitor.taskExecutor) { () async -> [Int32?] in
            let first = ProcessThreads.currentID
            // Resumed by a timer on another thread: that thread has to wake the monitor's.
            try? await Task.sleep(for: .milliseconds(20))
            let afterSleep = ProcessThreads.currentID
            var snapshots = monitor.snapshots().makeAsyncIterator()
            _ = await snapshots.next()
            return [first, afterSleep, ProcessThreads.currentID]
        }.value
        #expect(threads == [tid, tid, tid])

        // A verdict consumer on the executor receives the first verdict on the monitor's thread.
        let verdictThread = await Task(executorPreference: monitor.taskExecutor) { () async -> Int32? in
            for await _ in ConnectivityMonitor.verdicts(from: monitor, settle: .zero) {
                return ProcessThreads.currentID
            }
            return nil
        }.value
        #expect(verdictThread == tid)
        await monitor.stop()
    }

    @Test func aStoppedMonitorsExecutorRunsTasksElsewhereAndNeverStrandsThem() async throws {
        let monitor = NetlinkMonitor()
        let notStarted = await Task(executorPreference: monitor.taskExecutor) { ProcessThreads.currentID }.value
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
        await monitor.stop()
        #expect(try await ProcessThreads.waitUntilGone(tid))
        gate.open()
        let threads = await waiting.value
        #expect(threads.first == tid)
        #expect(threads.last != tid && threads.last != nil, "resumed on another thread once the monitor's had ended")

        let restarted = try await started(monitor)
        #expect(await Task(executorPreference: monitor.taskExecutor) { ProcessThreads.currentID }.value == restarted)
        await monitor.stop()
    }
}

extension MonitorLifecycleTests {
    /// Many tasks hop on and off the monitor's thread (yields, which come back from the thread
    /// itself; an actor and sleeps, which come back from other threads) while the monitor stops
    /// and starts under them: every task finishes, so no job was lost or stranded.
    @Test func tasksHoppingOnAndOffWhileTheMonitorRestartsAllFinish() async throws {
        let monitor = NetlinkMonitor()
        try await monitor.start()
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
            await monitor.stop()
            try await Task.sleep(for: .milliseconds(2))
            try await monitor.start()
        }
        for task in tasks { await task.value }
        await monitor.stop()
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
