import CSocket
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
///
/// Spawned with posix_spawn, its output read and its exit awaited on threads of their own with
/// blocking calls: no Dispatch source and no Foundation `Process`. With `Process` and a
/// `readabilityHandler` on its output pipe, about one stop in eight ended in a segfault in
/// libdispatch's manager thread: the pipe's handle was released (closing the descriptor) while
/// the handler's Dispatch source still watched it. Here each descriptor has one owner, the
/// thread that reads it or this value's lifeline, and is closed by it once.
struct DemoFeedProcess: Service {
    private let child: SpawnedChild
    private let logger: Logger

    /// The port the demo server listens on.
    let port: Int

    /// Starts `demo-feed` serving `feed` with `items` items and `perSecond` new items a second,
    /// and waits until it listens.
    static func start(feed: String, items: Int, perSecond: Double, logger: Logger) async throws -> DemoFeedProcess {
        let executable = try Self.executable()
        let child = try SpawnedChild(executable: executable.path, arguments: [
            "--host", "127.0.0.1", "--port", "0", "--feed", "\(feed):\(items):\(perSecond)",
            "--log-level", "warning", "--stop-when-stdin-closes",
        ])
        guard let port = await child.firstLine(where: Self.port(in:)) else {
            child.stop()
            throw DemoFeedError("\(executable.path) exited before it listened")
        }
        return DemoFeedProcess(child: child, logger: logger, port: port)
    }

    /// Waits for the child; on graceful shutdown or cancellation stops it (SIGTERM) and waits for it to go.
    func run() async throws {
        let child = self.child
        let status = await withTaskCancellationHandler {
            await withGracefulShutdownHandler {
                await child.exitStatus()
            } onGracefulShutdown: {
                child.stop()
            }
        } onCancel: {
            child.stop()
        }
        child.closeLifeline()
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

/// A child process whose stdin is a lifeline pipe held here and whose stdout is read, line by
/// line, by a thread of its own until it ends; another thread waits for its exit.
///
/// Descriptors: the lifeline's write end belongs to ``closeLifeline()`` (closed once), the
/// output's read end to the reading thread (closed at end of file). The child is signalled only
/// until it has been reaped, so a recycled pid is never signalled.
private final class SpawnedChild: Sendable {
    private struct State {
        var lines: [String] = []
        var outputEnded = false
        var lineWaiters: [CheckedContinuation<Void, Never>] = []
        /// The child has exited (it may not be reaped yet); no signal goes to its pid any more.
        var exited = false
        var status: Int32?
        var exitWaiters: [CheckedContinuation<Int32, Never>] = []
        var lifeline: Int32?
    }

    private let pid: pid_t
    private let state: Mutex<State>

    init(executable: String, arguments: [String]) throws {
        func makePipe() throws -> (read: Int32, write: Int32) {
            var fds: [Int32] = [-1, -1]
            guard pipe2(&fds, O_CLOEXEC) == 0 else { throw DemoFeedError("cannot create a pipe for demo-feed: \(String(cString: strerror(errno)))") }
            return (fds[0], fds[1])
        }
        let input = try makePipe()
        let output: (read: Int32, write: Int32)
        do {
            output = try makePipe()
        } catch {
            close(input.read)
            close(input.write)
            throw error
        }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, input.read, 0)
        posix_spawn_file_actions_adddup2(&actions, output.write, 1)
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { for arg in argv { free(arg) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, executable, &actions, nil, argv, environ)
        close(input.read)
        close(output.write)
        guard spawned == 0 else {
            close(input.write)
            close(output.read)
            throw DemoFeedError("cannot start \(executable): \(String(cString: strerror(spawned)))")
        }
        self.pid = pid
        state = Mutex(State(lifeline: input.write))
        let reader = Thread { [self] in self.read(output.read) }
        reader.name = "syncd-demo-out"
        reader.start()
        let waiter = Thread { [self] in self.reap() }
        waiter.name = "syncd-demo-wait"
        waiter.start()
    }

    /// The first line `parse` makes something of, or `nil` when the output ended without one.
    func firstLine<T>(where parse: (String) -> T?) async -> T? {
        var seen = 0
        while true {
            let (lines, ended) = state.withLock { ($0.lines, $0.outputEnded) }
            for line in lines[seen...] {
                if let value = parse(line) { return value }
            }
            seen = lines.count
            if ended { return nil }
            await withCheckedContinuation { continuation in
                let ready = state.withLock { state -> Bool in
                    if state.lines.count > seen || state.outputEnded { return true }
                    state.lineWaiters.append(continuation)
                    return false
                }
                if ready { continuation.resume() }
            }
        }
    }

    /// The child's exit status (128 + the signal's number when a signal ended it), once it exited.
    func exitStatus() async -> Int32 {
        await withCheckedContinuation { continuation in
            let status = state.withLock { state -> Int32? in
                if let status = state.status { return status }
                state.exitWaiters.append(continuation)
                return nil
            }
            if let status { continuation.resume(returning: status) }
        }
    }

    /// Asks the child to stop (SIGTERM), unless it has already exited.
    func stop() {
        state.withLock { state in
            if !state.exited { kill(pid, SIGTERM) }
        }
    }

    /// Closes this end of the child's stdin, once.
    func closeLifeline() {
        let fd = state.withLock { state -> Int32? in
            defer { state.lifeline = nil }
            return state.lifeline
        }
        if let fd { close(fd) }
    }

    /// Reads `fd` to its end, keeping the lines until ``firstLine(where:)`` has what it needs
    /// (the child writes a line at start and little after), then closes it.
    private func read(_ fd: Int32) {
        var pending: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = Glibc.read(fd, &chunk, chunk.count)
            if count < 0 && errno == EINTR { continue }
            if count <= 0 { break }
            pending.append(contentsOf: chunk[..<count])
            var lines: [String] = []
            while let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
                lines.append(String(decoding: pending[..<newline], as: UTF8.self))
                pending.removeSubrange(...newline)
            }
            if !lines.isEmpty { wake { state in state.lines += lines.prefix(max(0, 64 - state.lines.count)) } }
        }
        close(fd)
        wake { $0.outputEnded = true }
    }

    /// Reaps the child and hands its exit status to whoever waits.
    ///
    /// It waits for the exit without reaping first (the pid stays the zombie's), records it, and
    /// only then reaps: ``stop()`` can never signal a process that took the pid over.
    private func reap() {
        var info = siginfo_t()
        while waitid(P_PID, id_t(pid), &info, WEXITED | WNOWAIT) < 0 && errno == EINTR {}
        state.withLock { $0.exited = true }
        var raw: Int32 = 0
        while waitpid(pid, &raw, 0) < 0 && errno == EINTR {}
        // WIFEXITED / WTERMSIG spelled out: the macros are not imported.
        let signal = raw & 0x7f
        let status = signal == 0 ? (raw >> 8) & 0xff : 128 + signal
        let waiters = state.withLock { state -> [CheckedContinuation<Int32, Never>] in
            state.status = status
            defer { state.exitWaiters = [] }
            return state.exitWaiters
        }
        for waiter in waiters { waiter.resume(returning: status) }
    }

    private func wake(_ change: (inout State) -> Void) {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            change(&state)
            defer { state.lineWaiters = [] }
            return state.lineWaiters
        }
        for waiter in waiters { waiter.resume() }
    }
}
