import CScheduling
import NIOPosix

/// Runs the CPU-heavy part of large replies (a `ListItems` page: checking and splicing up to
/// 500 stored payloads) on a thread of its own, at a lower priority than the event loops.
///
/// The event loops answer every connection: work done there queues every other client's calls
/// behind it, so sixteen clients paging through a feed pushed root's `GetStatus` past 2 s. Here
/// the kernel's scheduler keeps the event loops first: a `GetStatus` waits for a wake-up, not for
/// a page. The one thread also bounds the CPU that bulk listing takes, whatever the number of
/// clients asking.
final class BulkWorkers: Sendable {
    private let pool: NIOThreadPool

    /// Starts the thread.
    init() {
        pool = NIOThreadPool(numberOfThreads: 1)
        pool.start()
    }

    deinit {
        pool.shutdownGracefully { _ in }
    }

    /// Runs `body` on the bulk thread and returns its result.
    func run<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await pool.runIfActive {
            BackgroundScheduling.makeBackgroundWork()
            return try body()
        }
    }
}

/// Makes the calling thread background work for the scheduler: SCHED_BATCH at nice 10.
///
/// Through `sched_setattr`, which syncd's unit allows (it refuses `setpriority` with the rest of
/// `@resources`). Lowering one's own priority needs no privilege. Where the call is refused,
/// nothing changes and the work runs at normal priority.
enum BackgroundScheduling {
    /// SCHED_BATCH: never preempts on wake-up, and the scheduler treats it as CPU-bound.
    static let policy: UInt32 = 3
    /// A tenth of a nice-0 thread's weight when both want the CPU.
    static let nice: Int32 = 10

    /// Sets the policy and nice value on the calling thread, unless they are set already.
    static func makeBackgroundWork() {
        var attributes = syncd_sched_attr()
        guard syncd_sched_getattr(&attributes) == 0, attributes.sched_policy == 0 || attributes.sched_policy == policy,
              attributes.sched_policy != policy || attributes.sched_nice < nice
        else { return }
        attributes.sched_policy = policy
        attributes.sched_nice = max(attributes.sched_nice, nice)
        _ = syncd_sched_setattr(&attributes)
    }
}
