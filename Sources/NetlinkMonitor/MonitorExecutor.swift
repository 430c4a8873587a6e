import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Runs jobs on the monitor's own thread, between its reads of the kernel's notifications: the
/// executor behind ``NetlinkMonitor/taskExecutor``.
///
/// A consumer task that prefers it is resumed by a verdict or snapshot on the thread that
/// published it, so no other thread has to wake for the hand-over (on a loaded machine that
/// wake-up is most of what the monitor adds to a kernel event's latency). While no thread runs,
/// jobs go to the global concurrent executor: a task never waits for a stopped monitor.
final class MonitorExecutor: TaskExecutor, Sendable {
    private struct State: ~Copyable {
        var jobs: [UnownedJob] = []
        /// The monitor's thread while it runs jobs; `nil` before ``attach()`` and after ``detach()``.
        var thread: pthread_t?
        /// The pipe that wakes the thread for jobs enqueued elsewhere; closed under the lock, so
        /// a writer never sees its number reused.
        var readFD: Int32 = -1
        var writeFD: Int32 = -1
    }

    private let state = Mutex(State())

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let accepted = state.withLock { state -> Bool in
            guard let thread = state.thread else { return false }
            // One wake-up covers every job queued before the thread takes them.
            if state.jobs.isEmpty, pthread_equal(thread, pthread_self()) == 0 { MonitorCore.wake(state.writeFD) }
            state.jobs.append(job)
            return true
        }
        if !accepted { globalConcurrentExecutor.enqueue(ExecutorJob(job)) }
    }

    /// Called on the monitor's thread before it runs jobs; returns the descriptor that becomes
    /// readable when a job is enqueued from another thread.
    func attach() throws(NetlinkError) -> Int32 {
        let (readFD, writeFD) = try MonitorCore.makePipe()
        state.withLock { state in
            state.thread = pthread_self()
            state.readFD = readFD
            state.writeFD = writeFD
        }
        return readFD
    }

    /// Called on the monitor's thread when it stops running jobs: those still queued and every
    /// later one go to the global concurrent executor.
    func detach() {
        let orphans = state.withLock { state -> [UnownedJob] in
            state.thread = nil
            if state.readFD >= 0 { close(state.readFD) }
            if state.writeFD >= 0 { close(state.writeFD) }
            state.readFD = -1
            state.writeFD = -1
            defer { state.jobs = [] }
            return state.jobs
        }
        for job in orphans { globalConcurrentExecutor.enqueue(ExecutorJob(job)) }
    }

    /// Runs the jobs queued so far, on the calling thread (the monitor's). Jobs they enqueue
    /// wait for the next call. Returns whether any are waiting. The caller empties the wake-up
    /// descriptor when `poll` finds it readable; a wake-up left over from jobs already taken
    /// costs one empty turn of the loop, never a job.
    @discardableResult
    func runJobs() -> Bool {
        let jobs = state.withLock { state in
            defer { state.jobs = [] }
            return state.jobs
        }
        if !jobs.isEmpty {
            let executor = asUnownedTaskExecutor()
            for job in jobs { job.runSynchronously(on: executor) }
        }
        return state.withLock { !$0.jobs.isEmpty }
    }
}
