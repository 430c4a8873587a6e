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
        try await waitUntil("\(what) has ended", timeout: timeout, interval: .milliseconds(5)) { ended.value }
        return try await task.value
    }
}

/// Set once, read from any thread.
private final class EndFlag: Sendable {
    private let flag = Atomic<Bool>(false)
    func set() { flag.store(true, ordering: .releasing) }
    var value: Bool { flag.load(ordering: .acquiring) }
}
