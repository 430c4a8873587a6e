import Foundation
import NetlinkProbe
import SyncStore

/// Context switches of every thread of a process, read from /proc/PID/task/*/status.
public struct ThreadSwitches: Sendable {
    public var byThread: [Int32: (name: String, switches: Int)]

    public init(pid: Int32) {
        var result: [Int32: (String, Int)] = [:]
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
        for task in tasks {
            guard let tid = Int32(task),
                let status = try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/status", encoding: .utf8)
            else { continue }
            var name = "?"
            var switches = 0
            for line in status.split(separator: "\n") {
                if line.hasPrefix("Name:") { name = line.dropFirst(5).trimmingCharacters(in: .whitespaces) }
                if line.hasPrefix("voluntary_ctxt_switches:") || line.hasPrefix("nonvoluntary_ctxt_switches:") {
                    switches += Int(line.split(separator: ":")[1].trimmingCharacters(in: .whitespaces)) ?? 0
                }
            }
            result[tid] = (name, switches)
        }
        byThread = result
    }

    public var total: Int { byThread.values.reduce(0) { $0 + $1.switches } }

    /// Switches per thread since `earlier`; threads born in between count from zero.
    public func since(_ earlier: ThreadSwitches) -> [(tid: Int32, name: String, switches: Int)] {
        byThread.map { tid, entry in (tid, entry.name, entry.switches - (earlier.byThread[tid]?.switches ?? 0)) }
            .sorted { $0.switches > $1.switches }
    }
}

/// A value from /proc/PID/status in KiB (`VmRSS`, `VmHWM`).
public func procStatusKiB(pid: Int32, _ key: String) -> Int {
    procKiB(pid: pid, file: "status", key)
}

/// The proportional set size of `pid` (shared pages divided among the processes that map
/// them), from `/proc/PID/smaps_rollup`; 0 when it cannot be read.
public func procPSSKiB(pid: Int32) -> Int {
    procKiB(pid: pid, file: "smaps_rollup", "Pss")
}

/// The fields of `/proc/PID/stat` after the command name (the state is the first); `nil` when it
/// cannot be read.
private func procStatFields(pid: Int32) -> [Substring]? {
    guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
          let close = stat.lastIndex(of: ")")
    else { return nil }
    return stat[stat.index(after: close)...].split(separator: " ")
}

/// CPU time (user + system) `pid` has used so far, in seconds, from `/proc/PID/stat`; 0 when it
/// cannot be read.
public func procCPUSeconds(pid: Int32) -> Double {
    // utime and stime are fields 14 and 15 of the file.
    guard let fields = procStatFields(pid: pid), fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
    return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
}

/// Page faults `pid` has taken so far (minor, major), from `/proc/PID/stat`.
public func procFaults(pid: Int32) -> (minor: Int, major: Int) {
    // minflt is field 10 of the file, majflt field 12.
    guard let fields = procStatFields(pid: pid), fields.count > 9 else { return (0, 0) }
    return (Int(fields[7]) ?? 0, Int(fields[9]) ?? 0)
}

/// One Varlink `io.syncd.GetStatus` call on the Unix socket at `path`, waiting for the whole reply;
/// returns the reply (without its NUL).
@discardableResult
func statusRoundTrip(socket path: String) throws -> String {
    try varlinkCall(socket: path, #"{"method":"io.syncd.GetStatus"}"#)
}

/// One Varlink call (`message`, a JSON object) on a new connection to the Unix socket at `path`,
/// waiting for the whole reply; returns the reply (without its NUL).
@discardableResult
public func varlinkCall(socket path: String, _ message: String) throws -> String {
    let fd = try connectUnix(path)
    defer { close(fd) }
    try sendWhole(Array(message.utf8) + [0], on: fd)
    var reply: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 65_536)
    while true {
        let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        guard count > 0 else { throw SyncRigError("\(message.prefix(40)): no reply (errno \(errno))") }
        reply.append(contentsOf: buffer[0..<count])
        if buffer[count - 1] == 0 { return String(decoding: reply.dropLast(), as: UTF8.self) }
    }
}

