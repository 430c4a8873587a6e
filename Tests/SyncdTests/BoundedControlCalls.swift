import SyncControl
import TestSupport

extension SyncControlClient {
    /// `call` on this client, given up after `timeout` with ``WaitTimedOut`` naming `what`.
    ///
    /// The control client has no timeout of its own: a daemon that accepts a connection and never
    /// answers would hold the test, and inside a poll's condition the poll's own deadline cannot
    /// reach it. The client's calls end on cancellation (NIO channels), which is what the guard
    /// needs. An error from the call itself is rethrown as it is.
    func bounded<T: Sendable>(
        _ what: String, timeout: Duration = hangGuard, _ call: @escaping @Sendable (SyncControlClient) async throws -> T
    ) async throws -> T {
        try await withHangGuard("syncd to answer \(what)", timeout: timeout) { [self] in try await call(self) }
    }

    /// ``status()``, bounded (``bounded(_:timeout:_:)``).
    func boundedStatus(timeout: Duration = hangGuard) async throws -> ControlStatus {
        try await bounded("GetStatus", timeout: timeout) { try await $0.status() }
    }
}
