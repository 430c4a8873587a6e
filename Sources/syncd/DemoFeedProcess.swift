import Foundation
import Logging
import ServiceLifecycle
import Synchronization

/// The bundled demo feed for `syncd --demo`: the `demo-feed` executable built beside `syncd`,
/// run as a child process on a free loopback port.
///
/// A child process rather than a server in the daemon's own address space: the daemon then
/// carries no HTTP server code (and none of it resident) when it runs for real. The child's
/// stdin is a pipe from this process, and it stops when that pipe closes, so it goes with the
/// daemon however the daemon ends, SIGKILL included.
struct DemoFeedProcess: Service {
    private let process: Process
    private let exits: AsyncStream<Int32>
    private let logger: Logger
    /// Kept open for the child's lifetime: its end of file is the child's signal to stop.
    private let lifeline: Pipe

    /// The port the demo server listens on.
    let port: Int

    /// Starts `demo-feed` serving `feed` with `items` items and `perSecond` new items a second,
    /// and waits until it listens.
    static func start(feed: String, items: Int, perSecond: Double, logger: Logger) async throws -> DemoFeedProcess {
        let executable = try Self.executable()
        let process = Process()
        process.executableURL = executable
        process.arguments = [
            "--host", "127.0.0.1", "--port", "0", "--feed", "\(feed):\(items):\(perSecond)",
            "--log-level", "warning", "--stop-when-stdin-closes",
        ]
        let output = Pipe(), lifeline = Pipe()
        process.standardOutput = output
        process.standardInput = lifeline
        let (exits, exited) = AsyncStream.makeStream(of: Int32.self, bufferingPolicy: .bufferingNewest(1))
        process.terminationHandler = { exited.yield($0.terminationStatus); exited.finish() }
        let (lines, line) = AsyncStream.makeStream(of: String.self)
        let buffer = LineBuffer()
        // The handler runs on a Dispatch source: nothing here blocks a task waiting for the line.
        output.fileHandleForReading.readabilityHandler = { handle in
            let data = handle.availableData
            guard !data.isEmpty else {
                handle.readabilityHandler = nil
                line.finish()
                return
            }
            for text in buffer.append(data) { line.yield(text) }
        }
        try process.run()
        for await text in lines {
            if let port = Self.port(in: text) {
                return DemoFeedProcess(process: process, exits: exits, logger: logger, lifeline: lifeline, port: port)
            }
        }
        process.terminate()
        throw DemoFeedError("\(executable.path) exited before it listened")
    }

    /// Waits for the child; on graceful shutdown or cancellation stops it (SIGTERM) and waits for it to go.
    func run() async throws {
        let status = await withTaskCancellationHandler {
            await withGracefulShutdownHandler {
                var last: Int32 = -1
                for await status in exits { last = status }
                return last
            } onGracefulShutdown: { [process] in
                if process.isRunning { process.terminate() }
            }
        } onCancel: { [process] in
            if process.isRunning { process.terminate() }
        }
        try? lifeline.fileHandleForWriting.close()
        if !Task.isShuttingDownGracefully && !Task.isCancelled {
            throw DemoFeedError("the demo feed server exited (status \(status))")
        }
        logger.debug("demo feed server stopped", metadata: ["status": "\(status)"])
    }

    private static func executable() throws -> URL {
        let own = URL(fileURLWithPath: (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0])
        let sibling = own.deletingLastPathComponent().appendingPathComponent("demo-feed")
        guard FileManager.default.isExecutableFile(atPath: sibling.path) else {
            throw DemoFeedError("--demo runs the bundled demo feed server, demo-feed, from beside syncd, and \(sibling.path) is not there: `swift build` builds both")
        }
        return sibling
    }

    private static func port(in line: String) -> Int? {
        guard line.hasPrefix("listening on http://"), let colon = line.lastIndex(of: ":") else { return nil }
        return Int(line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
    }
}

/// Why the demo feed could not run.
struct DemoFeedError: Error, CustomStringConvertible {
    let description: String

    init(_ description: String) {
        self.description = description
    }
}

/// Splits the child's output into lines as it arrives.
private final class LineBuffer: Sendable {
    private let pending = Mutex<[UInt8]>([])

    func append(_ data: Data) -> [String] {
        pending.withLock { bytes in
            bytes.append(contentsOf: data)
            var lines: [String] = []
            while let newline = bytes.firstIndex(of: UInt8(ascii: "\n")) {
                lines.append(String(decoding: bytes[..<newline], as: UTF8.self))
                bytes.removeSubrange(...newline)
            }
            return lines
        }
    }
}
