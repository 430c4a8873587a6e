import CScheduling

/// Makes the calling thread throughput work for the scheduler: a long slice, kept for good.
///
/// Linux's EEVDF scheduler (6.12 and later) picks, among runnable threads of equal weight, the
/// one whose virtual deadline comes first: one slice after it became eligible. A thread with a
/// long slice keeps its share of the CPU, but it no longer preempts a thread with a shorter one
/// when it wakes up, and one that wakes up while it runs (an event loop with a response to read,
/// the feed's server, anything interactive on the machine) goes first, instead of waiting out a
/// commit's bursts of several milliseconds.
///
/// The slice must be in place when the thread wakes up, which is when it would preempt, so it is
/// kept on the thread rather than set for the length of each commit; a backfill then takes less
/// time for the same CPU (measured: BENCHMARKS.md, "The B-trees' order, the writer's slice").
///
/// Older kernels ignore the slice. Where the call is refused (a seccomp filter without
/// `sched_setattr`), or the thread runs under a policy without slices (idle, real-time, deadline),
/// nothing changes.
package enum WriterScheduling {
    /// The slice asked for, in nanoseconds: far above the default (0.75 ms times 1 + log2 of the
    /// cores, at most 4), below the kernel's ceiling of 100 ms.
    package static let slice: UInt64 = 20_000_000

    /// Gives the calling thread ``slice``, unless it has a slice at least as long already.
    package static func makeThroughputWork() {
        var attributes = syncd_sched_attr()
        // SCHED_OTHER (0) and SCHED_BATCH (3) have slices; under SCHED_DEADLINE the same field
        // is the thread's reserved runtime, which must not change.
        guard syncd_sched_getattr(&attributes) == 0, attributes.sched_policy == 0 || attributes.sched_policy == 3,
              attributes.sched_runtime < slice
        else { return }
        // Policy, nice and reset-on-fork are passed back as read.
        attributes.sched_runtime = slice
        _ = syncd_sched_setattr(&attributes)
    }
}
