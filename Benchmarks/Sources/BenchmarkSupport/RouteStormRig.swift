import ConnectivityPolicy
import Foundation
import NetlinkMonitor
import NetlinkProbe

/// What one consumer of a route storm cost, measured from outside through /proc: CPU spent from
/// just before the storm until it had caught up, and its memory.
public struct StormConsumerCost: Sendable {
    /// CPU time (user + system) from just before the storm until caught up.
    public var cpu: Duration
    /// The user part of ``cpu``.
    public var user: Duration
    /// The system part of ``cpu``.
    public var system: Duration
    /// Resident set size just before the storm, bytes.
    public var rssBefore: Int
    /// Peak resident set size over the process's whole life, bytes.
    public var peakRSS: Int
    /// Storm start → caught up (what that means is the consumer's: see ``StormResult``).
    public var caughtUp: Duration
    /// Messages the kernel dropped for the consumer's netlink sockets.
    public var drops: Int

    /// The cost between `before` (just before the storm) and `after` (once caught up).
    init(before: ProcessUsage, after: ProcessUsage, caughtUp: Duration, drops: Int) {
        cpu = after.cpu - before.cpu
        user = after.user - before.user
        system = after.system - before.system
        rssBefore = before.residentBytes
        peakRSS = after.peakResidentBytes
        self.caughtUp = caughtUp
        self.drops = drops
    }

    /// `cpu 12.3 ms (user 8.1, sys 4.2), rss 1024 → peak 2048 KiB`
    var usage: String {
        func ms(_ d: Duration) -> String { ProcFS.milliseconds(d) }
        return "cpu \(ms(cpu)) ms (user \(ms(user)), sys \(ms(system))), rss \(rssBefore >> 10) → peak \(peakRSS >> 10) KiB"
    }
}

/// The outcome of one route storm.
public struct StormResult: Sendable {
    /// The monitor process (`storm-monitor`), caught up once its snapshot and verdict equal a
    /// fresh dump's (it converged on the kernel's final tables).
    public var monitor: StormConsumerCost
    public var monitorCheck: StormCheck

    /// `ip monitor route` consuming the same storm, caught up once its socket queue was empty and
    /// it idled.
    public var ip: StormConsumerCost
    /// Lines `ip monitor` printed (one per route event it received).
    public var ipEventLines: Int

    /// How long `ip -batch` took to apply the storm.
    public var stormWall: Duration
    /// Notifications the storm makes the kernel send (adds + deletes + the default route's removal).
    public var notifications: Int

    public var cpuRatio: Double { seconds(monitor.cpu) / max(seconds(ip.cpu), 1e-9) }

    public var description: String {
        func ms(_ d: Duration) -> String { ProcFS.milliseconds(d) }
        return """
        route storm: \(notifications) route notifications, ip -batch took \(ms(stormWall)) ms
          monitor:    \(monitor.usage), converged after \(ms(monitor.caughtUp)) ms, kernel drops \(monitor.drops), overflows \(monitorCheck.statistics.overflows), full resyncs \(monitorCheck.statistics.fullResyncs), batches \(monitorCheck.statistics.batches), snapshots \(monitorCheck.statistics.snapshotsPublished), kernel route lookups \(monitorCheck.statistics.routeLookups)
          ip monitor: \(ip.usage), drained after \(ms(ip.caughtUp)) ms, kernel drops \(ip.drops), events printed \(ipEventLines)
          cpu ratio monitor/ip monitor: \(cpuRatio.formatted(.number.precision(.fractionLength(2)))) (target ≤ 1.00: \(cpuRatio <= 1 ? "met" : "missed")); peak rss \(monitor.peakRSS >> 20) MiB (target < 64 MiB: \(monitor.peakRSS < 64 << 20 ? "met" : "missed"))
          final verdict \(monitorCheck.verdict.map(String.init(describing:)) ?? "none"), kernel dump says \(monitorCheck.kernelVerdict)
        """
    }

    private func seconds(_ d: Duration) -> Double {
        let (s, atto) = d.components
        return Double(s) + Double(atto) / 1e18
    }
}

