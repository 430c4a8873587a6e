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
        /// Calls taken off the socket but not yet by the processor.
        var queued = 0
        /// Whole calls the decoder has cut from the bytes and the processor has not yet taken
        /// (in NIO's buffer, in the reader's hands or queued).
        var framesPending = 0
        /// Bytes read from the socket and neither answered nor thrown away: the calls not yet
        /// taken and the unfinished message the decoder holds.
        var held = 0
        /// Room for one read was taken from the bounds when the gate let the read through; the
        /// bytes it brings are counted against it.
        var readReserved = 0
        /// The peer sent end-of-file (or reading failed): no more calls will come.
        var inputEnded = false
        var lastActivity: ContinuousClock.Instant
        /// Since when a reply has been waiting for the peer to read; `nil` while none waits.
        var writeWaitingSince: ContinuousClock.Instant?
        /// The reader, waiting for the queue to have room.
        var spaceWaiter: CheckedContinuation<Void, Never>?
        /// Room was made (or the connection closed) while nobody waited: the next wait returns.
        var spaceSignalled = false
        /// Told when bytes are released or the connection closes: the read gate, which asks
        /// ``mayRead(_:)`` again.
        var readResumer: (@Sendable () -> Void)?
        /// Waiting for the connection to close, by when they began to.
        var closingWaiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
        var nextWaiterID: UInt64 = 0
        /// The connection closed because calls were queued behind a stream beyond the bounds.
        var flooded = false
        /// The decoder throws away all that comes (after an oversized message).
        var draining = false
        /// The held bytes went back to the user's budget for good (the connection ended).
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
    /// What the connection itself is charged to its user's bound while it is open.
    private let connectionCharge: Int

    init(
        logger: Logger,
        maxQueuedCalls: Int = 128,
        maxQueuedBytes: Int = 256 * 1024,
        budget: QueueBudget? = nil,
        uid: UInt32 = 0,
        connectionCharge: Int = 0,
        now: ContinuousClock.Instant = .now
    ) {
        self.state = Mutex(State(lastActivity: now))
        self.logger = logger
        self.maxQueuedCalls = maxQueuedCalls
        self.maxQueuedBytes = maxQueuedBytes
        self.budget = budget
        self.uid = uid
        self.connectionCharge = connectionCharge
        budget?.charge(connectionCharge, for: uid)
    }

    var phase: Phase { state.withLock { $0.phase } }

    /// Bytes just read from the socket: held, and charged to the user (out of the room the gate
    /// reserved for the read, as far as it goes), until ``dequeued(bytes:)`` or
    /// ``discarded(bytes:)`` gives them back. One read the gate lets through may bring several
    /// of these; ``readEnded()`` gives back the room they did not use.
    func read(bytes: Int) {
        guard bytes > 0 else { return }
        let used = state.withLock { state -> Int? in
            guard !state.budgetReleased else { return nil }
            state.held += bytes
            let used = min(bytes, state.readReserved)
            state.readReserved -= used
            return used
        }
        guard let used else { return }
        budget?.read(bytes, against: used, for: uid)
    }

    /// The read the gate let through is over: the room it reserved and did not use goes back.
    func readEnded() {
        let leftover = state.withLock { state -> Int in
            guard !state.budgetReleased else { return 0 }
            defer { state.readReserved = 0 }
            return state.readReserved
        }
        budget?.release(0, reservation: leftover, for: uid)
    }

    /// The decoder cut a whole call (or a too-large note) from what was read.
    func framed() {
        state.withLock { $0.framesPending += 1 }
    }

    /// The decoder met an oversized message and throws away all that comes after it.
    func overflowed() {
        state.withLock { $0.draining = true }
    }

    /// The decoder threw away `bytes` it had held (an oversized or unfinished message).
    func discarded(bytes: Int) {
        give(bytes)
        wakeReaders()
    }

    /// Whether the socket may be read for up to `bytes` more: reserves that room in the
    /// connection's and its user's bounds, so that what the connection holds (queued calls, the
    /// call NIO and the reader hold, the unfinished message) never goes past them. A connection
    /// with no whole call waiting may go past its own bound, so that a message larger than what
    /// is left of it can be finished (the decoder bounds a message by itself); the user's bound
    /// holds always. When the bounds stop the reading while a stream runs, the calls behind it
    /// would wait for ever: the connection closes as flooding.
    func mayRead(_ bytes: Int) -> Bool {
        let (allowed, flooding) = state.withLock { state -> (Bool, Bool) in
            // What the decoder throws away costs nothing to read, and a Unix socket closed with
            // bytes unread ends its peer's reading with ECONNRESET instead of end-of-file.
            if state.draining { return (true, false) }
            guard state.phase != .closing else { return (false, false) }
            if state.readReserved > 0 { return (true, false) }
            let ownRoom = state.framesPending == 0 || state.held + bytes <= maxQueuedBytes
            if ownRoom, budget?.reserve(bytes, for: uid, waiter: self) ?? true {
                state.readReserved = bytes
                return (true, false)
            }
            return (false, state.phase == .streaming)
        }
        if flooding {
            flood(because: "calls queued behind a stream beyond \(maxQueuedBytes) bytes (or the user's share)")
        }
        return allowed
    }

    /// A whole call was read: queues it when the connection has room for one more call. One
    /// call always fits an empty queue. (Bytes were bounded when they were read.)
    func admit(now: ContinuousClock.Instant = .now) -> Admission {
        let admission = state.withLock { state -> Admission in
            guard state.phase != .closing else { return .closing }
            state.lastActivity = now
            if state.queued < maxQueuedCalls {
                state.queued += 1
                return .queued
            }
            return state.phase == .streaming ? .flooding : .full
        }
        if admission == .flooding {
            flood(because: "calls queued behind a stream beyond \(maxQueuedCalls) calls")
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

    /// Wakes the reader if it waits for room, and the read gate.
    func signalRoom() {
        let (waiter, resumer) = state.withLock { state -> (CheckedContinuation<Void, Never>?, (@Sendable () -> Void)?) in
            let waiter = state.spaceWaiter
            if waiter == nil { state.spaceSignalled = true }
            state.spaceWaiter = nil
            return (waiter, state.readResumer)
        }
        waiter?.resume()
        resumer?()
    }

    /// Sets who is told when reading may go on (see ``mayRead(_:)``); `nil` forgets it.
    func onRoom(_ resumer: (@Sendable () -> Void)?) {
        state.withLock { $0.readResumer = resumer }
    }

    /// The processor took a call of `bytes` bytes (as read, with its NUL) off the queue.
    func dequeued(bytes: Int) {
        state.withLock { state in
            state.queued = max(0, state.queued - 1)
            state.framesPending = max(0, state.framesPending - 1)
        }
        give(bytes)
        signalRoom()
    }

    /// Lets go of `bytes` held: the connection's count and, outside the lock (releasing wakes
    /// other connections of the user, taking their locks), the user's.
    private func give(_ bytes: Int) {
        let released = state.withLock { state -> Int in
            let taken = min(max(bytes, 0), state.held)
            state.held -= taken
            return state.budgetReleased ? 0 : taken
        }
        budget?.release(released, for: uid)
    }

    /// Tells the read gate to ask again.
    private func wakeReaders() {
        state.withLock { $0.readResumer }?()
    }

    /// Gives the bytes still held, and the connection's charge, back to the user's budget; the
    /// connection is over.
    func releaseQueue() {
        let released = state.withLock { state -> (held: Int, reserved: Int)? in
            guard !state.budgetReleased else { return nil }
            state.budgetReleased = true
            state.readResumer = nil
            return (state.held, state.readReserved)
        }
        guard let released else { return }
        budget?.release(released.held, reservation: released.reserved, for: uid)
        budget?.discharge(connectionCharge, for: uid)
        budget?.forget(self, of: uid)
    }

    /// Whether the connection closed because calls were queued behind a stream beyond the bounds.
    var isFlooded: Bool { state.withLock { $0.flooded } }

    /// Returns once the connection is closing (at once if it is), or the task is cancelled.
    func closed() async {
        let id = state.withLock { state in
            defer { state.nextWaiterID += 1 }
            return state.nextWaiterID
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                // Cancellation is flagged before its handler runs: one that came before this
                // point is seen here, one after finds the waiter below.
                let now = state.withLock { state -> Bool in
                    guard state.phase != .closing, !Task.isCancelled else { return true }
                    state.closingWaiters[id] = continuation
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            state.withLock { $0.closingWaiters.removeValue(forKey: id) }?.resume()
        }
    }

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
        let closed = state.withLock { state -> (Phase, String, [CheckedContinuation<Void, Never>])? in
            guard state.phase != .closing else { return nil }
            let reason: String
            if let since = state.writeWaitingSince, now - since >= timeout {
                reason = "peer has not read a reply for \(timeout)"
            } else if state.phase == .idle, state.queued == 0, now - state.lastActivity >= timeout {
                reason = "idle for \(timeout)"
            } else {
                return nil
            }
            return (state.phase, reason, Self.enterClosing(&state))
        }
        guard let (previous, reason, waiters) = closed else { return false }
        closedFrom(previous, because: reason, waking: waiters)
        return true
    }

    /// Any phase → closing (idempotent).
    func close(because reason: String) {
        let closed = state.withLock { state -> (Phase, [CheckedContinuation<Void, Never>])? in
            guard state.phase != .closing else { return nil }
            return (state.phase, Self.enterClosing(&state))
        }
        if let (previous, waiters) = closed {
            closedFrom(previous, because: reason, waking: waiters)
        } else {
            signalRoom()
        }
    }

    /// Moves `state` to closing; returns who waited for that.
    private static func enterClosing(_ state: inout State) -> [CheckedContinuation<Void, Never>] {
        state.phase = .closing
        defer { state.closingWaiters = [:] }
        return Array(state.closingWaiters.values)
    }

    private func closedFrom(_ previous: Phase, because reason: String, waking waiters: [CheckedContinuation<Void, Never>]) {
        log(previous, .closing, reason)
        for waiter in waiters { waiter.resume() }
        signalRoom()
    }

    /// Closes as flooding: the calls behind a stream went past the bounds.
    private func flood(because reason: String) {
        state.withLock { state in
            if state.phase != .closing { state.flooded = true }
        }
        close(because: reason)
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
