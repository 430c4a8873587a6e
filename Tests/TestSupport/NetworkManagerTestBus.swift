import Foundation
import NetlinkProbe
import Synchronization

/// A private `dbus-daemon` for one test: its own socket in a temporary directory, a policy that allows
/// everything, stopped by ``stop()`` (and killed when released without it).
public final class TestBus: Sendable {
    /// The address to give the watcher and the fake NetworkManager.
    public let address: String
    /// Where its socket, configuration and logs are.
    public let directory: TemporaryDirectory
    private let daemon: SpawnedProcess
    private let instances = Atomic<Int>(0)

    private init(address: String, directory: TemporaryDirectory, daemon: SpawnedProcess) {
        self.address = address
        self.directory = directory
        self.daemon = daemon
    }

    /// Starts a dbus-daemon and returns once it listens.
    public static func start() async throws -> TestBus {
        let directory = try TemporaryDirectory(prefix: "nm-bus")
        let configuration = try PrivateBusConfiguration(writingInto: directory.path)
        let daemon = try SpawnedProcess(["dbus-daemon"] + configuration.arguments, logPath: directory.file("dbus-daemon.log"), input: false)
        // The address is printed once the daemon listens.
        do {
            try await waitUntil("dbus-daemon prints the address it listens on") {
                daemon.output.contains("unix:path=") || daemon.hasExited
            }
        } catch {
            await daemon.stop()
            throw TestSetupFailed(description: "\(error); dbus-daemon wrote: \(daemon.output)")
        }
        guard !daemon.hasExited else {
            throw TestSetupFailed(description: "dbus-daemon exited at once: \(daemon.output)")
        }
        return TestBus(address: configuration.address, directory: directory, daemon: daemon)
    }

    /// A fresh log file name in the bus's directory, for the `n`-th fake NetworkManager.
    public func nextLogPath(_ name: String) -> String {
        directory.file("\(name)-\(instances.add(1, ordering: .relaxed).newValue).log")
    }

    /// Stops the daemon (SIGTERM, then SIGKILL after the hang guard); returns its exit status.
    @discardableResult
    public func stop() async -> Int32 { await daemon.stop() }
}

/// Runs `body` with a private bus, stopped on every path.
public func withTestBus<T: Sendable>(_ body: (TestBus) async throws -> T) async throws -> T {
    let bus = try await TestBus.start()
    do {
        let result = try await body(bus)
        await bus.stop()
        return result
    } catch {
        await bus.stop()
        throw error
    }
}

/// `Oracle/fake_networkmanager.py` on a test bus: a stand-in NetworkManager in Python (python3-dbus) that
/// shares no code with the watcher. Driven through its standard input, one command at a time.
public final class FakeNetworkManager: Sendable {
    private let process: SpawnedProcess
    private let sent = Mutex(0)

    private init(process: SpawnedProcess) {
        self.process = process
    }

    /// Starts the fake with `devices` (interface name, `Metered` as the script takes it: a number, or
    /// `s:TEXT` for a wrong-typed string) and returns once it owns `org.freedesktop.NetworkManager`.
    /// With `slow`, each device's properties are answered that late, as by a NetworkManager busy at boot.
    public static func start(on bus: TestBus, devices: KeyValuePairs<String, String> = [:], slow: Duration = .zero) async throws -> FakeNetworkManager {
        let python = try await NetworkManagerOracle.python()
        let delay = slow > .zero ? ["--slow=\(Double(slow.components.seconds) + Double(slow.components.attoseconds) / 1e18)"] : []
        let arguments = [python, NetworkManagerOracle.script, bus.address] + delay + devices.map { "\($0.key)=\($0.value)" }
        let process = try SpawnedProcess(arguments, logPath: bus.nextLogPath("fake-networkmanager"), input: true)
        do {
            try await waitUntil("the fake NetworkManager owns org.freedesktop.NetworkManager") {
                process.output.split(separator: "\n").contains("ready") || process.hasExited
            }
        } catch {
            await process.stop()
            throw TestSetupFailed(description: "\(error); it wrote: \(process.output)")
        }
        guard !process.hasExited else {
            throw TestSetupFailed(description: "the fake NetworkManager exited: \(process.output)")
        }
        return FakeNetworkManager(process: process)
    }

    /// Sends one command (`add wlan0 2`, `set wlan0 1`, `remove wlan0`, …) and returns once the fake has
    /// obeyed it: its signals are on the bus by then.
    public func send(_ command: String) async throws {
        let count = sent.withLock { sent in
            sent += 1
            return sent
        }
        try process.write(command + "\n")
        try await waitUntil("the fake NetworkManager has obeyed `\(command)`") {
            let lines = process.output.split(separator: "\n")
            return lines.filter { $0 == "ok" }.count >= count || lines.contains { $0.hasPrefix("error") } || process.hasExited
        }
        let output = process.output
        if output.contains("\nerror") || output.contains("Traceback") {
            throw TestSetupFailed(description: "the fake NetworkManager failed `\(command)`: \(output)")
        }
    }

    /// Tells the fake to leave the bus and returns once it has exited.
    public func quit() async throws {
        try process.write("quit\n")
        try await waitUntil("the fake NetworkManager has exited after `quit`") { process.hasExited }
    }

    /// Stops the fake (SIGTERM) unless it has exited.
    public func stop() async { await process.stop() }

    /// What the fake wrote.
    public var output: String { process.output }
}

/// Where the fake NetworkManager is and what runs it.
public enum NetworkManagerOracle {
    /// The script.
    public static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("Oracle/fake_networkmanager.py").path

    private static let probe = "import sys, dbus, dbus.mainloop.glib; from gi.repository import GLib; print(sys.executable)"

