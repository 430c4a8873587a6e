import Foundation
import NetlinkMonitor
import TestSupport
import Testing

/// A process that exits while released monitors end their threads exits with its own status.
///
/// libnl's destructors run at exit and empty its registry of cache types; a monitor thread that
/// frees its cache manager after that makes libnl abort the process (status 134, seen after a
/// test run whose tests had all passed). Watches the caller's own namespace: no root needed.
@Suite(.timeLimit(.minutes(3)))
struct ProcessExitTests {
    static let childVariable = "SYNCD_TEST_EXIT_CHILD"
    static let monitors = 8

    @Test func exitingWhileReleasedMonitorsEndExitsWithTheProcessStatus() async throws {
        let binary = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
        let directory = try TemporaryDirectory()
        var statuses: [Int32] = []
        for run in 0..<30 {
            let child = try ChildProcess(
                ["\(Self.childVariable)=\(run)", binary, "--testing-library", "swift-testing", "--filter", "exitsRightAfterReleasingMonitors"],
                logPath: directory.file("child-\(run).log"))
            let status = await child.waitForExit()
            statuses.append(status)
            if status != 0 {
                Issue.record("run \(run): the child exited with status \(status), not 0:\n\(child.output.suffix(2_000))")
                return
            }
        }
        #expect(statuses.allSatisfy { $0 == 0 })
    }

    /// The child's part: starts monitors, releases them (each thread is asked to end and frees its
    /// manager on its own), and exits at once, at a moment that moves from run to run.
    @Test(.enabled(if: ProcessInfo.processInfo.environment[childVariable] != nil))
    func exitsRightAfterReleasingMonitors() async throws {
        let run = Int(ProcessInfo.processInfo.environment[Self.childVariable] ?? "") ?? 0
        var monitors = (0..<Self.monitors).map { _ in NetlinkMonitor() }
        for monitor in monitors { try await monitor.start() }
        monitors.removeAll()
        usleep(UInt32(run % 10) * 50)
        exit(0)
    }
}
