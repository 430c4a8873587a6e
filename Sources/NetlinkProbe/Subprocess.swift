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

/// How long ``runCommand(_:input:allowFailure:timeout:)`` lets a program run before it kills it:
/// the commands it runs (`ip`, `sysctl`, a short script) take well under a second, so a program
/// still running after this is stuck, and the caller gets an error instead of a wait for good.
public let commandTimeout: Duration = .seconds(120)

/// Runs a program to completion on a thread of its own and returns its standard output.
///
/// The form to use from async code; see ``onDedicatedThread(_:)``.
@discardableResult
public func runCommand(
    _ arguments: [String], input: String? = nil, allowFailure: Bool = false, timeout: Duration = commandTimeout
) async throws -> String {
    try await onDedicatedThread { try runCommand(arguments, input: input, allowFailure: allowFailure, timeout: timeout) }
}

/// Runs a program to completion, blocking the calling thread, and returns its standard output.
///
/// `PATH` is searched for the program; standard error is captured for the error message. The
/// program runs in a process group of its own; if it has not exited after `timeout`, the group
/// is killed (SIGKILL) and the call throws ``CommandFailed``, whatever `allowFailure` says.
/// Started by ``spawn(_:standardInput:standardOutput:standardError:environment:newProcessGroup:defaultSignals:)``
/// and reaped with waitpid here.
@discardableResult
public func runCommand(
    _ arguments: [String], input: String? = nil, allowFailure: Bool = false, timeout: Duration = commandTimeout
) throws -> String {
    // Every pipe end is close-on-exec; the child gets its own copies as 0, 1 and 2.
    let stdin = try makePipe(), stdout = try makePipe(), stderr = try makePipe()
    // A group of its own, so a stuck program is killed with everything it started (a shell's
    // children hold the output pipes too).
    let pid: pid_t
    do {
        pid = try spawn(
            arguments, standardInput: .descriptor(stdin.read), standardOutput: .descriptor(stdout.write),
            standardError: .descriptor(stderr.write), newProcessGroup: true)
    } catch {
        for fd in [stdin.read, stdout.write, stderr.write, stdin.write, stdout.read, stderr.read] { close(fd) }
        throw error
    }
    for fd in [stdin.read, stdout.write, stderr.write] { close(fd) }
    // Input on a thread of its own, and standard error too: a chatty child never blocks on a full pipe.
    let writer = Thread {
        if let input {
            let bytes = Array(input.utf8)
            bytes.withUnsafeBytes { raw in
                var offset = 0
                while offset < raw.count {
                    let written = write(stdin.write, raw.baseAddress! + offset, raw.count - offset)
                    if written < 0 && errno == EINTR { continue }
                    if written <= 0 { break }
                    offset += written
                }
            }
        }
        close(stdin.write)
    }
    writer.start()
    let errData = LockedData()
    let errThread = Thread { errData.set(readToEnd(stderr.read)) }
    errThread.start()
    let exited = DispatchSemaphore(value: 0)
    let killed = Atomic<Bool>(false)
    let group = pid
    let killer = Thread {
        guard exited.wait(timeout: .now() + Double(timeout.components.seconds) + Double(timeout.components.attoseconds) / 1e18) == .timedOut else { return }
        killed.store(true, ordering: .relaxed)
        kill(-group, SIGKILL)
    }
    killer.start()
    let outData = readToEnd(stdout.read)
    var status: Int32 = 0
    while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
    exited.signal()
    while !errData.isSet { usleep(1000) }
    if killed.load(ordering: .relaxed) {
        throw CommandFailed(command: arguments, status: 128 + SIGKILL, stderr: "killed after \(timeout) without exiting; it wrote: \(String(decoding: errData.value, as: UTF8.self))")
    }
    let code = exitCode(ofWaitStatus: status)
    if code != 0 && !allowFailure {
        throw CommandFailed(command: arguments, status: code, stderr: String(decoding: errData.value, as: UTF8.self))
    }
    return String(decoding: outData, as: UTF8.self)
}

/// Reads `fd` to its end and closes it.
private func readToEnd(_ fd: Int32) -> Data {
    defer { close(fd) }
    var data = Data()
    var buffer = [UInt8](repeating: 0, count: 64 << 10)
    while true {
        let count = read(fd, &buffer, buffer.count)
        if count < 0 && errno == EINTR { continue }
        if count <= 0 { return data }
        data.append(contentsOf: buffer[0..<count])
    }
}

private final class LockedData: Sendable {
    private let storage = Mutex<(Data, Bool)>((Data(), false))
    func set(_ data: Data) { storage.withLock { $0 = (data, true) } }
    var isSet: Bool { storage.withLock { $0.1 } }
    var value: Data { storage.withLock { $0.0 } }
}

/// Adds to `actions` the closing of every descriptor above standard error, so that a spawned
/// child inherits only 0, 1 and 2 (and what `actions` itself dup2s onto them).
///
/// `posix_spawn_file_actions_addclosefrom_np` (glibc 2.34) is not in Swift's Glibc module, so it
/// is looked up at run time; without it, every descriptor above stderr is marked close-on-exec.
public func closeInheritedDescriptors(_ actions: inout posix_spawn_file_actions_t) {
    typealias CloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
    if let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addclosefrom_np") {
        let closeFrom = unsafeBitCast(symbol, to: CloseFrom.self)
        if closeFrom(&actions, 3) == 0 { return }
    }
    let descriptors = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
    for fd in descriptors.compactMap(Int32.init) where fd > 2 {
        let flags = fcntl(fd, F_GETFD)
        if flags >= 0 { _ = fcntl(fd, F_SETFD, flags | FD_CLOEXEC) }
    }
}