/// A `key: N kB` figure of `/proc/<pid>/<file>` (`status`: `VmRSS`, `VmHWM`), 0 when unreadable.
public func procKiB(pid: Int32, file: String, _ key: String) -> Int {
    guard let status = try? String(contentsOfFile: "/proc/\(pid)/\(file)", encoding: .utf8) else { return 0 }
    for line in status.split(separator: "\n") where line.hasPrefix(key + ":") {
        return Int(line.dropFirst(key.count + 1).trimmingCharacters(in: .whitespaces).split(separator: " ")[0]) ?? 0
    }
    return 0
}

/// Idle cost of the real `syncd` binary: started on a configuration with one demo feed on
/// loopback (refresh every `refreshSeconds`), left to sync, then watched from outside for
/// `seconds`: context switches of all its threads (voluntary + involuntary) and RSS.
/// Next to it, in the same window, `ip monitor link address route` (a process that only sleeps
/// on a netlink socket of the same namespace): its switches are what kernel events alone cause.
public final class IdleRig: Sendable {
    public struct Result: Sendable {
        public var seconds: Double
        public var switches: Int
        public var perSecond: [Int]
        public var threads: [(tid: Int32, name: String, switches: Int)]
        public var rssKiB: Int
        /// Proportional set size: shared pages counted once across the processes mapping them.
        public var pssKiB: Int
        public var hwmKiB: Int
        public var baselineSwitches: Int
        public var baselineRSSKiB: Int
        public var anonKiB: Int
        public var fileKiB: Int
        /// `reconnect-helper idle-floor`: a Swift process that only awaits, in the same window.
        public var floorSwitches: Int
        public var floorRSSKiB: Int
        public var floorPSSKiB: Int
        public var floorRate: Double { Double(floorSwitches) / seconds }
        /// Pages syncd committed in the window (each refresh of this unchanging feed commits one empty page).
        public var commits: Int
        /// After the window, `GetStatus` round trips on the control socket, one after another
        /// (milliseconds): the first wakes the idle daemon, whose code faults back in.
        public var statusCallsMs: [Double]
        /// syncd's page faults (minor, major) during the first of those calls.
        public var wakeFaults: (minor: Int, major: Int)
        /// syncd's PSS after those calls.
        public var pssAfterCallsKiB: Int
        public var rate: Double { Double(switches) / seconds }
        public var baselineRate: Double { Double(baselineSwitches) / seconds }

        // NetworkManager (`[network] networkmanager`).
        public var networkManager: IdleNetworkManager = .system
        /// Whether `/run/dbus/system_bus_socket` existed and what `DBUS_SYSTEM_BUS_ADDRESS` was
        /// (the `system` variant's bus).
        public var systemBus = ""
        /// syncd's log lines about NetworkManager or the bus, as written before the window.
        public var watcherLog: [String] = []
        /// Switches of syncd's bus thread (`syncd-nm-bus`) in the window; nil when it has none.
        public var watcherThreadSwitches: Int?
        /// The private dbus-daemon's and the stand-in NetworkManager's switches in the window.
        public var busSwitches: Int?
        public var standInSwitches: Int?
        /// The `cost` objects of the first `GetStatus` reply after the window.
        public var statusCosts: [String] = []
        /// The stand-in's `Metered` change after the window (every link to 2, "no") reached the
        /// status: the watcher follows the bus, not only its first read. nil when not tried.
        public var followedChange: Bool?
        public var followedChangeMs: Double?
    }

    public init() {}

