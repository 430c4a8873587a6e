import Foundation
import NetlinkProbe
import Synchronization

/// A long-running program started by a test (syncd, demo-feed), stopped when the test ends.
///
/// Output goes to a log file so a failing test can show it, and a full pipe can never block the
/// child.
public final class ChildProcess: Sendable {
    private let process: Process
    public let logPath: String
    /// The exit status once this object reaped the child.
    private let exitedStatus = Mutex<Int32?>(nil)
    /// Every thread's backtrace, taken when a stop found the child still running at its timeout.
    private let stacks = Mutex<String?>(nil)

    public init(_ arguments: [String], logPath: String) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = arguments
        FileManager.default.createFile(atPath: logPath, contents: nil)
        let log = try FileHandle(forWritingTo: URL(fileURLWithPath: logPath))
        process.standardOutput = log
        process.standardError = log
        process.standardInput = FileHandle.nullDevice
        try process.run()
        self.process = process
        self.logPath = logPath
    }

    public var isRunning: Bool { !hasExited }
    public var pid: Int32 { process.processIdentifier }

    /// The program's output so far.
    public var output: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    /// Sends `signal` and waits (bounded) for the exit status; SIGKILL if it does not stop,
    /// after taking its threads' backtraces (``stacksWhenHung``).
    @discardableResult
    public func stop(signal: Int32 = SIGTERM, timeout: Duration = hangGuard) async -> Int32 {
        if let status = exitedStatus.withLock({ $0 }) { return status }
        if !hasExited { kill(process.processIdentifier, signal) }
        let status = await reap(process, timeout: timeout) { pid in
            let taken = await threadStacks(of: pid)
            self.stacks.withLock { $0 = taken }
        }
        exitedStatus.withLock { $0 = status }
        return status
    }

    /// Where each thread was when a ``stop(signal:timeout:)`` gave up waiting: what a hang
    /// report needs; `nil` when every stop ended in time.
    public var stacksWhenHung: String? { stacks.withLock { $0 } }

    /// Ended, whether or not Foundation noticed (see ``exitStatus(of:)``).
    private var hasExited: Bool { !process.isRunning || isZombie(process.processIdentifier) }

    deinit {
        if exitedStatus.withLock({ $0 }) == nil && process.isRunning {
            if !isZombie(process.processIdentifier) { kill(process.processIdentifier, SIGKILL) }
            _ = exitStatus(of: process)
        }
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
