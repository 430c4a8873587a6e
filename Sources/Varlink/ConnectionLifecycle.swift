import Logging
import Synchronization

/// The life of one server connection, after sd-varlink's server states: `idle` (waiting for a
/// call), `processing` (one call running), `streaming` (a `more` call sending replies),
/// `closing` (final; nothing new starts).
///
/// The reader, the call processor and the idle timer of a connection run concurrently; this is
/// the one place where they agree on what may happen next, so that every way a connection can
/// end (hang-up during a stream, idle timeout, protocol violation, server shutdown) reaches
/// `closing` and the connection, with its slot, is let go.
final class ConnectionLifecycle: Sendable {
    enum Phase: String, Sendable {
        case idle, processing, streaming, closing
    }

    private struct State {
        var phase = Phase.idle
        /// Calls read but not yet taken by the processor, and their bytes.
        var queued = 0
        var queuedBytes = 0
        /// The peer sent end-of-file (or reading failed): no more calls will come.
        var inputEnded = false
        var lastActivity: ContinuousClock.Instant
        /// Since when a reply has been waiting for the peer to read; `nil` while none waits.
        var writeWaitingSince: ContinuousClock.Instant?
        /// The reader, waiting for the queue to have room.
        var spaceWaiter: CheckedContinuation<Void, Never>?
        /// Room was made (or the connection closed) while nobody waited: the next wait returns.
        var spaceSignalled = false
        /// The queued bytes went back to the user's budget for good (the connection ended).
        var budgetReleased = false
    }

    /// What happens to a call that was read.
    enum Admission: Equatable, Sendable {
        /// It is queued for the processor.
        case queued
        /// No room now: the reader waits for the processor to take a call (backpressure), and
        /// reads nothing more meanwhile.
        case full
        /// No room while a stream runs: the stream never ends on its own, so the queue would
        /// never drain. The connection closes after an error reply.
        case flooding
        /// The connection is closing: nothing more is read.
        case closing
    }

    private let state: Mutex<State>
    private let logger: Logger
    /// Pipelined calls a client may have waiting.
    let maxQueuedCalls: Int
    /// Bytes of pipelined calls a client may have waiting.
    let maxQueuedBytes: Int
    /// The bound shared by the connections of the peer's user, and that user.
    private let budget: QueueBudget?
    private let uid: UInt32

    init(
        logger: Logger,
        maxQueuedCalls: Int = 128,
        maxQueuedBytes: Int = 256 * 1024,
        budget: QueueBudget? = nil,
        uid: UInt32 = 0,
        now: ContinuousClock.Instant = .now
    ) {
        self.state = Mutex(State(lastActivity: now))
        self.logger = logger
        self.maxQueuedCalls = maxQueuedCalls
        self.maxQueuedBytes = maxQueuedBytes
        self.budget = budget
        self.uid = uid
    }

    var phase: Phase { state.withLock { $0.phase } }

    /// A call of `bytes` bytes was read: queues it when this connection and its user have
    /// room. One call always fits an empty connection queue, whatever its size.
    func admit(bytes: Int, now: ContinuousClock.Instant = .now) -> Admission {
        let admission = state.withLock { state -> Admission in
            guard state.phase != .closing else { return .closing }
            state.lastActivity = now
            let ownRoom = state.queued == 0 || (state.queued < maxQueuedCalls && state.queuedBytes + bytes <= maxQueuedBytes)
            if ownRoom, budget?.reserve(bytes, for: uid, waiter: self) ?? true {
                state.queued += 1
                state.queuedBytes += bytes
                return .queued
            }
            return state.phase == .streaming ? .flooding : .full
        }
        if admission == .flooding {
            close(because: "calls queued behind a stream beyond \(maxQueuedCalls) calls or \(maxQueuedBytes) bytes (or the user's share)")
        }
        return admission
    }

