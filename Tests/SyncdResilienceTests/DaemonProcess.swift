#if canImport(Glibc)
import Glibc
#endif
import Foundation
import NetlinkProbe
import Synchronization
import TestSupport

/// One run of an executable (syncd), spawned directly so the test holds its real pid and can
/// SIGKILL it at any instant. Output goes to a log file, so a full pipe never blocks the child.
/// A run still alive when released is killed.
final class DaemonProcess: Sendable {
    let pid: pid_t
    let logPath: String
    /// The raw wait status once reaped.
    private let reaped = Mutex<Int32?>(nil)

    struct SpawnFailed: Error, CustomStringConvertible {
        var arguments: [String]
        var code: Int32
        var description: String { "cannot start \(arguments.joined(separator: " ")): \(String(cString: strerror(code)))" }
    }

    init(_ arguments: [String], logPath: String) throws {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, logPath, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        // The test process holds sockets without FD_CLOEXEC (the demo feed server's listener
        // among them): a child must not inherit them, or it keeps the port bound after the
        // server stops.
        closeInheritedDescriptors(&actions)

        // Nothing from a service manager that may be running the tests reaches the child.
        let dropped: Set<String> = ["NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES", "JOURNAL_STREAM"]
        let environment = ProcessInfo.processInfo.environment.filter { !dropped.contains($0.key) }.map { "\($0.key)=\($0.value)" }
        let argv = arguments.map { strdup($0) } + [nil]
        let envp = environment.map { strdup($0) } + [nil]
        defer {
            for pointer in argv { free(pointer) }
            for pointer in envp { free(pointer) }
        }
        var child: pid_t = 0
        let result = posix_spawn(&child, arguments[0], &actions, nil, argv, envp)
        guard result == 0 else { throw SpawnFailed(arguments: arguments, code: result) }
        pid = child
        self.logPath = logPath
    }

    deinit {
        guard isRunning else { return }
        kill(pid, SIGKILL)
        // Bounded: a child that SIGKILL cannot end at once (stuck in the kernel) is left as a
        // zombie rather than blocking whoever released the last reference.
        let deadline = ContinuousClock.now + hangGuard
        while isRunning && ContinuousClock.now < deadline { usleep(2_000) }
    }

    /// Reaps the child if it has exited; its wait status then.
    private func poll() -> Int32? {
        reaped.withLock { reaped in
            if let reaped { return reaped }
            var status: Int32 = 0
            let result = waitpid(pid, &status, WNOHANG)
            if result == pid {
                reaped = status
            } else if result < 0 && errno == ECHILD {
                reaped = -1
            }
            return reaped
        }
    }

    var isRunning: Bool { poll() == nil }

    /// The exit code, or 128 + the signal that ended it (as a shell reports it); nil while running.
    var exitCode: Int32? {
        guard let status = poll() else { return nil }
        if status == -1 { return -1 }
        let signal = status & 0x7f
        return signal == 0 ? (status >> 8) & 0xff : 128 + signal
    }

    /// The program's output so far.
    var output: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    /// Sends `signal`, waits (bounded) for the exit, and SIGKILLs what is still alive; returns
    /// ``exitCode``, or -2 when it had to be killed after the timeout (-3 when even SIGKILL did
    /// not end it within the hang guard).
    ///
    /// The default timeout is a hang guard, not a performance bound: a clean stop that a loaded
    /// machine slows down still returns its real exit code.
    @discardableResult
    func stop(signal: Int32 = SIGTERM, timeout: Duration = hangGuard) async -> Int32 {
        if isRunning { kill(pid, signal) }
        let deadline = ContinuousClock.now + timeout
        while isRunning && ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(signal == SIGKILL ? 2 : 20))
        }
        guard isRunning else { return exitCode ?? -1 }
        kill(pid, SIGKILL)
        let killDeadline = ContinuousClock.now + hangGuard
        while isRunning && ContinuousClock.now < killDeadline { try? await Task.sleep(for: .milliseconds(5)) }
        return isRunning ? -3 : -2
    }
}

/// A directory under the temporary directory, removed when released.
final class ScratchDirectory: Sendable {
    let path: String

    init(prefix: String) throws {
        let template = FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix).XXXXXX").path
        var bytes = Array(template.utf8CString)
        guard let made = mkdtemp(&bytes) else { throw DaemonProcess.SpawnFailed(arguments: ["mkdtemp", template], code: errno) }
        path = String(cString: made)
    }

    func file(_ name: String) -> String { "\(path)/\(name)" }

    deinit { try? FileManager.default.removeItem(atPath: path) }
}
