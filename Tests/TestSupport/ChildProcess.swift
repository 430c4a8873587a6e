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

    /// Sends `signal` and waits (bounded) for the exit status; SIGKILL if it does not stop.
    @discardableResult
    public func stop(signal: Int32 = SIGTERM, timeout: Duration = .seconds(10)) async -> Int32 {
        guard exited == nil else { return exited! }
        kill(process.processIdentifier, signal)
        let deadline = ContinuousClock.now + timeout
        while !hasExited && ContinuousClock.now < deadline { try? await Task.sleep(for: .milliseconds(20)) }
        if !hasExited { kill(process.processIdentifier, SIGKILL) }
        let process = self.process
        let status = (try? await onDedicatedThread { exitStatus(of: process) }) ?? -1
        exitedStatus.withLock { $0 = status }
        return status
    }

    /// Whether the child ended; reaps it when it did (Foundation's own watch can miss that).
    private var hasExited: Bool {
        if exited != nil { return true }
        var status: Int32 = 0
        let pid = process.processIdentifier
        let reaped = waitpid(pid, &status, WNOHANG)
        if reaped == pid {
            let signal = status & 0x7f
            exitedStatus.withLock { $0 = signal == 0 ? (status >> 8) & 0xff : 128 + signal }
            return true
        }
        return reaped < 0 && !process.isRunning
    }

    private var exited: Int32? { exitedStatus.withLock { $0 } }

    deinit {
        if !hasExited {
            kill(process.processIdentifier, SIGKILL)
            _ = exitStatus(of: process)
        }
    }
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
