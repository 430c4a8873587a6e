import Foundation
import NetlinkProbe
import Synchronization

/// A long-running program started by a test (syncd, demo-feed, a Python client), stopped when the
/// test ends.
///
/// Output goes to a log file so a failing test can show it, and a full pipe can never block the
/// child. Spawned with posix_spawn and reaped with waitpid here, as ``runCommand(_:input:allowFailure:timeout:)``
/// does, not with Foundation's `Process`: in a full run, with many descriptors open and many
/// children at once, `Process.run()` crashed the test process copying its descriptor list
/// (SIGSEGV in memcpy, seen in CI).
public final class ChildProcess: Sendable {
    /// The child's process id.
    public let pid: Int32
    public let logPath: String
    /// The raw wait status once reaped (-1 when someone else reaped it).
    private let reaped = Mutex<Int32?>(nil)
    /// Every thread's backtrace, taken when a stop found the child still running at its timeout.
    private let stacks = Mutex<String?>(nil)

    /// Starts `arguments` through `/usr/bin/env` (so a program is looked up in `PATH`), with
    /// standard input from /dev/null and standard output and error to `logPath`; nothing else
    /// of the test process is inherited but its environment, less what a service manager
    /// running the tests set for the test process itself (`NOTIFY_SOCKET`, `LISTEN_FDS`, …).
    public init(_ arguments: [String], logPath: String) throws {
        FileManager.default.createFile(atPath: logPath, contents: nil)
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, logPath, O_WRONLY | O_APPEND, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        closeInheritedDescriptors(&actions)
        let dropped: Set<String> = ["NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES", "JOURNAL_STREAM"]
        let environment = ProcessInfo.processInfo.environment.filter { !dropped.contains($0.key) }.map { "\($0.key)=\($0.value)" }
        let argv = (["/usr/bin/env"] + arguments).map { strdup($0) } + [nil]
        let envp = environment.map { strdup($0) } + [nil]
        defer {
            for pointer in argv { free(pointer) }
            for pointer in envp { free(pointer) }
        }
        var child: pid_t = 0
        let result = posix_spawn(&child, "/usr/bin/env", &actions, nil, argv, envp)
        guard result == 0 else {
            throw CommandFailed(command: arguments, status: -1, stderr: "cannot start: \(String(cString: strerror(result)))")
        }
        pid = child
        self.logPath = logPath
    }

    /// Whether the child has not exited yet (it is reaped once it has).
    public var isRunning: Bool { poll() == nil }

    /// The program's output so far.
    public var output: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    /// Sends `signal` and waits (bounded) for the exit status; SIGKILL if it does not stop,
    /// after taking its threads' backtraces (``stacksWhenHung``). Returns the exit code, or
    /// 128 + the signal that ended it, as a shell reports it.
    @discardableResult
    public func stop(signal: Int32 = SIGTERM, timeout: Duration = hangGuard) async -> Int32 {
        if poll() == nil { kill(pid, signal) }
        let deadline = ContinuousClock.now + timeout
        while poll() == nil && ContinuousClock.now < deadline { try? await Task.sleep(for: .milliseconds(signal == SIGKILL ? 2 : 20)) }
        if poll() == nil {
            let taken = await threadStacks(of: pid)
            stacks.withLock { $0 = taken }
            kill(pid, SIGKILL)
            let killDeadline = ContinuousClock.now + hangGuard
            while poll() == nil && ContinuousClock.now < killDeadline { try? await Task.sleep(for: .milliseconds(5)) }
        }
        return Self.code(poll())
    }

    /// Where each thread was when a ``stop(signal:timeout:)`` gave up waiting: what a hang
    /// report needs; `nil` when every stop ended in time.
    public var stacksWhenHung: String? { stacks.withLock { $0 } }

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

    /// The exit code of a wait status, or 128 + the signal; -1 when unknown.
    private static func code(_ status: Int32?) -> Int32 {
        guard let status, status != -1 else { return -1 }
        let signal = status & 0x7f
        return signal == 0 ? (status >> 8) & 0xff : 128 + signal
    }

    deinit {
        guard poll() == nil else { return }
        kill(pid, SIGKILL)
        // Bounded: a child SIGKILL cannot end at once (stuck in the kernel) is left as a zombie
        // rather than blocking whoever released the last reference.
        let deadline = ContinuousClock.now + hangGuard
        while poll() == nil && ContinuousClock.now < deadline { usleep(2_000) }
    }
}

/// Waits (bounded by `timeout`) for `process` to exit, SIGKILLs it when it has not, and reaps
/// it; returns its status as ``exitStatus(of:)`` reports it (128 + signal when killed).
///
/// Not `waitUntilExit()`, which cannot be bounded and can miss an exit (see ``exitStatus(of:)``).
/// `beforeKill` runs on a process still running at the timeout, before the SIGKILL.
@discardableResult
public func reap(_ process: Process, timeout: Duration = hangGuard, beforeKill: (@Sendable (Int32) async -> Void)? = nil) async -> Int32 {
    let pid = process.processIdentifier
    func hasExited() -> Bool { !process.isRunning || isZombie(pid) }
    let deadline = ContinuousClock.now + timeout
    while !hasExited() && ContinuousClock.now < deadline { try? await Task.sleep(for: .milliseconds(20)) }
    if !hasExited() {
        await beforeKill?(pid)
        kill(pid, SIGKILL)
    }
    return (try? await onDedicatedThread { exitStatus(of: process) }) ?? -1
}

/// Every thread's backtrace of `pid`, by gdb (which scripts/install-deps installs), demangled;
/// bounded to a minute, and a line saying why when there is none.
public func threadStacks(of pid: Int32) async -> String {
    let command = ["gdb", "-p", "\(pid)", "-batch", "-nx", "-iex", "set complaints 0", "-ex", "set pagination off", "-ex", "thread apply all bt"]
    guard let trace = try? await runCommand(command, timeout: .seconds(60)) else {
        return "no backtraces of \(pid): gdb is missing, failed or took over a minute"
    }
    let demangled = (try? await runCommand(["swift", "demangle", "--simplified"], input: trace, timeout: .seconds(60))) ?? trace
    // Only the threads and their frames: gdb's notes on Swift's debug information are noise here.
    return demangled.split(separator: "\n", omittingEmptySubsequences: false)
        .filter { $0.hasPrefix("Thread ") || $0.hasPrefix("#") }
        .joined(separator: "\n")
}

/// A temporary directory removed when released.
public final class TemporaryDirectory: Sendable {
    public let path: String

    public init(prefix: String = "syncd-test") throws {
        let template = FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix).XXXXXX").path
        var bytes = Array(template.utf8CString)
        guard let made = mkdtemp(&bytes) else { throw CommandFailed(command: ["mkdtemp"], status: errno, stderr: "cannot create a temporary directory") }
        path = String(cString: made)
    }

    public func file(_ name: String) -> String { "\(path)/\(name)" }

    deinit {
        try? FileManager.default.removeItem(atPath: path)
    }
}
