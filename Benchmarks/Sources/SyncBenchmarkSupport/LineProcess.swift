import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A child process spoken to in lines: commands on its standard input, answers and events on
/// its standard output, read by a thread of its own into an `AsyncStream` (so no cooperative
/// thread ever blocks in `read`). Standard error is passed through.
public final class LineProcess: Sendable {
    public let pid: Int32
    public let lines: AsyncStream<String>
    private let input: FileHandle
    private let process: Mutex<Process?>

    public init(executable: String, arguments: [String], environment: [String: String]? = nil) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.environment = childEnvironment(environment ?? [:])
        let inputPipe = Pipe(), outputPipe = Pipe()
        process.standardInput = inputPipe
        process.standardOutput = outputPipe
        try process.run()
        pid = process.processIdentifier
        input = inputPipe.fileHandleForWriting
        self.process = Mutex(process)
        let (lines, continuation) = AsyncStream<String>.makeStream()
        self.lines = lines
        let fd = outputPipe.fileHandleForReading.fileDescriptor
        Thread {
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
        try input.write(contentsOf: Data((line + "\n").utf8))
    }

    /// Closes its input (the helpers exit at EOF), then SIGTERM, then SIGKILL after 5 s.
    public func finish() {
        try? input.close()
        guard let process = self.process.withLock({ $0 }) else { return }
        let deadline = ContinuousClock.now + .seconds(5)
        var termed = false
        while process.isRunning {
            if !termed && ContinuousClock.now > deadline - .seconds(3) { kill(pid, SIGTERM); termed = true }
            if ContinuousClock.now > deadline { kill(pid, SIGKILL) }
            usleep(5000)
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
