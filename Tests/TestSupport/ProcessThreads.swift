import Foundation

/// This process's threads, as the kernel lists them under `/proc/self/task`.
public enum ProcessThreads {
    /// The name (`comm`) of thread `tid`, `nil` when it no longer exists.
    public static func name(of tid: Int32) -> String? {
        (try? String(contentsOfFile: "/proc/self/task/\(tid)/comm", encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// The kernel's id of the calling thread, from `/proc/thread-self` (`PID/task/TID`).
    public static var currentID: Int32? {
        guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/thread-self") else { return nil }
        return target.split(separator: "/").last.flatMap { Int32($0) }
    }

    /// Waits (bounded) until thread `tid` has ended; returns whether it did.
    public static func waitUntilGone(_ tid: Int32, timeout: Duration = hangGuard) async throws -> Bool {
        let deadline = ContinuousClock.now + timeout
        while name(of: tid) != nil {
            guard ContinuousClock.now < deadline else { return false }
            try await Task.sleep(for: .milliseconds(10))
        }
        return true
    }
}
