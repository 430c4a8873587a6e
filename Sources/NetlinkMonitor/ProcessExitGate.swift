import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Keeps libnl's cache managers from being freed while the process exits.
///
/// `nl_cache_mngr_free` withdraws each of its caches from libnl's global registry, and libnl's
/// own destructors empty that registry when the process exits: a monitor thread still freeing
/// its manager then finds no entry, and libnl aborts the process (`BUG()` in
/// `nl_cache_mngt_unprovide`). A monitor released without ``NetlinkMonitor/stop()`` ends its
/// thread on its own, which can be while the process exits. An `atexit` handler runs before the
/// shared libraries' destructors: it closes this gate, after any free in progress, and a manager
/// freed later is left to the exiting process.
enum ProcessExitGate {
    private static let exiting = Mutex(false)
    private static let armed: Void = {
        atexit { ProcessExitGate.exiting.withLock { $0 = true } }
    }()

    /// Registers the exit handler; called before the first manager exists, once libnl is loaded.
    static func arm() { _ = armed }

    /// Runs `release` unless the process has begun to exit.
    static func unlessExiting(_ release: () -> Void) {
        exiting.withLock { exiting in
            if !exiting { release() }
        }
    }
}
