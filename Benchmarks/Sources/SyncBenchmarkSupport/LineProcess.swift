import Foundation
import NetlinkProbe
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A child process spoken to in lines: commands on its standard input, answers and events on
/// its standard output, read by a thread of its own into an `AsyncStream` (so no cooperative
/// thread ever blocks in `read`). Standard error is passed through. Started by NetlinkProbe's
/// `spawn`, as the tests start theirs, and reaped here.
public final class LineProcess: Sendable {
    public let pid: Int32
    public let lines: AsyncStream<String>
    /// Our end of the child's standard input, -1 once closed.
    private let input: Mutex<Int32>
    /// The child's wait status once reaped.
    private let reaped = Mutex<Int32?>(nil)

    public init(executable: String, arguments: [String], environment: [String: String]? = nil) throws {
        let inputPipe = try makePipe()
        let outputPipe: (read: Int32, write: Int32)
        do {
            outputPipe = try makePipe()
        } catch {
            close(inputPipe.read); close(inputPipe.write)
            throw error
        }
        defer { close(inputPipe.read); close(outputPipe.write) }
        do {
            pid = try spawn(
                [executable] + arguments, standardInput: .descriptor(inputPipe.read), standardOutput: .descriptor(outputPipe.write),
                environment: childEnvironment(environment ?? [:]))
        } catch {
            close(inputPipe.write); close(outputPipe.read)
            throw error
        }
        input = Mutex(inputPipe.write)
        let (lines, continuation) = AsyncStream<String>.makeStream()
        self.lines = lines
        let fd = outputPipe.read
        Thread {
            defer { close(fd) }
            var buffer: [UInt8] = []
            var chunk = [UInt8](repeating: 0, count: 16 * 1024)
            while true {
                let count = read(fd, &chunk, chunk.count)
                if count < 0 && errno == EINTR { continue }
                if count <= 0 { break }
                buffer.append(contentsOf: chunk[0..<count])
                while let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                    continuation.yield(String(decoding: buffer[..<newline], as: UTF8.self))
                    buffer.removeSubrange(...newline)
                }
            }
            continuation.finish()
        }.start()
    }

    public func send(_ line: String) throws {
        try input.withLock { fd in
            var bytes = Array((line + "\n").utf8)[...]
            while !bytes.isEmpty {
                let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
                if written < 0 && errno == EINTR { continue }
                guard written > 0 else { throw SyncRigError("cannot write to \(pid): \(String(cString: strerror(errno)))") }
                bytes = bytes.dropFirst(written)
            }
        }
    }

    /// Closes its input (the helpers exit at EOF), then SIGTERM, then SIGKILL after 5 s; reaps it.
    public func finish() {
        input.withLock { fd in
            if fd >= 0 { close(fd) }
            fd = -1
        }
        let deadline = ContinuousClock.now + .seconds(5)
        var termed = false
        while !hasExited() {
            if !termed && ContinuousClock.now > deadline - .seconds(3) { kill(pid, SIGTERM); termed = true }
            if ContinuousClock.now > deadline { kill(pid, SIGKILL) }
            usleep(5000)
        }
    }

    /// Reaps the child if it has exited; whether it has.
    private func hasExited() -> Bool {
        reaped.withLock { reaped in
            if reaped != nil { return true }
            var status: Int32 = 0
            let result = waitpid(pid, &status, WNOHANG)
            if result == pid || (result < 0 && errno == ECHILD) { reaped = status }
            return reaped != nil
        }
    }
}

/// Reads lines of a ``LineProcess`` one at a time, with a deadline.
public final class LineReader {
    private var iterator: AsyncStream<String>.Iterator
    public let name: String

    public init(_ process: LineProcess, name: String) {
        iterator = process.lines.makeAsyncIterator()
        self.name = name
    }

    /// The next line that satisfies `wanted`; other lines are skipped.
    public func next(
        timeout: Duration = .seconds(30), isolation: isolated (any Actor)? = #isolation, _ wanted: (String) -> Bool = { _ in true }
    ) async throws -> String {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            guard let line = await iterator.next(isolation: isolation) else { throw SyncRigError("\(name) exited") }
            if wanted(line) { return line }
        }
        throw SyncRigError("\(name): no answer within \(timeout)")
    }
}

/// The environment for a helper process: ours without `LD_PRELOAD`, which the benchmark plugin
/// sets for the benchmark runner (its malloc interposer) and which must not reach the measured
/// helpers (syncd, the servers, the Python baseline).
public func childEnvironment(_ overrides: [String: String] = [:]) -> [String: String] {
    var environment = ProcessInfo.processInfo.environment
    environment["LD_PRELOAD"] = nil
    return environment.merging(overrides) { $1 }
}
