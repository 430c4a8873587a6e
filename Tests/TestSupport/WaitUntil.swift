/// A wait that gave up: what it waited for never came within the time limit.
public struct WaitTimedOut: Error, CustomStringConvertible {
    public var description: String

    /// An error saying, in words, what was waited for and for how long.
    public init(description: String) { self.description = description }
}

/// Polls `condition` every `interval` until it holds; throws ``WaitTimedOut`` (naming `what`)
/// after `timeout`, so a test whose condition never comes true fails instead of hanging the run.
///
/// The condition runs on the caller's actor, so an actor's own state can be polled from inside it.
/// Cancellation ends the wait with `CancellationError`.
public func waitUntil(
    _ what: String,
    timeout: Duration = hangGuard,
    interval: Duration = .milliseconds(10),
    isolation: isolated (any Actor)? = #isolation,
    _ condition: () async throws -> Bool
) async throws {
    let deadline = ContinuousClock.now + timeout
    while try await !condition() {
        guard ContinuousClock.now < deadline else { throw WaitTimedOut(description: "timed out after \(timeout) waiting until \(what)") }
        try await Task.sleep(for: interval)
    }
}

/// Runs `operation` and returns its result, or cancels it and throws ``WaitTimedOut`` (naming
/// `what`) once `timeout` of real time has passed.
///
/// `operation` must end when its task is cancelled (an async stream's iteration does; a checked
/// continuation nobody resumes does not): this call returns only once it has ended.
public func withHangGuard<T: Sendable>(
    _ what: String,
    timeout: Duration = hangGuard,
    _ operation: @escaping @Sendable () async throws -> T
) async throws -> T {
    try await withThrowingTaskGroup(of: GuardedOutcome<T>.self) { group in
        group.addTask { .value(try await operation()) }
        group.addTask {
            try await Task.sleep(for: timeout)
            return .timedOut
        }
        defer { group.cancelAll() }
        switch try await group.next() {
        case .value(let value)?: return value
        case .timedOut?, nil: throw WaitTimedOut(description: "timed out after \(timeout) waiting for \(what)")
        }
    }
}

/// Which of ``withHangGuard(_:timeout:_:)``'s two tasks ended first.
private enum GuardedOutcome<T: Sendable>: Sendable {
    case value(T)
    case timedOut
}
