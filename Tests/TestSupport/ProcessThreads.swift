import Foundation

/// This process's threads, as the kernel lists them under `/proc/self/task`.
public enum ProcessThreads {
    /// The name (`comm`) of thread `tid`, `nil` when it no longer exists.
    public static func name(of tid: Int32) -> String? {
        (try? String(contentsOfFile: "/proc/self/task/\(tid)/comm", encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Waits (bounded) until thread `tid` has ended; returns whether it did.
    public static func waitUntilGone(_ tid: Int32, timeout: Duration = .seconds(5)) async throws -> Bool {
        let deadline = ContinuousClock.now + timeout
        while name(of: tid) != nil {
            guard ContinuousClock.now < deadline else { return false }
            try await Task.sleep(for: .milliseconds(10))
        }
        return true
    }
}
