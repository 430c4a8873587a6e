import Foundation
import Synchronization

/// A command that exited unsuccessfully.
public struct CommandFailed: Error, CustomStringConvertible {
    public var command: [String]
    public var status: Int32
    public var stderr: String
    public var description: String { "`\(command.joined(separator: " "))` exited \(status): \(stderr)" }

    public init(command: [String], status: Int32, stderr: String) {
        self.command = command
        self.status = status
        self.stderr = stderr
    }
}

/// Runs blocking work (a child process, a socket read) on a thread of its own and awaits it.
///
/// Swift's cooperative pool has as many threads as there are cores: on a 2-core machine two
/// blocked callers stall every task in the process, including servers under test. Anything that
/// can block goes through here instead of running on the pool.
public func onDedicatedThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread { continuation.resume(with: Result { try body() }) }.start()
    }
}

/// Runs a program to completion on a thread of its own and returns its standard output.
///
/// The form to use from async code; see ``onDedicatedThread(_:)``.
@discardableResult
public func runCommand(_ arguments: [String], input: String? = nil, allowFailure: Bool = false) async throws -> String {
    try await onDedicatedThread { try runCommand(arguments, input: input, allowFailure: allowFailure) }
}

/// Runs a program to completion, blocking the calling thread, and returns its standard output.
///
/// `PATH` is searched for the program; standard error is captured for the error message.
@discardableResult
public func runCommand(_ arguments: [String], input: String? = nil, allowFailure: Bool = false) throws -> String {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = arguments
    let out = Pipe(), err = Pipe()
    process.standardOutput = out
    process.standardError = err
    let inputPipe = Pipe()
    process.standardInput = input == nil ? FileHandle.nullDevice : inputPipe
    try process.run()
    if let input {
        inputPipe.fileHandleForWriting.write(Data(input.utf8))
        try? inputPipe.fileHandleForWriting.close()
    }
    // Read both pipes before waiting so a chatty child cannot block on a full pipe.
    let errData = LockedData()
    let errThread = Thread { errData.set(err.fileHandleForReading.readDataToEndOfFile()) }
    errThread.start()
    let outData = out.fileHandleForReading.readDataToEndOfFile()
    let status = exitStatus(of: process)
    while !errData.isSet { usleep(1000) }
    let stdout = String(decoding: outData, as: UTF8.self)
    if status != 0 && !allowFailure {
        throw CommandFailed(command: arguments, status: status, stderr: String(decoding: errData.value, as: UTF8.self))
    }
    return stdout
}

/// Waits for `process` to end and returns its exit status (128 + signal when killed), blocking
/// the calling thread.
///
/// Not only `waitUntilExit()`: when many children start and end at once, Foundation's SIGCHLD
/// watch can miss one, and `waitUntilExit()` then waits for ever on a zombie (seen in a full
/// parallel test run). Foundation stays the one that reaps: only a child that has been a zombie
/// for two seconds, which Foundation would have reaped long before, is reaped here.
public func exitStatus(of process: Process) -> Int32 {
    let pid = process.processIdentifier
    var zombieSince: ContinuousClock.Instant?
    while process.isRunning {
        if isZombie(pid) {
            let now = ContinuousClock.now
            if let since = zombieSince, now - since > .seconds(2) {
                var status: Int32 = 0
                if waitpid(pid, &status, WNOHANG) == pid {
                    // WIFEXITED / WTERMSIG spelled out: the macros are not imported.
                    let signal = status & 0x7f
                    return signal == 0 ? (status >> 8) & 0xff : 128 + signal
                }
            } else if zombieSince == nil {
                zombieSince = now
            }
        } else {
            zombieSince = nil
        }
        usleep(2000)
    }
    return process.terminationStatus
}

/// Whether `pid` has ended and waits to be reaped (state `Z` in /proc/PID/stat).
public func isZombie(_ pid: Int32) -> Bool {
    guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
          let end = stat.lastIndex(of: ")")
    else { return false }
    return stat[stat.index(after: end)...].trimmingCharacters(in: .whitespaces).first == "Z"
}

private final class LockedData: Sendable {
    private let storage = Mutex<(Data, Bool)>((Data(), false))
    func set(_ data: Data) { storage.withLock { $0 = (data, true) } }
    var isSet: Bool { storage.withLock { $0.1 } }
    var value: Data { storage.withLock { $0.0 } }
}
