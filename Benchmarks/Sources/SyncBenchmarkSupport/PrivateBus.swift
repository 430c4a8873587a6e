import Foundation
import NetlinkProbe
#if canImport(Glibc)
import Glibc
#endif

/// How the idle rig's syncd meets NetworkManager (`[network] networkmanager`).
public enum IdleNetworkManager: String, Sendable, CaseIterable {
    /// `networkmanager = false`: no watcher at all.
    case off
    /// The default (`networkmanager` on) with whatever system bus this machine has:
    /// `DBUS_SYSTEM_BUS_ADDRESS` passed through as it is, else `/run/dbus/system_bus_socket`.
    case system
    /// On, connected to a private `dbus-daemon` on which the tests' stand-in NetworkManager
    /// (`Tests/TestSupport/Oracle/fake_networkmanager.py`) owns `org.freedesktop.NetworkManager`
    /// and says every link of this host is metered (`Metered=1`); syncd finds the bus through
    /// `DBUS_SYSTEM_BUS_ADDRESS`.
    case standIn
}

/// A private `dbus-daemon` (``PrivateBusConfiguration``, as the tests' `TestBus`), for the idle
/// rig. Stopped by ``stop()``.
public final class PrivateBus: Sendable {
    /// `unix:path=…`, for `DBUS_SYSTEM_BUS_ADDRESS` and the stand-in NetworkManager.
    public let address: String
    private let daemon: LineProcess

    public var pid: Int32 { daemon.pid }

    private init(address: String, daemon: LineProcess) {
        self.address = address
        self.daemon = daemon
    }

    /// Starts a bus with its socket and configuration in `directory`; returns once it listens.
    public static func start(in directory: String) async throws -> PrivateBus {
        let configuration = try PrivateBusConfiguration(writingInto: directory)
        let executable = ["/usr/bin/dbus-daemon", "/bin/dbus-daemon"].first { FileManager.default.isExecutableFile(atPath: $0) }
        guard let executable else { throw SyncRigError("dbus-daemon is not installed (apt-get install dbus-daemon)") }
        let daemon = try LineProcess(executable: executable, arguments: configuration.arguments)
        // The address is printed once the daemon listens.
        do {
            _ = try await LineReader(daemon, name: "dbus-daemon").next(timeout: .seconds(20)) { $0.hasPrefix("unix:") }
        } catch {
            kill(daemon.pid, SIGKILL)
            daemon.finish()
            throw error
        }
        return PrivateBus(address: configuration.address, daemon: daemon)
    }

    /// SIGKILL: children of the benchmark runner inherit its blocked SIGTERM.
    public func stop() {
        kill(daemon.pid, SIGKILL)
        daemon.finish()
    }
}

/// The tests' stand-in NetworkManager (python3-dbus on a GLib loop) on a ``PrivateBus``: the
/// script and its command language are described in `Tests/TestSupport/Oracle/fake_networkmanager.py`.
public final class StandInNetworkManager: Sendable {
    private let process: LineProcess
    private let reader: LineReaderBox

    public var pid: Int32 { process.pid }

    private init(process: LineProcess) {
        self.process = process
        reader = LineReaderBox(LineReader(process, name: "fake NetworkManager"))
    }

    /// `IDLE_FAKE_NETWORKMANAGER` when set, else the tests' script in this repository
    /// (`Tests/TestSupport/Oracle/`, where it was in `Tests/LinkCostTests/Oracle/` before).
    public static var script: String {
        if let path = ProcessInfo.processInfo.environment["IDLE_FAKE_NETWORKMANAGER"], !path.isEmpty { return path }
        let root = URL(fileURLWithPath: HelperPaths.packageDirectory).deletingLastPathComponent()
        let places = ["Tests/TestSupport/Oracle/fake_networkmanager.py", "Tests/LinkCostTests/Oracle/fake_networkmanager.py"]
            .map { root.appendingPathComponent($0).path }
        return places.first { FileManager.default.fileExists(atPath: $0) } ?? places[0]
    }

    /// The first Python with python3-dbus and python3-gi: Debian's own before the PATH's (a pyenv
    /// build has neither).
    static func python() async throws -> String {
        let probe = "import dbus, dbus.mainloop.glib; from gi.repository import GLib"
        // The probe's output, which nobody reads, goes to a scratch log.
        let log = NSTemporaryDirectory() + "python-probe-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).log"
        defer { try? FileManager.default.removeItem(atPath: log) }
        for candidate in ["/usr/bin/python3", "/usr/local/bin/python3"] where FileManager.default.isExecutableFile(atPath: candidate) {
            let process = try ChildProcess([candidate, "-c", probe], logPath: log, environment: childEnvironment())
            if await process.waitForExit() == 0 { return candidate }
        }
        throw SyncRigError("no python3 with python3-dbus and python3-gi (apt-get install python3-dbus python3-gi)")
    }

    /// Starts the stand-in with `devices` (interface name → `Metered` as the script takes it) and
    /// returns once it owns `org.freedesktop.NetworkManager`.
    public static func start(on bus: PrivateBus, devices: [(String, String)]) async throws -> StandInNetworkManager {
        let script = Self.script
        guard FileManager.default.fileExists(atPath: script) else { throw SyncRigError("\(script) is missing (IDLE_FAKE_NETWORKMANAGER names another)") }
        let process = try LineProcess(executable: try await python(), arguments: [script, bus.address] + devices.map { "\($0.0)=\($0.1)" })
        let standIn = StandInNetworkManager(process: process)
        do {
            _ = try await standIn.reader.reader.next(timeout: .seconds(30)) { $0 == "ready" || $0.hasPrefix("error") }
        } catch {
            process.finish()
            throw SyncRigError("the fake NetworkManager did not start: \(error)")
        }
        return standIn
    }

    /// Sends one command (`set eth0 2`) and returns once the stand-in has obeyed it.
    public func send(_ command: String) async throws {
        try process.send(command)
        let answer = try await reader.reader.next(timeout: .seconds(10)) { $0 == "ok" || $0.hasPrefix("error") }
        guard answer == "ok" else { throw SyncRigError("the fake NetworkManager failed `\(command)`: \(answer)") }
    }

    /// Closes its input: the script leaves the bus and exits.
    public func stop() { process.finish() }
}

/// A ``LineReader`` (a class with mutable state) held by a `Sendable` owner that uses it from one
/// task at a time.
private final class LineReaderBox: @unchecked Sendable {
    let reader: LineReader
    init(_ reader: LineReader) { self.reader = reader }
}

/// The links of this network namespace, from /sys/class/net.
public func currentLinkNames() -> [String] {
    ((try? FileManager.default.contentsOfDirectory(atPath: "/sys/class/net")) ?? []).sorted()
}
