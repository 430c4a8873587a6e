import CGlobalExecutor
import NIOCore
import NIOPosix

/// Swift concurrency's global executor replaced by SwiftNIO's singleton event loops, in a binary
/// that links the Swift runtime in as well as in one that loads it.
///
/// A task then runs on the event loop that resumed it (the loop that read a response, say), with
/// no hand-over to another thread, and libdispatch's thread pool never starts: its monitor would
/// otherwise wake the process every second for good, and an idle daemon would never be idle.
///
/// SwiftNIO offers the same through
/// `NIOSingletons.unsafeTryInstallSingletonPosixEventLoopGroupAsConcurrencyGlobalExecutor()`,
/// which finds the runtime's hook with `dlsym`. A binary built with `--static-swift-stdlib` has no
/// dynamic symbol for it: that call returns `false`, and every task runs on libdispatch's threads,
/// with the idle wake-ups above and a slower sync (BENCHMARKS.md, "The installed syncd on its
/// event loops"). Here a C declaration reaches the hook, which links in either build.
///
/// Jobs go where SwiftNIO's own hook sends them: to the loop the enqueuing thread runs, when it is
/// one of the singleton group's, or else to the group's next loop.
public enum EventLoopGlobalExecutor {
    /// Sends every job bound for the global executor to `MultiThreadedEventLoopGroup.singleton`
    /// from now on.
    ///
    /// Call it once, first thing in `main`, before any task starts: a task already on
    /// libdispatch's pool stays there.
    ///
    /// - Returns: `false` when this was installed before, or another hook (SwiftNIO's, say) was:
    ///   the first one stays.
    @discardableResult
    public static func install() -> Bool {
        syncd_install_global_enqueue { job in
            // The hook is handed the runtime's job pointer, which is all an `UnownedJob` holds.
            let unowned = unsafeBitCast(job, to: UnownedJob.self)
            MultiThreadedEventLoopGroup.singleton.any().enqueue(ExecutorJob(unowned))
        }
    }
}