    /// The first Python that has python3-dbus and python3-gi: Debian's own, whose packages they are,
    /// before whatever `python3` is first on the PATH (a pyenv build has neither).
    public static func python() async throws -> String {
        for candidate in ["/usr/bin/python3", "python3"] {
            let output = (try? await runCommand([candidate, "-c", probe], allowFailure: true)) ?? ""
            let path = output.trimmingCharacters(in: .whitespacesAndNewlines)
            if !path.isEmpty { return path }
        }
        throw TestSetupFailed(description: "no python3 with python3-dbus and python3-gi (apt-get install python3-dbus python3-gi)")
    }

    /// Whether the tests can run here: dbus-daemon and a Python with the modules. Under CI they run
    /// regardless, and fail saying what is missing.
    public static let isAvailable: Bool = {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/dbus-daemon")
            || ((try? runCommand(["sh", "-c", "command -v dbus-daemon"], allowFailure: true)) ?? "").isEmpty == false
        else { return false }
        for candidate in ["/usr/bin/python3", "python3"] {
            let output = (try? runCommand([candidate, "-c", probe], allowFailure: true)) ?? ""
            if !output.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty { return true }
        }
        return false
    }()
}

/// Something a test needs did not start.
public struct TestSetupFailed: Error, CustomStringConvertible {
    /// What did not start, and what it said.
    public var description: String

    /// A failure described by `description`.
    public init(description: String) { self.description = description }
}

/// A program started with ``spawn(_:standardInput:standardOutput:standardError:environment:newProcessGroup:defaultSignals:)``,
/// its output in a log file, its standard input (when asked for) a socket this object writes lines to.
///
/// Not `ChildProcess`, whose standard input is /dev/null. A socket rather than a pipe so that a write
/// to a child that died fails with EPIPE (`MSG_NOSIGNAL`) instead of killing the test process with
/// SIGPIPE. Reaped here with `waitpid`, never by Foundation, which knows nothing of it.
public final class SpawnedProcess: Sendable {
    /// The program's process id.
    public let pid: pid_t
    /// Where its output goes.
    public let logPath: String
    /// Our end of the child's standard input, -1 when it has none or it is closed.
    private let input: Mutex<Int32>
    /// The exit status once reaped: after that the pid is never signalled (it may be reused).
    private let status = Mutex<Int32?>(nil)

    /// Starts `arguments` (looked up on the PATH) with its output in `logPath` and, when
    /// `wantsInput`, a standard input that ``write(_:)`` feeds.
    public init(_ arguments: [String], logPath: String, input wantsInput: Bool) throws {
        let log = open(logPath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard log >= 0 else { throw TestSetupFailed(description: "cannot create \(logPath): \(String(cString: strerror(errno)))") }
        defer { close(log) }
        var ends: [Int32] = [-1, -1]
        if wantsInput {
            guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &ends) == 0 else {
                throw TestSetupFailed(description: "socketpair: \(String(cString: strerror(errno)))")
            }
        } else {
            ends[1] = open("/dev/null", O_RDONLY | O_CLOEXEC)
        }
        // The spawning thread's blocked and ignored signals would be inherited: a dbus-daemon spawned
        // with SIGTERM blocked never stops on it.
        let pid: pid_t
        do {
            pid = try spawn(
                arguments, standardInput: .descriptor(ends[1]), standardOutput: .descriptor(log), standardError: .descriptor(log),
                defaultSignals: true)
        } catch {
            close(ends[1])
            if ends[0] >= 0 { close(ends[0]) }
            throw TestSetupFailed(description: "cannot start \(arguments[0]): \(error)")
        }
        close(ends[1])
        self.pid = pid
        self.logPath = logPath
        self.input = Mutex(ends[0])
    }

    /// What the program wrote so far.
    public var output: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    /// Whether the program has ended (it is reaped then).
    public var hasExited: Bool { reapIfExited() != nil }

    /// Writes `text` to the program's standard input.
    public func write(_ text: String) throws {
        try input.withLock { fd in
            var bytes = Array(text.utf8)[...]
            while !bytes.isEmpty {
                let written = bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                if written < 0 && errno == EINTR { continue }
                guard written > 0 else {
                    throw TestSetupFailed(description: "cannot write to \(pid)'s input: \(String(cString: strerror(errno)))")
                }
                bytes = bytes.dropFirst(written)
            }
        }
    }

    /// Sends `signal` unless the program has ended, waits (bounded) for it to end, SIGKILLs it when it
    /// has not; returns its exit status (128 + signal when killed).
    @discardableResult
    public func stop(signal: Int32 = SIGTERM, timeout: Duration = hangGuard) async -> Int32 {
        if let status = reapIfExited() { return status }
        signalUnlessReaped(signal)
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if let status = reapIfExited() { return status }
            try? await Task.sleep(for: .milliseconds(10))
        }
        signalUnlessReaped(SIGKILL)
        return reap(blocking: true) ?? -1
    }

    private func signalUnlessReaped(_ signal: Int32) {
        status.withLock { status in
            if status == nil { kill(pid, signal) }
        }
    }

    private func reapIfExited() -> Int32? { reap(blocking: false) }

    private func reap(blocking: Bool) -> Int32? {
        status.withLock { status in
            if let status { return status }
            var raw: Int32 = 0
            var result: pid_t
            repeat { result = waitpid(pid, &raw, blocking ? 0 : WNOHANG) } while result < 0 && errno == EINTR
            guard result == pid else { return nil }
            status = exitCode(ofWaitStatus: raw)
            return status
        }
    }

    deinit {
        input.withLock { fd in
            if fd >= 0 { close(fd) }
        }
        if reapIfExited() == nil {
            signalUnlessReaped(SIGKILL)
            _ = reap(blocking: true)
        }
    }
}
