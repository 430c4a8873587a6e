import Synchronization

/// An unstructured task whose end a test waits for with a bound.
///
/// `await task.value` waits for good when the task never ends (a `run()` that ignores
/// cancellation), and a test's time limit cannot end that wait. ``value(_:timeout:)`` first waits,
/// bounded, until the task's body has returned or thrown, and fails naming it otherwise.
public final class BoundedTask<Success: Sendable>: Sendable {
    private let ended: EndFlag
    private let task: Task<Success, any Error>

    /// Starts `operation` as an unstructured task.
    public init(_ operation: @escaping @Sendable () async throws -> Success) {
        let ended = EndFlag()
        self.ended = ended
        task = Task {
            defer { ended.set() }
            return try await operation()
        }
    }

    /// Whether the task's body has returned or thrown.
    public var hasEnded: Bool { ended.value }

    /// Cancels the task.
    public func cancel() { task.cancel() }

    /// The task's result, once it has ended; throws ``WaitTimedOut`` naming `what` when it has not
    /// ended within `timeout` of real time, or what the task threw.
    public func value(_ what: String, timeout: Duration = hangGuard) async throws -> Success {
        try await result(what, timeout: timeout).get()
    }

    /// How the task ended, once it has; throws ``WaitTimedOut`` naming `what` when it has not
    /// ended within `timeout` of real time (the task is then left running).
    public func result(_ what: String, timeout: Duration = hangGuard) async throws -> Result<Success, any Error> {
        try await waitUntil("\(what) has ended", timeout: timeout, interval: .milliseconds(5)) { ended.value }
        return await task.result
    }
}

/// Runs `body` while `operation` runs as a ``BoundedTask``, then cancels it and waits, bounded,
/// for its end, named `what`, on every path.
///
/// Not a task group: a group waits for its children for good, so an `operation` that ignored
/// cancellation would hang the run. As in ``withResource(_:closedBy:isolation:_:)``, an error of
/// `body` counts before the operation's.
public func whileRunning<Success: Sendable, R>(
    _ what: String, _ operation: @escaping @Sendable () async throws -> Success,
    isolation: isolated (any Actor)? = #isolation,
    _ body: (BoundedTask<Success>) async throws -> R
) async throws -> R {
    try await withResource(BoundedTask(operation), closedBy: { running in
        running.cancel()
        _ = try await running.value(what)
    }, body)
}

/// How `task` ended, waited for at most `timeout` of real time; throws ``WaitTimedOut`` naming
/// `what` after that.
///
/// For a task made elsewhere (a ``BoundedTask`` is simpler where the test makes it): awaiting
/// it would ignore cancellation, so a watcher task awaits it instead and this call polls the
/// watcher. The watcher of a task that never ends stays behind, as the task does.
public func boundedResult<Success: Sendable, Failure: Error>(
    of task: Task<Success, Failure>, _ what: String, timeout: Duration = hangGuard
) async throws -> Result<Success, Failure> {
    let outcome = Outcome<Result<Success, Failure>>()
    Task { outcome.set(await task.result) }
    try await waitUntil(what, timeout: timeout, interval: .milliseconds(5)) { outcome.value != nil }
    return outcome.value!
}

/// What `task` returns or throws, waited for as ``boundedResult(of:_:timeout:)`` does.
public func boundedValue<Success: Sendable>(
    of task: Task<Success, any Error>, _ what: String, timeout: Duration = hangGuard
) async throws -> Success {
    try await boundedResult(of: task, what, timeout: timeout).get()
}

/// What `task` returns, waited for as ``boundedResult(of:_:timeout:)`` does.
public func boundedValue<Success: Sendable>(
    of task: Task<Success, Never>, _ what: String, timeout: Duration = hangGuard
) async throws -> Success {
    try await boundedResult(of: task, what, timeout: timeout).get()
}

/// A watched task's outcome, once it has one.
private final class Outcome<Value: Sendable>: Sendable {
    private let stored = Mutex<Value?>(nil)
    var value: Value? { stored.withLock { $0 } }
    func set(_ value: Value) { stored.withLock { $0 = value } }
}

/// Set once, read from any thread.
private final class EndFlag: Sendable {
    private let flag = Atomic<Bool>(false)
    func set() { flag.store(true, ordering: .releasing) }
    var value: Bool { flag.load(ordering: .acquiring) }
}
