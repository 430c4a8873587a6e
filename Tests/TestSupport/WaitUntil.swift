/// A poll that gave up: the condition never held within the time limit.
public struct WaitTimedOut: Error, CustomStringConvertible {
    public var description: String
}

/// How long a test waits for something that should happen before it gives up: a guard against
/// a hang, not a performance bound (those live in the benchmarks).
///
/// The full suite starts ~400 tests at once on this project's 2-core machines, and its first
/// seconds are congested: a server noticing a client's hang-up, 0.03 s in a run of its own, took
/// 7–11 s there.
public let hangGuard: Duration = .seconds(30)

/// Polls `condition` every `interval` until it holds; throws ``WaitTimedOut`` (naming `what`)
/// after `timeout`, so a test whose condition never comes true fails instead of hanging the run.
public func waitUntil(
    _ what: String,
    timeout: Duration = hangGuard,
    interval: Duration = .milliseconds(10),
    _ condition: () async throws -> Bool
) async throws {
    let deadline = ContinuousClock.now + timeout
    while try await !condition() {
        guard ContinuousClock.now < deadline else { throw WaitTimedOut(description: "timed out after \(timeout) waiting until \(what)") }
        try await Task.sleep(for: interval)
    }
}