/// 100,000 route adds, the default route's removal, then 100,000 deletes, applied by one
/// `ip -batch` in a fresh namespace while two consumers watch: the monitor in its own process
/// (`storm-monitor`) and `ip monitor route`. Both are measured from outside through /proc.
///
/// The default route goes in the middle so that the final verdict (offline, no route) differs
/// from the initial one: a monitor that lost the storm's tail would still say online.
public enum RouteStormRig {
    /// With `expires` (seconds), the storm's routes are IPv6 `/128` routes on the veth with that
    /// lifetime (`ip route add … expires N`): each notification then carries a lifetime
    /// (`RTA_CACHEINFO`'s `rta_expires`) that the monitor keeps until the route goes. The default
    /// route removed in the middle is still the IPv4 one the verdict depends on. `expires` 0: the
    /// same IPv6 routes without a lifetime, the comparison that isolates the lifetimes' cost.
    public static func run(routes: Int = 100_000, expires: Int? = nil, helperPath: String, timeout: Duration = .seconds(300)) async throws -> StormResult {
        let topology = try await VethTopology()
        let helper = try LineChild(executable: helperPath, arguments: [topology.client.path])
        defer { helper.finish() }
        guard try helper.readLine() == StormProtocol.ready else { throw RigError("storm-monitor did not start") }

        let log = "/dev/shm/syncd-storm-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).log"
        defer { try? FileManager.default.removeItem(atPath: log) }
        // Its output to the log, whose lines are counted below, and its errors too (it writes
        // none). Started with no signal blocked, so that the SIGTERM below stops it.
        // With no signal blocked: `ip monitor` does not unblock the SIGTERM that stops it.
        let ipMonitor = try ChildProcess(["ip", "-n", topology.client.name, "monitor", "route"], logPath: log, defaultSignals: true)
        defer {
            kill(ipMonitor.pid, SIGTERM)
            ipMonitor.waitForExitOrKill()
        }
        let ipPID = ipMonitor.pid
        let monitorPID = helper.pid

        // `ip monitor` is listening once its socket shows up in the namespace it entered.
        try await waitUntil("ip monitor listening", timeout: .seconds(10)) {
            !ProcFS.netlinkSockets(of: ipPID, viewer: ipPID).isEmpty
        }
        // Start from idle processes so start-up work is not billed to the storm.
        try await waitIdle(pid: monitorPID, timeout: .seconds(10))
        try await waitIdle(pid: ipPID, timeout: .seconds(10))
        let monitorBefore = try ProcessUsage(pid: monitorPID)
        let ipBefore = try ProcessUsage(pid: ipPID)

        let gateway = VethTopology.serverAddress
        var lines: [String] = []
        lines.reserveCapacity(2 * routes + 1)
        if let expires {
            let link = VethTopology.clientLink
            let lifetime = expires > 0 ? " expires \(expires)" : ""
            for i in 0..<routes { lines.append("route add \(stormPrefix6(i)) dev \(link)\(lifetime)") }
            lines.append("route del default")
            for i in 0..<routes { lines.append("route del \(stormPrefix6(i)) dev \(link)") }
        } else {
            for i in 0..<routes { lines.append("route add \(stormPrefix(i)) via \(gateway)") }
            lines.append("route del default")
            for i in 0..<routes { lines.append("route del \(stormPrefix(i))") }
        }

        let start = ContinuousClock.now
        try await topology.client.ipBatch(lines)
        let stormWall = ContinuousClock.now - start

        // Whichever finishes first is measured first; neither waits for the other.
        var monitorDone: (usage: ProcessUsage, at: Duration, check: StormCheck)?
        var ipDone: (usage: ProcessUsage, at: Duration)?
        var ipLastCPU = ProcessUsage.onCPUNanoseconds(pid: ipPID)
        let deadline = start + timeout
        while monitorDone == nil || ipDone == nil {
            guard ContinuousClock.now < deadline else {
                throw RigError("storm did not converge within \(timeout): monitor \(monitorDone == nil ? "pending" : "done"), ip monitor \(ipDone == nil ? "pending" : "done")")
            }
            try await Task.sleep(for: .milliseconds(50))
            if ipDone == nil {
                let cpu = ProcessUsage.onCPUNanoseconds(pid: ipPID)
                let queued = ProcFS.netlinkSockets(of: ipPID, viewer: ipPID).reduce(0) { $0 + $1.receiveQueueBytes }
                if queued == 0 && cpu == ipLastCPU {
                    ipDone = (try ProcessUsage(pid: ipPID), ContinuousClock.now - start)
                }
                ipLastCPU = cpu
            }
            if monitorDone == nil {
                let queued = ProcFS.netlinkSockets(of: monitorPID, viewer: ipPID).reduce(0) { $0 + $1.receiveQueueBytes }
                if queued == 0 {
                    let check = try helper.check()
                    if check.converged {
                        monitorDone = (try ProcessUsage(pid: monitorPID), ContinuousClock.now - start, check)
                    }
                }
            }
        }
        guard let monitorDone, let ipDone else { throw RigError("unreachable") }
        let monitorDrops = ProcFS.netlinkSockets(of: monitorPID, viewer: ipPID).reduce(0) { $0 + $1.drops }
        let ipDrops = ProcFS.netlinkSockets(of: ipPID, viewer: ipPID).reduce(0) { $0 + $1.drops }
        let ipEventLines = (try? ProcFS.read(log))?.utf8.reduce(0) { $0 + ($1 == UInt8(ascii: "\n") ? 1 : 0) } ?? 0

        // Independent of the helper's own comparison: the verdict must be the one the kernel's tables give.
        let dump = try await NetlinkMonitor.dumpSnapshot(networkNamespacePath: topology.client.path, lookingUp: [StormProtocol.host])
        let expected = ConnectivityPolicy.evaluate(dump, for: .addresses([StormProtocol.host]))
        guard monitorDone.check.verdict == expected, expected == .offline(.noRoute) else {
            throw RigError("final verdict \(monitorDone.check.verdict.map(String.init(describing:)) ?? "none"), kernel dump says \(expected) (expected offline: no route)")
        }

        return StormResult(
            monitor: StormConsumerCost(before: monitorBefore, after: monitorDone.usage, caughtUp: monitorDone.at, drops: monitorDrops),
            monitorCheck: monitorDone.check,
            ip: StormConsumerCost(before: ipBefore, after: ipDone.usage, caughtUp: ipDone.at, drops: ipDrops),
            ipEventLines: ipEventLines,
            stormWall: stormWall,
            notifications: 2 * routes + 1
        )
    }

