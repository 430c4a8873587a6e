import ConnectivityPolicy
import Logging
import NetlinkMonitor
import ServiceLifecycle
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
}
