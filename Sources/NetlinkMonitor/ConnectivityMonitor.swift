import ConnectivityPolicy
import Synchronization

/// Turns snapshots into a stream of connectivity verdicts for one destination.
///
/// Only changes are published. Offline is published at once; online only once it has held
/// for `settle`, so a flapping link yields one online rather than one per flap (``SettleGate``).
/// The first verdict is published immediately: it is the starting state, not a transition.
public enum ConnectivityMonitor {
    /// Verdicts for `destination` computed from any stream of snapshots, timed by `clock`.
    ///
    /// The stream finishes when `snapshots` does; ending the consumer stops the work.
    public static func verdicts<Snapshots, C>(
        from snapshots: Snapshots,
        for destination: Destination = .internet,
        settle: Duration,
        clock: C
    ) -> AsyncStream<Verdict>
    where Snapshots: AsyncSequence & Sendable, Snapshots.Element == NetworkSnapshot, C: Clock<Duration> {
        let (output, continuation) = AsyncStream<Verdict>.makeStream()
        let publisher = VerdictPublisher(settle: settle, clock: clock, output: continuation) { ConnectivityPolicy.evaluate($0, for: destination) }
        let feeder = Task {
            do {
                for try await snapshot in snapshots { publisher.receive(snapshot) }
            } catch {}
            publisher.finish()
        }
        continuation.onTermination = { _ in
            feeder.cancel()
            publisher.finish()
        }
        return output
    }

    /// Verdicts for `destination` from a running ``NetlinkMonitor``.
    ///
    /// The monitor tracks the destination's addresses (``NetlinkMonitor/track(_:)``; for the
    /// internet, ``Destination/internetProbes``), so the verdict follows the kernel's own route
    /// lookup, policy rules and tunnels included; the first verdict waits for that lookup.
    /// Snapshots are evaluated on the monitor's own thread as they are published, so an offline
    /// verdict reaches the consumer with a single hand-over rather than one per stage, and with
    /// none when the consumer's task prefers the monitor's executor
    /// (``NetlinkMonitor/taskExecutor``). A ``Destination/host(_:)`` is judged as the internet
    /// here: resolve names first (the `Reachability` module does, and re-resolves them).
    public static func verdicts<C: Clock<Duration>>(
        from monitor: NetlinkMonitor,
        for destination: Destination = .internet,
        settle: Duration = defaultSettleDelay,
        clock: C = ContinuousClock()
    ) -> AsyncStream<Verdict> {
        let (output, continuation) = AsyncStream<Verdict>.makeStream()
        let addresses = destination.kernelLookups
        let publisher = VerdictPublisher(settle: settle, clock: clock, output: continuation) { ConnectivityPolicy.evaluate($0, for: destination) }
        let tracking = addresses.isEmpty ? nil : monitor.startTracking(addresses).token
        let token = monitor.addObserver(
            onSnapshot: { snapshot in
                // Until the kernel has answered for these addresses, the model alone could say
                // "no route" where a policy rule routes them: wait for the lookup.
                guard addresses.allSatisfy({ snapshot.kernelRoutes[$0] != nil }) else { return }
                publisher.receive(snapshot)
            },
            onFinish: { publisher.finish() }
        )
        continuation.onTermination = { [weak monitor] _ in
            monitor?.removeObserver(token)
            if let tracking { monitor?.untrack(tracking) }
            publisher.finish()
        }
        return output
    }
}

/// Evaluates snapshots through a ``SettleGate`` and yields the verdicts it publishes; owns the
/// settle timer. Safe to feed from any thread.
package final class VerdictPublisher<C: Clock<Duration>>: Sendable {
    private struct State {
        var gate: SettleGate<C.Instant>
        var timer: Task<Void, Never>?
        /// Distinguishes the armed timer from ones already superseded.
        var generation = 0
        var finished = false
        /// The last snapshot, for ``reevaluate()`` when something else the verdict reads changed.
        var snapshot: NetworkSnapshot?
    }

    private let evaluate: @Sendable (NetworkSnapshot) -> Verdict
    private let clock: C
    private let output: AsyncStream<Verdict>.Continuation
    private let state: Mutex<State>

    /// - Parameter evaluate: the verdict for a snapshot; called under the publisher's lock, so it
    ///   must not call back into the publisher.
    package init(settle: Duration, clock: C, output: AsyncStream<Verdict>.Continuation, evaluate: @escaping @Sendable (NetworkSnapshot) -> Verdict) {
        self.evaluate = evaluate
        self.clock = clock
        self.output = output
        self.state = Mutex(State(gate: SettleGate(settle: settle)))
    }

    package func receive(_ snapshot: NetworkSnapshot) {
        let now = clock.now
        state.withLock { state in
            guard !state.finished else { return }
            state.snapshot = snapshot
            apply(state.gate.observe(evaluate(snapshot), at: now), to: &state)
        }
    }

    /// Evaluates the last snapshot again: what the verdict reads besides the snapshot changed.
    package func reevaluate() {
        let now = clock.now
        state.withLock { state in
            guard !state.finished, let snapshot = state.snapshot else { return }
            apply(state.gate.observe(evaluate(snapshot), at: now), to: &state)
        }
    }

    package func finish() {
        state.withLock { state in
            guard !state.finished else { return }
            state.finished = true
            state.timer?.cancel()
            state.timer = nil
        }
        output.finish()
    }

    private func deadline(generation: Int) {
        let now = clock.now
        state.withLock { state in
            guard !state.finished, generation == state.generation else { return }
            apply(state.gate.deadlineReached(at: now), to: &state)
        }
    }

    /// Runs under the lock, so verdicts are yielded in the order the gate decided them.
    private func apply(_ action: SettleGate<C.Instant>.Action, to state: inout State) {
        switch action {
        case .publish(let verdict):
            output.yield(verdict)
        case .schedule(let due):
            state.timer?.cancel()
            state.generation += 1
            let armed = state.generation
            let clock = self.clock
            state.timer = Task { [weak self] in
                do { try await clock.sleep(until: due, tolerance: nil) } catch { return }
                self?.deadline(generation: armed)
            }
        case .cancelTimer:
            state.timer?.cancel()
            state.timer = nil
            state.generation += 1
        case .none:
            break
        }
    }
}
