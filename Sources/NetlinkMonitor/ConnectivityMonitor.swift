import ConnectivityPolicy

/// Turns a stream of snapshots into a stream of connectivity verdicts for one destination.
///
/// Only changes are published. Offline is published at once; online only once it has held
/// for `settle`, so a flapping link yields one online rather than one per flap (``SettleGate``).
/// The first verdict is published immediately: it is the starting state, not a transition.
public enum ConnectivityMonitor {
    private enum Event: Sendable {
        case snapshot(NetworkSnapshot)
        case deadline(generation: Int)
    }

    /// Verdicts for `destination` computed from `snapshots`, timed by `clock`.
    ///
    /// Cancelling the consumer (or the returned stream's termination) stops the work; the stream
    /// finishes when `snapshots` does.
    public static func verdicts<Snapshots, C>(
        from snapshots: Snapshots,
        for destination: Destination = .internet,
        settle: Duration,
        clock: C
    ) -> AsyncStream<Verdict>
    where Snapshots: AsyncSequence & Sendable, Snapshots.Element == NetworkSnapshot, C: Clock<Duration> {
        let (output, publish) = AsyncStream<Verdict>.makeStream()
        let (events, feed) = AsyncStream<Event>.makeStream()

        let feeder = Task {
            do {
                for try await snapshot in snapshots { feed.yield(.snapshot(snapshot)) }
            } catch {}
            feed.finish()
        }
        let driver = Task {
            var gate = SettleGate<C.Instant>(settle: settle)
            var timer: Task<Void, Never>?
            var generation = 0
            for await event in events {
                let action: SettleGate<C.Instant>.Action
                switch event {
                case .snapshot(let snapshot):
                    action = gate.observe(ConnectivityPolicy.evaluate(snapshot, for: destination), at: clock.now)
                case .deadline(let fired):
                    guard fired == generation else { continue }
                    action = gate.deadlineReached(at: clock.now)
                }
                switch action {
                case .publish(let verdict):
                    publish.yield(verdict)
                case .schedule(let due):
                    timer?.cancel()
                    generation += 1
                    let armed = generation
                    timer = Task {
                        do { try await clock.sleep(until: due, tolerance: nil) } catch { return }
                        feed.yield(.deadline(generation: armed))
                    }
                case .cancelTimer:
                    timer?.cancel()
                    timer = nil
                    generation += 1
                case .none:
                    break
                }
            }
            timer?.cancel()
            publish.finish()
        }
        publish.onTermination = { _ in
            feeder.cancel()
            driver.cancel()
            feed.finish()
        }
        return output
    }

    /// Verdicts for `destination` from a running ``NetlinkMonitor``, on the continuous clock.
    public static func verdicts(
        from monitor: NetlinkMonitor,
        for destination: Destination = .internet,
        settle: Duration = .seconds(2)
    ) -> AsyncStream<Verdict> {
        verdicts(from: monitor.snapshots(), for: destination, settle: settle, clock: ContinuousClock())
    }
}
