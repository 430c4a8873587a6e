import Synchronization

/// Runs an action once each burst of activity has been followed by a quiet period: the daemon
/// gives memory back this way once syncing has gone quiet.
///
/// Only activity arms the timer: with nothing happening it sleeps on the activity stream and
/// never wakes the process. During a burst it wakes once per quiet period, not once per event.
struct QuietRelease<C: Clock>: Sendable where C.Duration == Duration {
    /// How long activity must have stopped before the action runs.
    let quiet: Duration
    let clock: C
    let action: @Sendable () async -> Void

    /// Follows `activity` until it ends or the task is cancelled.
    func run<S: AsyncSequence & Sendable>(following activity: S) async where S.Failure == Never {
        let events = EventCount()
        let (bursts, signal) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        await withDiscardingTaskGroup { group in
            group.addTask {
                for await _ in activity {
                    events.add()
                    signal.yield()
                }
                signal.finish()
            }
            group.addTask {
                // The count the action last ran after: a signal left over from events that the
                // last quiet wait already covered starts no new wait.
                var actedAt = 0
                for await _ in bursts {
                    var seen = events.value
                    guard seen != actedAt else { continue }
                    while true {
                        do { try await clock.sleep(for: quiet) } catch { return }
                        let now = events.value
                        if now == seen { break }
                        seen = now
                    }
                    await action()
                    actedAt = seen
                }
            }
        }
    }
}

/// Events seen so far, read by the quiet wait without a hop to the task that counts them.
private final class EventCount: Sendable {
    private let count = Atomic<Int>(0)

    func add() { count.add(1, ordering: .relaxed) }

    var value: Int { count.load(ordering: .relaxed) }
}
