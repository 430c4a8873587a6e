import Foundation
import Synchronization

/// A long-running program started by a test or a benchmark (syncd, demo-feed, a Python client),
/// stopped when it ends.
///
/// Output goes to a log file so a failing test can show it, and a full pipe can never block the
/// child; a test that talks to the child while it runs asks for ``Pipes`` instead. Started by
/// ``spawn(_:standardInput:standardOutput:standardError:environment:newProcessGroup:defaultSignals:)``,
/// as ``runCommand(_:input:allowFailure:timeout:)`` starts its programs, and reaped with waitpid here.
public final class ChildProcess: Sendable {
    /// Which of the child's standard streams are pipes to the test rather than /dev/null (input)
    /// and the log file (output).
    public struct Pipes: OptionSet, Sendable {
        public let rawValue: Int
        /// A set of streams from its raw bits.
        public init(rawValue: Int) { self.rawValue = rawValue }
        /// Standard input from a pipe that nobody writes: the child reads end of file only
        /// once the test calls ``ChildProcess/closeStandardInput()`` (or releases the object).
        public static let standardInput = Pipes(rawValue: 1 << 0)
        /// Standard output to a pipe the test reads from ``ChildProcess/standardOutput``;
        /// standard error still goes to the log file.
        public static let standardOutput = Pipes(rawValue: 1 << 1)
    }

    /// The child's process id.
    public let pid: Int32
    /// Where the child's standard error goes, and its standard output unless piped.
    public let logPath: String
    /// The read end of the child's standard output when it is piped (``Pipes/standardOutput``),
    /// else -1. Owned by this object: the test reads it (non-blocking reads are its business)
    /// but never closes it; it is closed when the object is released.
    public let standardOutput: Int32
    /// Our end of the child's standard input when piped, -1 when not or closed.
    private let input: Mutex<Int32>
    /// The raw wait status once reaped (-1 when someone else reaped it).
    private let reaped = Mutex<Int32?>(nil)
    /// Every thread's backtrace, taken when a stop found the child still running at its timeout.
    private let stacks = Mutex<String?>(nil)

    /// What a service manager running the tests set for the test process itself, which no
    /// child inherits.
    static let serviceManagerVariables: Set<String> = [
        "NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES", "JOURNAL_STREAM",
    ]

    /// Starts `arguments` through `/usr/bin/env` (so a program is looked up in `PATH`), with
    /// standard input from /dev/null and standard output and error to `logPath`; nothing else
    /// of the test process is inherited but its environment, less what a service manager
    /// running the tests set for the test process itself (`NOTIFY_SOCKET`, `LISTEN_FDS`, …),
    /// or `environment` instead when given.
    ///
    /// `pipes` replaces standard input, standard output or both with pipes to the test (see
    /// ``Pipes``). With `defaultSignals` the child starts with no signal blocked and the default
    /// actions, whatever the spawning thread blocks (a cooperative thread blocks SIGTERM, and a
    /// program that does not unblock it never sees the SIGTERM that stops it). Throws
    /// ``CommandFailed`` when the program cannot be started.
    public init(_ arguments: [String], logPath: String, pipes: Pipes = [], environment: [String: String]? = nil, defaultSignals: Bool = false) throws {
        _ = FileManager.default.createFile(atPath: logPath, contents: nil)
        let inputPipe = pipes.contains(.standardInput) ? try makePipe() : nil
        let outputPipe: (read: Int32, write: Int32)?
        do {
            outputPipe = pipes.contains(.standardOutput) ? try makePipe() : nil
        } catch {
            if let inputPipe { close(inputPipe.read); close(inputPipe.write) }
            throw error
        }
        // The child's ends are the parent's no longer once it has them (or failed to start).
        defer {
            if let inputPipe { close(inputPipe.read) }
            if let outputPipe { close(outputPipe.write) }
        }
        let environment = environment ?? ProcessInfo.processInfo.environment.filter { !Self.serviceManagerVariables.contains($0.key) }
        let child: pid_t
        do {
            child = try spawn(
                arguments,
                standardInput: inputPipe.map { .descriptor($0.read) } ?? .null,
                standardOutput: outputPipe.map { .descriptor($0.write) } ?? .appending(to: logPath),
                standardError: outputPipe == nil ? .standardOutput : .appending(to: logPath),
                environment: environment,
                defaultSignals: defaultSignals)
        } catch {
            if let inputPipe { close(inputPipe.write) }
            if let outputPipe { close(outputPipe.read) }
            throw error
        }
        pid = child
        self.logPath = logPath
        standardOutput = outputPipe?.read ?? -1
        input = Mutex(inputPipe?.write ?? -1)
    }

    /// Closes the test's end of the child's standard input (``Pipes/standardInput``), so the
    /// child reads end of file; does nothing when it is not piped or already closed.
    public func closeStandardInput() {
        input.withLock { fd in
            if fd >= 0 { close(fd) }
            fd = -1
        }
    }

    /// Writes `text` to the child's standard input (``Pipes/standardInput``); throws when it is
    /// not piped, closed, or the child no longer reads it.
    public func writeStandardInput(_ text: String) throws {
        try input.withLock { fd in
            guard fd >= 0 else { throw CommandFailed(command: ["write"], status: -1, stderr: "the standard input of \(pid) is not open") }
            var bytes = Array(text.utf8)[...]
            while !bytes.isEmpty {
                let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
                if written < 0 && errno == EINTR { continue }
                guard written > 0 else {
                    throw CommandFailed(command: ["write"], status: -1, stderr: "cannot write to \(pid)'s input: \(String(cString: strerror(errno)))")
                }
                bytes = bytes.dropFirst(written)
            }
        }
    }

    /// Whether the child has not exited yet (it is reaped once it has).
    public var isRunning: Bool { poll() == nil }

    /// The program's output so far.
    public var output: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    /// Waits (bounded by `timeout`) for the child to exit by itself, without signalling it; one
    /// still running then is stopped as ``stop(signal:timeout:)`` stops it with SIGKILL. Returns
    /// the exit code, or 128 + the signal that ended it.
    @discardableResult
    public func waitForExit(timeout: Duration = hangGuard) async -> Int32 {
        let deadline = ContinuousClock.now + timeout
        while poll() == nil && ContinuousClock.now < deadline { try? await Task.sleep(for: .milliseconds(20)) }
        if let status = poll() { return Self.code(status) }
        return await stop(signal: SIGKILL)
    }

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
        return exitCode(ofWaitStatus: status)
    }

    deinit {
        closeStandardInput()
        if standardOutput >= 0 { close(standardOutput) }
        guard poll() == nil else { return }
        kill(pid, SIGKILL)
        // Bounded: a child SIGKILL cannot end at once (stuck in the kernel) is left as a zombie
        // rather than blocking whoever released the last reference.
        let deadline = ContinuousClock.now + hangGuard
        while poll() == nil && ContinuousClock.now < deadline { usleep(2_000) }
    }
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