    /// With `metrics`, syncd also serves its metrics on a Unix socket and writes the metrics
    /// textfile; nobody scrapes it during the window.
    ///
    /// `networkManager` says whether syncd follows NetworkManager and over which bus: not at all,
    /// over this machine's system bus (the default), or over a private bus with the tests'
    /// stand-in NetworkManager on it (checked before the window from syncd's log, and after it from
    /// `GetStatus`: the links' cost must come from NetworkManager).
    public func run(
        seconds: Int, refreshSeconds: Int, items: Int = 1000, metrics: Bool = false, networkManager: IdleNetworkManager = .system
    ) async throws -> Result {
        let directory = NSTemporaryDirectory() + "idle-cost-\(getpid())-\(Int.random(in: 0..<1_000_000))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var bus: PrivateBus?
        var standIn: StandInNetworkManager?
        defer {
            standIn?.stop()
            bus?.stop()
        }
        let links = currentLinkNames()
        if networkManager == .standIn {
            bus = try await PrivateBus.start(in: directory)
            // Every link metered (NMMetered 1, "yes"): the feed's (lo) and the internet's.
            standIn = try await StandInNetworkManager.start(on: bus!, devices: links.map { ($0, "1") })
        }
        let server = try LineProcess(
            executable: try HelperPaths.executable("demo-feed"),
            arguments: ["--host", "127.0.0.1", "--port", "0", "--feed", "idle:\(items):0", "--limit", "100", "--log-level", "warning"])
        defer { server.finish() }
        let serverLines = LineReader(server, name: "demo-feed")
        let listening = try await serverLines.next { $0.hasPrefix("listening on ") }
        let baseURL = String(listening.dropFirst("listening on ".count))
        let config = """
            [daemon]
            store = "\(directory)/syncd.sqlite"
            control_socket = "\(directory)/io.syncd"
            log_level = "info"

            [[feed]]
            name = "idle"
            url = "\(baseURL)/feeds/idle"
            page_size = 100
            refresh_interval = "\(refreshSeconds)s"
            backfill = \(items)
            """ + (metrics ? """

            [metrics]
            listen = "\(directory)/metrics.sock"
            textfile = "\(directory)/syncd.prom"
            """ : "") + (networkManager == .off ? """

            [network]
            networkmanager = false
            """ : "")
        try config.write(toFile: "\(directory)/syncd.toml", atomically: true, encoding: .utf8)
        let logPath = "\(directory)/syncd.log"
        var environment = childEnvironment()
        if let bus { environment["DBUS_SYSTEM_BUS_ADDRESS"] = bus.address }
        let systemBus = "DBUS_SYSTEM_BUS_ADDRESS \(environment["DBUS_SYSTEM_BUS_ADDRESS"].map { "= \($0)" } ?? "unset"), /run/dbus/system_bus_socket \(FileManager.default.fileExists(atPath: "/run/dbus/system_bus_socket") ? "exists" : "absent")"
        // Its log (a file, with its standard output, which it does not write): the watcher's
        // lines are checked below.
        let syncd = try ChildProcess(
            [try HelperPaths.executable("syncd"), "--config", "\(directory)/syncd.toml"], logPath: logPath, environment: environment)
        defer {
            kill(syncd.pid, SIGTERM)
            let deadline = ContinuousClock.now + .seconds(5)
            while syncd.isRunning && ContinuousClock.now < deadline { usleep(10_000) }
            if syncd.isRunning { kill(syncd.pid, SIGKILL) }
        }
        let pid = syncd.pid

        // Synced: every item stored and the end reached (read from the store, not over the
        // control socket, so the wait itself does not wake syncd).
        let deadline = ContinuousClock.now + .seconds(120)
        var revisionBefore = 0
        while true {
            try await Task.sleep(for: .milliseconds(500))
            guard syncd.isRunning else { throw SyncRigError("syncd exited with status \(await syncd.waitForExit())") }
            if FileManager.default.fileExists(atPath: "\(directory)/syncd.sqlite"),
                let feed = try? SQLiteFeedStore(path: "\(directory)/syncd.sqlite").loadSynchronously(feed: "idle"),
                feed.itemCount >= items, feed.endReached
            {
                revisionBefore = feed.revision
                break
            }
            guard ContinuousClock.now < deadline else { throw SyncRigError("syncd did not sync the feed within 120 s") }
        }
        // Let the last commit's work and the status report finish; with metrics, also the
        // textfile's write of the sync's end, which comes up to its interval (15 s) later.
        try await Task.sleep(for: .seconds(metrics ? 18 : 3))

        // What the watcher said (read from its log file, which does not wake syncd). With the
        // stand-in, it must have found NetworkManager on the bus before the window.
        func watcherLines() -> [String] {
            ((try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "").split(separator: "\n")
                .filter { $0.contains("NetworkManager") || $0.contains("bus") }.map(String.init)
        }
        if networkManager == .standIn {
            guard watcherLines().contains(where: { $0.contains("NetworkManager is on the bus") }) else {
                throw SyncRigError("syncd's NetworkManager watcher did not find the stand-in on \(bus!.address); its log: \(watcherLines())")
            }
        }
        let watcherLog = watcherLines()

        let monitor = try ChildProcess(["ip", "monitor", "link", "address", "route"], logPath: "\(directory)/ip-monitor.log", environment: childEnvironment())
        defer {
            // SIGKILL: children of the benchmark runner inherit its blocked SIGTERM.
            kill(monitor.pid, SIGKILL)
            let deadline = ContinuousClock.now + .seconds(5)
            while monitor.isRunning && ContinuousClock.now < deadline { usleep(10_000) }
        }
        try await Task.sleep(for: .milliseconds(500))

        // Sampled every second, thread by thread: a thread born in a second counts from zero, and
        // a thread that exits loses at most its last second (worker threads come and go).
        let floor = try LineProcess(executable: try HelperPaths.executable("reconnect-helper"), arguments: ["idle-floor"])
        defer { floor.finish() }
        try await Task.sleep(for: .milliseconds(500))
        let floorFirst = ThreadSwitches(pid: floor.pid)
        let busFirst = bus.map { ThreadSwitches(pid: $0.pid) }
        let standInFirst = standIn.map { ThreadSwitches(pid: $0.pid) }
        let monitorFirst = ThreadSwitches(pid: monitor.pid)
        var previous = ThreadSwitches(pid: pid)
        var perThread: [Int32: (name: String, switches: Int)] = [:]
        var perSecond: [Int] = []
        let start = ContinuousClock.now
        for second in 1...seconds {
            try await Task.sleep(until: start + .seconds(second), clock: .continuous)
            let now = ThreadSwitches(pid: pid)
            var total = 0
            for (tid, entry) in now.byThread {
                let delta = entry.switches - (previous.byThread[tid]?.switches ?? 0)
                total += delta
                perThread[tid, default: (entry.name, 0)].switches += delta
            }
            perSecond.append(total)
            previous = now
        }
        let monitorLast = ThreadSwitches(pid: monitor.pid)
        let floorLast = ThreadSwitches(pid: floor.pid)
        let busSwitches = bus.map { ThreadSwitches(pid: $0.pid).total - busFirst!.total }
        let standInSwitches = standIn.map { ThreadSwitches(pid: $0.pid).total - standInFirst!.total }
        let elapsed = (ContinuousClock.now - start).seconds
        let threads = perThread.map { (tid: $0.key, name: $0.value.name, switches: $0.value.switches) }.sorted { $0.switches > $1.switches }
        let revisionAfter = (try? SQLiteFeedStore(path: "\(directory)/syncd.sqlite").loadSynchronously(feed: "idle").revision) ?? -1
        // Memory as the window left it, before the calls below fault code back in.
        let pss = procPSSKiB(pid: pid), rss = procStatusKiB(pid: pid, "VmRSS")
        let anon = procStatusKiB(pid: pid, "RssAnon"), file = procStatusKiB(pid: pid, "RssFile")
        let faultsBefore = procFaults(pid: pid)
        var statusCalls: [Double] = []
        var wakeFaults = (minor: 0, major: 0)
        var firstReply = ""
        for call in 0..<4 {
            let started = ContinuousClock.now
            let reply = try statusRoundTrip(socket: "\(directory)/io.syncd")
            statusCalls.append((ContinuousClock.now - started).seconds * 1000)
            if call == 0 {
                let after = procFaults(pid: pid)
                wakeFaults = (after.minor - faultsBefore.minor, after.major - faultsBefore.major)
                firstReply = reply
            }
        }
        let pssAfterCalls = procPSSKiB(pid: pid)
        // With the stand-in: every link becomes unmetered (2); the status must follow.
        var followedChange: Bool?
        var followedChangeMs: Double?
        if let standIn {
            let started = ContinuousClock.now
            for link in links { try await standIn.send("set \(link) 2") }
            followedChange = false
            let deadline = started + .seconds(10)
            while ContinuousClock.now < deadline {
                let costs = Self.costs(in: try statusRoundTrip(socket: "\(directory)/io.syncd"))
                if !costs.isEmpty, costs.allSatisfy({ $0.contains("unmetered") && $0.contains("networkmanager") }) {
                    followedChange = true
                    followedChangeMs = (ContinuousClock.now - started).seconds * 1000
                    break
                }
                try await Task.sleep(for: .milliseconds(20))
            }
        }
        let watcherThread = threads.filter { $0.name.hasPrefix("syncd-nm-bus") }
        var result = Result(
            seconds: elapsed, switches: perSecond.reduce(0, +), perSecond: perSecond, threads: threads,
            rssKiB: rss, pssKiB: pss, hwmKiB: procStatusKiB(pid: pid, "VmHWM"),
            baselineSwitches: monitorLast.total - monitorFirst.total,
            baselineRSSKiB: procStatusKiB(pid: monitor.pid, "VmRSS"),
            anonKiB: anon, fileKiB: file,
            floorSwitches: floorLast.total - floorFirst.total, floorRSSKiB: procStatusKiB(pid: floor.pid, "VmRSS"),
            floorPSSKiB: procPSSKiB(pid: floor.pid),
            commits: revisionAfter - revisionBefore,
            statusCallsMs: statusCalls, wakeFaults: wakeFaults, pssAfterCallsKiB: pssAfterCalls)
        result.networkManager = networkManager
        result.systemBus = systemBus
        result.watcherLog = watcherLog
        result.watcherThreadSwitches = watcherThread.isEmpty ? nil : watcherThread.reduce(0) { $0 + $1.switches }
        result.busSwitches = busSwitches
        result.standInSwitches = standInSwitches
        result.statusCosts = Self.costs(in: firstReply)
        result.followedChange = followedChange
        result.followedChangeMs = followedChangeMs
        return result
    }

    /// The `"cost":{…}` objects of a `GetStatus` reply (one per online verdict: the feed's and the
    /// internet's), as they are written.
    static func costs(in reply: String) -> [String] {
        var found: [String] = []
        var rest = reply[...]
        while let key = rest.range(of: #""cost":{"#) {
            guard let end = rest[key.upperBound...].firstIndex(of: "}") else { break }
            found.append(String(rest[key.lowerBound...end]))
            rest = rest[rest.index(after: end)...]
        }
        return found
    }

    public static func summary(_ result: Result, refreshSeconds: Int, metrics: Bool = false) -> String {
        let sortedSeconds = result.perSecond.sorted()
        let median = sortedSeconds.isEmpty ? 0 : sortedSeconds[sortedSeconds.count / 2]
        let quiet = result.perSecond.filter { $0 <= median }.count
        let busiest = result.threads.prefix(8).map { "\($0.name)(\($0.tid))=\($0.switches)" }.joined(separator: " ")
        return """
        idle-cost summary: syncd, 1 feed on loopback\(metrics ? ", metrics endpoint and textfile on (not scraped; window from 18 s after the sync, past the textfile's last write)" : "")\(networkManagerDescription(result)), refresh every \(refreshSeconds) s, watched \(String(format: "%.1f", result.seconds)) s after sync:
          context switches (all threads): \(result.switches) = \(String(format: "%.2f", result.rate))/s (target ≤ 0.1/s: \(result.rate <= 0.1 ? "met" : "missed"))
          per second: median \(median), max \(sortedSeconds.last ?? 0), seconds at or below median \(quiet)/\(result.perSecond.count)
          per second series: \(result.perSecond.map(String.init).joined(separator: " "))
          pages committed from the 3 s settle before the window to its end (refreshes; the feed does not change): \(result.commits)
          busiest threads: \(busiest)
          PSS \(String(format: "%.1f", Double(result.pssKiB) / 1024)) MiB (target ≤ 20 MiB: \(result.pssKiB <= 20 * 1024 ? "met" : "missed")), RSS \(String(format: "%.1f", Double(result.rssKiB) / 1024)) MiB, peak \(String(format: "%.1f", Double(result.hwmKiB) / 1024)) MiB; anonymous \(String(format: "%.1f", Double(result.anonKiB) / 1024)) MiB, file-backed (binary and shared libraries) \(String(format: "%.1f", Double(result.fileKiB) / 1024)) MiB
          waking it: GetStatus round trips after the window \(result.statusCallsMs.map { String(format: "%.2f", $0) }.joined(separator: " / ")) ms; page faults during the first: \(result.wakeFaults.minor) minor, \(result.wakeFaults.major) major; PSS after these calls \(String(format: "%.1f", Double(result.pssAfterCallsKiB) / 1024)) MiB
          runtime floor, same window: a Swift process that only awaits (reconnect-helper idle-floor): \(result.floorSwitches) switches = \(String(format: "%.2f", result.floorRate))/s, RSS \(String(format: "%.1f", Double(result.floorRSSKiB) / 1024)) MiB, PSS \(String(format: "%.1f", Double(result.floorPSSKiB) / 1024)) MiB
          baseline, same window: ip monitor link address route: \(result.baselineSwitches) switches = \(String(format: "%.2f", result.baselineRate))/s, RSS \(String(format: "%.1f", Double(result.baselineRSSKiB) / 1024)) MiB
        \(networkManagerLines(result))
        """
    }

    private static func networkManagerDescription(_ result: Result) -> String {
        switch result.networkManager {
        case .off: ", NetworkManager watcher off (networkmanager = false)"
        case .system: ", NetworkManager watcher on (the default), this machine's system bus (\(result.systemBus))"
        case .standIn: ", NetworkManager watcher on, connected to a private dbus-daemon with the stand-in NetworkManager (every link Metered=1)"
        }
    }

    private static func networkManagerLines(_ result: Result) -> String {
        var lines: [String] = []
        if result.networkManager != .off {
            lines.append("  watcher's bus thread (syncd-nm-bus) in the window: \(result.watcherThreadSwitches.map { "\($0) switches" } ?? "not seen")")
            lines.append("  syncd's log about the bus and NetworkManager before the window: \(result.watcherLog.isEmpty ? "nothing" : result.watcherLog.joined(separator: " | "))")
        }
        if let busSwitches = result.busSwitches, let standInSwitches = result.standInSwitches {
            lines.append("  same window: the private dbus-daemon \(busSwitches) switches, the stand-in NetworkManager (python3) \(standInSwitches) switches")
        }
        lines.append("  costs in GetStatus after the window: \(result.statusCosts.isEmpty ? "none" : result.statusCosts.joined(separator: " "))")
        if let followed = result.followedChange {
            lines.append("  stand-in set every link to Metered=2 after the window: \(followed ? "status showed unmetered from NetworkManager after \(String(format: "%.1f", result.followedChangeMs ?? 0)) ms" : "NOT followed within 10 s")")
        }
        return lines.joined(separator: "\n")
    }
}