    /// Returns once the queue may have room: after the processor took a call, or the connection
    /// closed, or the task was cancelled. The caller asks ``admit(bytes:now:)`` again.
    func waitForRoom() async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now = state.withLock { state -> Bool in
                    if state.spaceSignalled || state.phase == .closing {
                        state.spaceSignalled = false
                        return true
                    }
                    state.spaceWaiter = continuation
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            signalRoom()
        }
    }

    /// Wakes the reader if it waits for room.
    func signalRoom() {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard let waiter = state.spaceWaiter else {
                state.spaceSignalled = true
                return nil
            }
            state.spaceWaiter = nil
            return waiter
        }
        waiter?.resume()
    }

    /// The processor took a queued call of `bytes` bytes off the queue.
    func dequeued(bytes: Int) {
        let released = state.withLock { state -> Int in
            state.queued = max(0, state.queued - 1)
            let taken = min(bytes, state.queuedBytes)
            state.queuedBytes -= taken
            return state.budgetReleased ? 0 : taken
        }
        // Outside the lock: releasing wakes other connections of the user, taking their locks.
        budget?.release(released, for: uid)
        signalRoom()
    }

    /// Gives the calls still queued back to the user's budget; the connection is over.
    func releaseQueue() {
        let released = state.withLock { state -> Int in
            guard !state.budgetReleased else { return 0 }
            state.budgetReleased = true
            return state.queuedBytes
        }
        budget?.release(released, for: uid)
        budget?.forget(self, of: uid)
    }

    /// Bytes of calls queued now.
    var queuedBytes: Int { state.withLock { $0.queuedBytes } }

    /// A reply is about to be written: if the peer does not read it within the idle timeout,
    /// the connection closes (a stream included).
    func writeBegan(now: ContinuousClock.Instant = .now) {
        state.withLock { state in
            if state.writeWaitingSince == nil { state.writeWaitingSince = now }
        }
    }

    /// The reply was handed to the socket.
    func writeEnded() {
        state.withLock { $0.writeWaitingSince = nil }
    }

    /// idle → processing. `false` when closing: the call must not run.
    func beginCall(_ method: String) -> Bool {
        transition(to: .processing, from: [.idle], because: method)
    }

    /// processing → streaming. `false` when the peer already hung up (nobody would read the
    /// stream, and nothing would ever end it) or the connection is closing.
    func beginStream(_ method: String) -> Bool {
        let allowed = state.withLock { state -> Bool in
            guard state.phase == .processing, !state.inputEnded else { return false }
            state.phase = .streaming
            return true
        }
        if allowed {
            log(.processing, .streaming, method)
        } else {
            close(because: "\(method) streams to a peer that hung up")
        }
        return allowed
    }

    /// processing/streaming → idle.
    func endCall(_ method: String, now: ContinuousClock.Instant = .now) {
        let previous = state.withLock { state -> Phase? in
            guard state.phase == .processing || state.phase == .streaming else { return nil }
            defer {
                state.phase = .idle
                state.lastActivity = now
            }
            return state.phase
        }
        if let previous { log(previous, .idle, "\(method) done") }
    }

    /// The peer ended its side. Returns `true` when a stream is running: its only reader is
    /// gone, so the connection must close now instead of streaming forever.
    func inputEnded() -> Bool {
        let streaming = state.withLock { state -> Bool in
            state.inputEnded = true
            return state.phase == .streaming
        }
        if streaming { close(because: "peer hung up during a stream") }
        return streaming
    }

    /// When the connection counts as idle (or its peer as not reading) for `timeout` if nothing
    /// happens before.
    func idleDeadline(timeout: Duration) -> ContinuousClock.Instant {
        state.withLock { state in
            if let since = state.writeWaitingSince { return since + timeout }
            guard state.phase == .idle, state.queued == 0 else { return .now + timeout }
            return state.lastActivity + timeout
        }
    }

    /// Closes the connection when it has been idle, with nothing queued, for `timeout`, or when
    /// a reply has waited that long for the peer to read it.
    func closeIfIdle(timeout: Duration, now: ContinuousClock.Instant = .now) -> Bool {
        let expired = state.withLock { state -> (Phase, String)? in
            guard state.phase != .closing else { return nil }
            let previous = state.phase
            if let since = state.writeWaitingSince, now - since >= timeout {
                state.phase = .closing
                return (previous, "peer has not read a reply for \(timeout)")
            }
            guard state.phase == .idle, state.queued == 0, now - state.lastActivity >= timeout else { return nil }
            state.phase = .closing
            return (previous, "idle for \(timeout)")
        }
        if let (previous, reason) = expired {
            log(previous, .closing, reason)
            signalRoom()
        }
        return expired != nil
    }

    /// Any phase → closing (idempotent).
    func close(because reason: String) {
        let previous = state.withLock { state -> Phase? in
            guard state.phase != .closing else { return nil }
            defer { state.phase = .closing }
            return state.phase
        }
        if let previous { log(previous, .closing, reason) }
        signalRoom()
    }

    private func transition(to next: Phase, from allowed: Set<Phase>, because reason: String) -> Bool {
        let previous = state.withLock { state -> Phase? in
            guard allowed.contains(state.phase) else { return nil }
            defer { state.phase = next }
            return state.phase
        }
        guard let previous else { return false }
        log(previous, next, reason)
        return true
    }

    private func log(_ from: Phase, _ to: Phase, _ reason: String) {
        logger.debug("varlink: connection \(from.rawValue) → \(to.rawValue) (\(reason))")
    }
}
