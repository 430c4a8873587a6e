import AsyncBroadcast
import CSystemdBus
import CThread
import Logging
import ServiceLifecycle
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Follows NetworkManager's `Metered` property of every device over D-Bus: which interface NetworkManager
/// says is metered, and how sure it is.
///
/// The watcher asks `org.freedesktop.NetworkManager` for its devices and each device's `Interface` and
/// `Metered`, then follows the changes: `PropertiesChanged` of the devices, `DeviceAdded` and
/// `DeviceRemoved` of the manager, and NetworkManager leaving or joining the bus (`NameOwnerChanged`).
/// It never starts NetworkManager (its calls do not activate services).
///
/// NetworkManager missing, or no bus at all, is a normal setup, not an error: the watcher logs it once at
/// info level and keeps an empty map. The bus is confined to one thread of the watcher's own, which sleeps
/// in `poll(2)` until the bus or a stop request needs it: an idle watcher never wakes up.
///
/// ```swift
/// let watcher = NetworkManagerWatcher(configuration: .init(), logger: logger)
/// // In a ServiceGroup, or:
/// Task { try await watcher.run() }
/// for await devices in watcher.updates() { print(devices["wwan0"]?.cost ?? .unknown) }
/// ```
public final class NetworkManagerWatcher: Service, Sendable {
    /// Where the watcher looks for NetworkManager, and its bounds.
    public struct Configuration: Sendable {
        /// The D-Bus address to connect to (`unix:path=/run/dbus/system_bus_socket`), or `nil` for the
        /// system bus, which honours `DBUS_SYSTEM_BUS_ADDRESS`.
        public var busAddress: String?
        /// How long a call to NetworkManager may go unanswered before the watcher gives up on it (logged;
        /// the devices it was about stay out of the map). A stuck NetworkManager costs one wake-up per call.
        public var callTimeout: Duration
        /// The most devices the watcher tracks; NetworkManager's further devices are ignored (logged at
        /// debug level), so a runaway or hostile peer costs bounded memory.
        public var maximumDevices: Int

        /// The system bus, 5 s per call, 4096 devices.
        public init(busAddress: String? = nil, callTimeout: Duration = .seconds(5), maximumDevices: Int = 4096) {
            self.busAddress = busAddress
            self.callTimeout = callTimeout
            self.maximumDevices = maximumDevices
        }
    }

    /// Why ``run()`` could not watch: it was already running, or the system refused the watcher a
    /// descriptor or a thread.
    public struct Failure: Error, CustomStringConvertible {
        /// What went wrong, in words.
        public var description: String
    }

    private struct State {
        var running = false
        /// Set when a run ended; the next run starts a fresh broadcast.
        var finished = false
        var broadcast = Broadcast<[String: NetworkManagerMetered]>(bufferingNewest: 1, latest: [:])
        /// The eventfd that tells the bus thread to stop, while a run has one; only written and closed
        /// under the lock, so a late stop request never writes to a reused descriptor number.
        var stopFD: Int32 = -1
        var threadID: Int32?
        /// The running session's first reading is over (``firstReading(within:)``).
        var firstReadingOver = false
        var firstReadingWaiters: [Int: CheckedContinuation<Void, Never>] = [:]
        var nextWaiter = 0
    }

    private let configuration: Configuration
    private let logger: Logger
    private let state = Mutex(State())

    /// A watcher that does nothing until ``run()``.
    ///
    /// - Parameters:
    ///   - configuration: the bus to use and the watcher's bounds.
    ///   - logger: where NetworkManager's presence (info) and ignored input (debug) are reported.
    public init(configuration: Configuration = .init(), logger: Logger = Logger(label: "syncd.networkmanager")) {
        self.configuration = configuration
        self.logger = logger
    }

    /// The latest `Metered` value of each NetworkManager device, by interface name (its `Interface`
    /// property). Empty while NetworkManager is not on the bus, before ``run()`` has read it and after
    /// ``run()`` has returned. A device whose name or value was unusable is left out.
    public var devices: [String: NetworkManagerMetered] {
        state.withLock { $0.broadcast }.latest ?? [:]
    }

    /// The kernel's id of the bus thread while ``run()`` runs: tests count its wake-ups and check that it
    /// ends.
    package var threadID: Int32? { state.withLock { $0.threadID } }

    /// Waits until the running watcher's first reading of NetworkManager is over (every device's
    /// `Metered` is in ``devices``, NetworkManager is absent, or the bus cannot be reached), at
    /// most `timeout`; whether it was over in time. For a caller that must not act on link costs
    /// before NetworkManager had its say (syncd starting its feeds). Returns `false` at once when
    /// the task is cancelled.
    public func firstReading(within timeout: Duration) async -> Bool {
        await firstReading(within: timeout, clock: ContinuousClock())
    }

    /// ``firstReading(within:)``, timed on `clock`. A daemon that must stay still while idle
    /// passes its own (syncd's event-loop clock): on Linux a `Task.sleep` starts libdispatch's
    /// timer thread, which then wakes the process every second for good.
    public func firstReading<C: Clock>(within timeout: Duration, clock: C) async -> Bool where C.Duration == Duration {
        await withTaskGroup(of: Bool.self) { group in
            group.addTask { await self.waitForFirstReading() }
            group.addTask {
                try? await clock.sleep(for: timeout)
                return false
            }
            let first = await group.next() ?? false
            group.cancelAll()
            return first
        }
    }