    /// `10.100.0.0/32` onwards: outside the veth's 10.77.0.0/24.
    static func stormPrefix(_ i: Int) -> String {
        "10.\(100 + i / 65536).\(i / 256 % 256).\(i % 256)/32"
    }

    /// `2001:db8:100::0:0/128` onwards (documentation prefix), for the storm of expiring routes.
    static func stormPrefix6(_ i: Int) -> String {
        "2001:db8:100::\(String(i >> 16, radix: 16)):\(String(i & 0xffff, radix: 16))/128"
    }

    static func waitUntil(_ what: String, timeout: Duration, _ condition: () throws -> Bool) async throws {
        let deadline = ContinuousClock.now + timeout
        while try !condition() {
            guard ContinuousClock.now < deadline else { throw RigError("timed out waiting for \(what)") }
            try await Task.sleep(for: .milliseconds(10))
        }
    }

    /// Waits until `pid` used no CPU for 100 ms.
    static func waitIdle(pid: Int32, timeout: Duration) async throws {
        var last = ProcessUsage.onCPUNanoseconds(pid: pid)
        let deadline = ContinuousClock.now + timeout
        while true {
            try await Task.sleep(for: .milliseconds(100))
            let now = ProcessUsage.onCPUNanoseconds(pid: pid)
            if now == last { return }
            last = now
            guard ContinuousClock.now < deadline else { throw RigError("process \(pid) never went idle") }
        }
    }
}

/// A child process spoken to in lines over its standard input and output; its standard error
/// goes to a log file, copied to ours when it finishes.
final class LineChild {
    let process: ChildProcess
    private var buffer: [UInt8] = []

    init(executable: String, arguments: [String]) throws {
        guard FileManager.default.isExecutableFile(atPath: executable) else {
            throw RigError("\(executable) is missing: build it first (`swift build -c release --package-path Benchmarks --product storm-monitor`, which scripts/bench does)")
        }
        let log = "/dev/shm/syncd-storm-monitor-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).log"
        process = try ChildProcess([executable] + arguments, logPath: log, pipes: [.standardInput, .standardOutput])
    }

    var pid: Int32 { process.pid }

    /// Blocks until a whole line arrives (the helper answers within milliseconds).
    func readLine() throws -> String {
        let fd = process.standardOutput
        while true {
            if let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                let line = String(decoding: buffer[..<newline], as: UTF8.self)
                buffer.removeSubrange(...newline)
                return line
            }
            var chunk = [UInt8](repeating: 0, count: 4096)
            let count = read(fd, &chunk, chunk.count)
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { throw RigError("storm-monitor exited: \(process.output)") }
            buffer.append(contentsOf: chunk[0..<count])
        }
    }

    func send(_ line: String) throws {
        try process.writeStandardInput(line + "\n")
    }

    func check() throws -> StormCheck {
        try send(StormProtocol.check)
        return try JSONDecoder().decode(StormCheck.self, from: Data(readLine().utf8))
    }

    /// Closes its input (the helper exits at EOF) and reaps it, giving up after 5 s with SIGKILL
    /// so a wedged child never hangs a run; then passes on what it wrote to standard error.
    func finish() {
        process.closeStandardInput()
        process.waitForExitOrKill()
        let errors = process.output
        if !errors.isEmpty { FileHandle.standardError.write(Data(errors.utf8)) }
        try? FileManager.default.removeItem(atPath: process.logPath)
    }
}

extension ChildProcess {
    /// Waits for exit (polling, for a `defer`, which cannot await ``stop(signal:timeout:)``),
    /// giving up after 5 s with SIGKILL so a wedged child never hangs a run.
    func waitForExitOrKill() {
        let deadline = ContinuousClock.now + .seconds(5)
        while isRunning {
            if ContinuousClock.now > deadline {
                kill(pid, SIGKILL)
            }
            usleep(5000)
        }
    }
}
