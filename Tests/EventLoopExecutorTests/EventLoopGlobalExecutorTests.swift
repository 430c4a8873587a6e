import EventLoopExecutor
import Foundation
import NIOPosix
import Testing

/// Each case runs in a process of its own: the hook, once set, holds for the whole process.
///
/// The parent waits for its child's exit without regard to cancellation or time limits, so each
/// child first sets an alarm (``childDeadline``): a broken hook that strands the child's tasks
/// ends in SIGALRM, whose default action kills it, and the parent sees a signal, not success.
@Suite struct EventLoopGlobalExecutorTests {
    /// Seconds a child may run before SIGALRM kills it: a hang guard, far above its real work.
    static let childDeadline: UInt32 = 120

    /// Called first in each child: SIGALRM at its default action (death), due in ``childDeadline``.
    static func armChildDeadline() {
        signal(SIGALRM, SIG_DFL)
        alarm(childDeadline)
    }

    /// Without the hook a detached task runs on libdispatch's pool; with it, on one of the
    /// singleton group's loops, and a second install leaves the first hook in place.
    @Test func tasksRunOnTheSingletonLoopsOnceInstalled() async {
        await #expect(processExitsWith: .success) {
            EventLoopGlobalExecutorTests.armChildDeadline()
            let before = await Task.detached { MultiThreadedEventLoopGroup.currentEventLoop != nil }.value
            guard !before else { exit(2) }
            guard EventLoopGlobalExecutor.install() else { exit(3) }
            let after = await Task.detached { MultiThreadedEventLoopGroup.currentEventLoop != nil }.value
            guard after else { exit(4) }
            guard !EventLoopGlobalExecutor.install() else { exit(5) }
            exit(0)
        }
    }

    /// A task made on an event loop's thread runs on that loop: the hook sends a job to the loop
    /// it was enqueued from, as SwiftNIO's own does, so a task resumed by a response goes on where
    /// the response was read.
    @Test func aTaskMadeOnALoopRunsOnIt() async {
        await #expect(processExitsWith: .success) {
            EventLoopGlobalExecutorTests.armChildDeadline()
            guard EventLoopGlobalExecutor.install() else { exit(3) }
            let group = MultiThreadedEventLoopGroup.singleton
            // Every loop in turn, many times: a hook that picked a loop of its own would land
            // elsewhere for some of them.
            for _ in 0..<50 {
                let loop = group.next()
                guard let task = try? await loop.submit({ Task { loop.inEventLoop } }).get(), await task.value else { exit(6) }
            }
            exit(0)
        }
    }
}