    /// Whether the first reading was over before the task was cancelled.
    private func waitForFirstReading() async -> Bool {
        let id = state.withLock { state -> Int in
            state.nextWaiter += 1
            return state.nextWaiter
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let over = state.withLock { state -> Bool in
                    if state.firstReadingOver || Task.isCancelled { return true }
                    state.firstReadingWaiters[id] = continuation
                    return false
                }
                if over { continuation.resume() }
            }
        } onCancel: {
            state.withLock { $0.firstReadingWaiters.removeValue(forKey: id) }?.resume()
        }
        return state.withLock { $0.firstReadingOver }
    }

    /// Marks the first reading over and wakes whoever waits for it.
    private func firstReadingIsOver() {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.firstReadingOver = true
            defer { state.firstReadingWaiters = [:] }
            return Array(state.firstReadingWaiters.values)
        }
        for waiter in waiters { waiter.resume() }
    }

    /// A stream of ``devices``: the current map first, then each changed one. A slow consumer sees the
    /// newest map, not a backlog. The stream finishes when ``run()`` returns (at once when it already has).
    public func updates() -> AsyncStream<[String: NetworkManagerMetered]> {
        state.withLock { $0.broadcast }.subscribe()
    }

    /// Connects to the bus and follows NetworkManager's devices until the task is cancelled or the service
    /// group shuts down gracefully; returns once the bus thread has closed the connection and its
    /// descriptors, with ``devices`` empty and every ``updates()`` stream finished.
    ///
    /// A bus that cannot be reached, or that drops the connection, is logged once; the watcher then keeps
    /// an empty map and waits for cancellation without retrying.
    ///
    /// - Throws: ``Failure`` when the watcher is already running, or no eventfd or thread could be made.
    public func run() async throws {
        let stopFD = syncd_bus_stop_fd()
        guard stopFD >= 0 else {
            throw Failure(description: "cannot make the NetworkManager watcher's stop eventfd: \(String(cString: strerror(errno)))")
        }
        let broadcast = state.withLock { state -> Broadcast<[String: NetworkManagerMetered]>? in
            guard !state.running else { return nil }
            state.running = true
            state.stopFD = stopFD
            if state.finished {
                state.finished = false
                state.broadcast = Broadcast(bufferingNewest: 1, latest: [:])
            }
            return state.broadcast
        }
        guard let broadcast else {
            close(stopFD)
            throw Failure(description: "the NetworkManager watcher is already running")
        }
        let started = await withGracefulShutdownHandler {
            await withTaskCancellationHandler {
                await runBusThread(stopFD: stopFD, broadcast: broadcast)
            } onCancel: { [self] in
                requestStop()
            }
        } onGracefulShutdown: { [self] in
            requestStop()
        }
        state.withLock { state in
            if state.stopFD >= 0 { close(state.stopFD) }
            state.stopFD = -1
            state.threadID = nil
        }
        broadcast.publish([:])
        broadcast.finish()
        state.withLock { state in
            state.running = false
            state.finished = true
            state.firstReadingOver = false
        }
        if !started { throw Failure(description: "cannot start the NetworkManager watcher's bus thread") }
    }

    /// Runs the bus on a thread of its own and returns once that thread has finished with the bus; false
    /// when no thread could be started.
    private func runBusThread(stopFD: Int32, broadcast: Broadcast<[String: NetworkManagerMetered]>) async -> Bool {
        let configuration = configuration, logger = logger
        return await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            // The continuation is resumed by the thread as its last act, or here when there is no thread:
            // exactly once either way.
            let started = startDetachedThread { [self] in
                _ = syncd_set_thread_name("syncd-nm-bus")
                state.withLock { $0.threadID = syncd_gettid() }
                let session = NetworkManagerBusSession(
                    configuration: configuration, logger: logger, firstReading: { [self] in firstReadingIsOver() }
                ) { devices in
                    broadcast.publishIfChanged(devices)
                }
                session.run(stopFD: stopFD)
                state.withLock { $0.threadID = nil }
                continuation.resume(returning: true)
            }
            if !started {
                logger.error("cannot start the NetworkManager watcher's bus thread: \(String(cString: strerror(errno)))")
                continuation.resume(returning: false)
            }
        }
    }

    /// Wakes the bus thread to stop; does nothing once the run has ended.
    private func requestStop() {
        state.withLock { state in
            guard state.stopFD >= 0 else { return }
            var one: UInt64 = 1
            _ = write(state.stopFD, &one, MemoryLayout<UInt64>.size)
        }
    }
}

/// The body of a thread started by ``startDetachedThread(_:)``, carried across `pthread_create`.
private final class ThreadBody: Sendable {
    let body: @Sendable () -> Void
    init(_ body: @escaping @Sendable () -> Void) { self.body = body }
}

/// Starts `body` on a detached POSIX thread; false (with `errno` set) when none could be started.
///
/// A thread of its own rather than one of Swift's pool: the bus thread sleeps in `poll(2)` for as long as
/// the watcher runs, and the pool has only as many threads as there are cores.
private func startDetachedThread(_ body: @escaping @Sendable () -> Void) -> Bool {
    let box = Unmanaged.passRetained(ThreadBody(body))
    var attributes = pthread_attr_t()
    pthread_attr_init(&attributes)
    defer { pthread_attr_destroy(&attributes) }
    pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
    var thread = pthread_t()
    let result = pthread_create(&thread, &attributes, { raw in
        Unmanaged<ThreadBody>.fromOpaque(raw!).takeRetainedValue().body()
        return nil
    }, box.toOpaque())
    guard result == 0 else {
        box.release()
        errno = result
        return false
    }
    return true
}
