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
        /// Calls read but not yet taken by the processor.
        var queued = 0
        /// The peer sent end-of-file (or reading failed): no more calls will come.
        var inputEnded = false
        var lastActivity: ContinuousClock.Instant
    }

    private let state: Mutex<State>
    private let logger: Logger
    /// Pipelined calls a client may have waiting; beyond this it is flooding, not pipelining.
    let maxQueuedCalls: Int

    init(logger: Logger, maxQueuedCalls: Int = 128, now: ContinuousClock.Instant = .now) {
        self.state = Mutex(State(lastActivity: now))
        self.logger = logger
        self.maxQueuedCalls = maxQueuedCalls
    }

    var phase: Phase { state.withLock { $0.phase } }

    /// A message arrived. Returns `false` when the client has too many calls waiting (the
    /// connection is then closing).
    func received(now: ContinuousClock.Instant = .now) -> Bool {
        let accepted = state.withLock { state -> Bool in
            state.lastActivity = now
            state.queued += 1
            return state.queued <= maxQueuedCalls
        }
        if !accepted { close(because: "more than \(maxQueuedCalls) calls queued") }
        return accepted
    }

    /// The processor took a queued message off the queue.
    func dequeued() {
        state.withLock { $0.queued = max(0, $0.queued - 1) }
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

    /// When the connection counts as idle for `timeout` if nothing happens before.
    func idleDeadline(timeout: Duration) -> ContinuousClock.Instant {
        state.withLock { state in
            guard state.phase == .idle, state.queued == 0 else { return .now + timeout }
            return state.lastActivity + timeout
        }
    }

    /// Closes the connection when it has been idle, with nothing queued, for `timeout`.
    func closeIfIdle(timeout: Duration, now: ContinuousClock.Instant = .now) -> Bool {
        let expired = state.withLock { state -> Bool in
            guard state.phase == .idle, state.queued == 0, now - state.lastActivity >= timeout else { return false }
            state.phase = .closing
            return true
        }
        if expired { log(.idle, .closing, "idle for \(timeout)") }
        return expired
    }

    /// Any phase → closing (idempotent).
    func close(because reason: String) {
        let previous = state.withLock { state -> Phase? in
            guard state.phase != .closing else { return nil }
            defer { state.phase = .closing }
            return state.phase
        }
        if let previous { log(previous, .closing, reason) }
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
