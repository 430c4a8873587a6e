// The control socket under a heavy and a hostile load, against the same daemon unloaded in the
// same run (issue 39). The release syncd binary (SYNCD_BENCH_SYNCD, or the one scripts/bench
// builds) with one synced feed of FAIRNESS_ITEMS items (default 20,000):
//
// 1. root's GetStatus (a new connection each) alone, FAIRNESS_CALLS times (default 300);
// 2. the same while FAIRNESS_CLIENTS clients (default 16) page through the feed with ListItems
//    (limit 500, one connection each, from the top again at the end), and those clients' items/s;
// 3. syncd's RSS while 16 connections of `nobody` each send a Watch, then pipeline 127 calls of
//    ~64 KiB and never read a reply
//    (the amplification attack of issue 39), against its RSS just before.
//
// The summary prints p50/p99 of both GetStatus runs and their ratio, items/s, and the RSS growth.
// A second benchmark, "commit → WatchItems client", is described at `changeLatency`.

import Benchmark
import BenchmarkHarness
import Foundation
import NetlinkProbe
import Synchronization
import SyncBenchmarkSupport

let aloneMetric = BenchmarkMetric.reported("GetStatus alone p99 (µs)")
let loadedMetric = BenchmarkMetric.reported("GetStatus under ListItems p99 (µs)")
let aloneMedianMetric = BenchmarkMetric.reported("GetStatus alone p50 (µs)")
let loadedMedianMetric = BenchmarkMetric.reported("GetStatus under ListItems p50 (µs)")
let itemsMetric = BenchmarkMetric.reported("ListItems items/s", .prefersLarger)
let growthMetric = BenchmarkMetric.reported("RSS growth under attack (KiB)")
let anonymousGrowthMetric = BenchmarkMetric.reported("anonymous RSS growth under attack (KiB)")

let benchmarks: @Sendable () -> Void = {
    fairness()
    changeLatency()
    revalidationCost()
}

let fairness: @Sendable () -> Void = {
    let items = knob("FAIRNESS_ITEMS", default: 20_000)
    let calls = knob("FAIRNESS_CALLS", default: 300)
    let clients = knob("FAIRNESS_CLIENTS", default: 16)
    Benchmark(
        "GetStatus under \(clients) ListItems clients, \(items) items",
        configuration: .counting(
            [aloneMedianMetric, aloneMetric, loadedMedianMetric, loadedMetric, itemsMetric, growthMetric, anonymousGrowthMetric], wallClock: false,
            timeUnits: .microseconds, maxDuration: .seconds(900), maxIterations: 1),
        rig: "control-fairness",
        setUp: { try await ScrapeRig(feeds: 1, items: items) },
        tearDown: { $0.shutdown() }
    ) { benchmark, rig in
        for _ in 0..<20 { try rig.status() }
        let alone = try statusLatencies(rig, calls: calls)

        let stop = Atomic(false)
        let pages = Atomic(0)
        let served = Atomic(0)
        let failures = Mutex<[String]>([])
        let threads = (0..<clients).map { _ in
            Thread {
                do {
                    let fd = try connectUnix(rig.controlSocket)
                    defer { close(fd) }
                    var after: String?
                    while !stop.load(ordering: .relaxed) {
                        let (count, next) = try listItems(fd: fd, feed: "feed1", after: after)
                        served.add(count, ordering: .relaxed)
                        pages.add(1, ordering: .relaxed)
                        after = next
                    }
                } catch {
                    failures.withLock { $0.append("\(error)") }
                }
            }
        }
        let loadStart = ContinuousClock.now
        for thread in threads { thread.start() }
        Thread.sleep(forTimeInterval: 1)
        let servedBefore = served.load(ordering: .relaxed)
        let measureStart = ContinuousClock.now
        let loaded = try statusLatencies(rig, calls: calls)
        let measured = (ContinuousClock.now - measureStart).seconds
        let itemsPerSecond = Double(served.load(ordering: .relaxed) - servedBefore) / measured
        stop.store(true, ordering: .relaxed)
        Thread.sleep(forTimeInterval: 0.5)
        _ = loadStart

        let growth = try attackGrowth(rig)

        benchmark.measurement(aloneMedianMetric, Int(percentile(alone, 0.5)))
        benchmark.measurement(loadedMedianMetric, Int(percentile(loaded, 0.5)))
        benchmark.measurement(aloneMetric, Int(percentile(alone, 0.99)))
        benchmark.measurement(loadedMetric, Int(percentile(loaded, 0.99)))
        benchmark.measurement(itemsMetric, Int(itemsPerSecond))
        benchmark.measurement(growthMetric, growth.grown)
        benchmark.measurement(anonymousGrowthMetric, growth.anonymousGrown)
        let failed = failures.withLock { $0 }
        print(String(
            format: """
            control-fairness summary, %d items, %d ListItems clients (limit 500), %d GetStatus each run:
              GetStatus alone:            p50 %.0f µs, p99 %.0f µs
              GetStatus under ListItems:  p50 %.0f µs, p99 %.0f µs (p99 %.2f× alone)
              ListItems: %.0f items/s over %.1f s (%d pages in all)%@
              RSS under the attack (%d connections × %d pipelined ~64 KiB calls, unread): %d KiB before, peak %d KiB (+%d KiB; anonymous +%d KiB)
            """,
            items, clients, calls,
            percentile(alone, 0.5), percentile(alone, 0.99),
            percentile(loaded, 0.5), percentile(loaded, 0.99), percentile(loaded, 0.99) / max(percentile(alone, 0.99), 1),
            itemsPerSecond, measured, pages.load(ordering: .relaxed),
            failed.isEmpty ? "" : "; client errors: \(failed.prefix(3))" as NSString,
            growth.connections, growth.calls, growth.before, growth.peak, growth.grown, growth.anonymousGrown))
    }
}

let changeMedianMetric = BenchmarkMetric.reported("commit → WatchItems p50 (µs)")
let changeTailMetric = BenchmarkMetric.reported("commit → WatchItems p99 (µs)")

/// Commit → `WatchItems` client (issue 38): syncd refreshes every 100 ms a feed that grows by
/// CHANGE_RATE items a second (default 50); a client follows it with `WatchItems` for
/// CHANGE_SECONDS (default 10). Each inserted item's latency is the client's receipt time minus
/// the item's `stored_at` (the commit's time, taken as the commit starts, so the write is
/// counted), read afterwards with the `sqlite3` shell. Items committed before the `WatchItems` call
/// was sent are left out: they reach the client in its replay, after its own start (reading the
/// head, connecting), which is not the live path measured. The same run's GetStatus round trip
/// is the baseline.
let changeLatency: @Sendable () -> Void = {
    let rate = knob("CHANGE_RATE", default: 50)
    let seconds = knob("CHANGE_SECONDS", default: 10.0)
    let summary = SummaryLines()
    Benchmark(
        "commit → WatchItems client, \(rate) items/s",
        configuration: .counting(
            [changeMedianMetric, changeTailMetric, aloneMedianMetric, aloneMetric], wallClock: false, timeUnits: .microseconds,
            maxDuration: .seconds(600), maxIterations: 1),
        rig: "change-latency",
        setUp: { try await ScrapeRig(feeds: 1, items: 200, perSecond: rate, refresh: "100ms") },
        tearDown: { rig in
            summary.flush()
            rig.shutdown()
        }
    ) { benchmark, rig in
        let state = try sqlite(rig.storePath, "SELECT value FROM store_info WHERE key IN ('epoch', 'head') ORDER BY key")
        guard state.count == 2 else { throw SyncRigError("no change log in \(rig.storePath): \(state)") }
        let since = "\(state[0])\(":")\(state[1])"
        let fd = try connectUnix(rig.controlSocket)
        defer { close(fd) }
        let call = Array(#"{"method":"io.syncd.WatchItems","more":true,"parameters":{"feed":"feed1","since":"\#(since)"}}"#.utf8) + [0]
        // Changes committed before the call was sent are replayed, not delivered live: their
        // delay is the client's start (reading the head with sqlite3, connecting), not the path
        // measured here, so they are left out.
        let asked = Date().timeIntervalSince1970
        try sendWhole(call, on: fd)
        var received: [(id: String, at: Double)] = []
        var pending: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        let end = Date().addingTimeInterval(seconds)
        var timeout = timeval(tv_sec: 0, tv_usec: 200_000)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        while Date() < end {
            let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            let now = Date().timeIntervalSince1970
            if count < 0 && (errno == EAGAIN || errno == EINTR) { continue }
            guard count > 0 else { throw SyncRigError("WatchItems ended (errno \(errno))") }
            pending += buffer[0..<count]
            while let nul = pending.firstIndex(of: 0) {
                let message = String(decoding: pending[..<nul], as: UTF8.self)
                pending.removeSubrange(...nul)
                if message.contains(#""kind":"inserted""#), let range = message.range(of: #""id":""#) {
                    received.append((String(message[range.upperBound...].prefix { $0 != "\"" }), now))
                }
            }
        }
        let alone = try statusLatencies(rig, calls: 200)
        let stored = try sqlite(rig.storePath, "SELECT id || ' ' || stored_at FROM item WHERE feed = 'feed1' AND seq > \(state[1])")
        var storedAt: [String: Double] = [:]
        for line in stored {
            let parts = line.split(separator: " ")
            if parts.count == 2, let time = Double(parts[1]) { storedAt[String(parts[0])] = time }
        }
        let replayed = storedAt.values.count { $0 < asked }
        storedAt = storedAt.filter { $0.value >= asked }
        summary.append("change-latency: \(replayed) changes committed before the call left out")
        let latencies = received.compactMap { change in storedAt[change.id].map { (change.at - $0) * 1_000_000 } }
        // The slowest, with when their commit began (relative to the first), to tell one late
        // commit from late deliveries.
        let first = storedAt.values.min() ?? 0
        let slowest = received.compactMap { change in storedAt[change.id].map { (change.id, (change.at - $0) * 1_000, ($0 - first) * 1_000) } }
            .sorted { $0.1 > $1.1 }.prefix(8)
        summary.append("change-latency: slowest (id, ms, commit began at ms): " + slowest.map { String(format: "%@ %.1f @%.0f", $0.0, $0.1, $0.2) }.joined(separator: "; "))
        guard !latencies.isEmpty else { throw SyncRigError("no change received in \(seconds) s") }
        benchmark.measurement(changeMedianMetric, Int(percentile(latencies, 0.5)))
        benchmark.measurement(changeTailMetric, Int(percentile(latencies, 0.99)))
        benchmark.measurement(aloneMedianMetric, Int(percentile(alone, 0.5)))
        benchmark.measurement(aloneMetric, Int(percentile(alone, 0.99)))
        summary.append("change-latency: \(latencies.count) inserts received of \(received.count)")
    }
}

/// Rows of `query` on the store at `path`, read with the `sqlite3` shell (read-only, beside syncd);
/// what it writes to standard error is passed on to ours.
///
/// Synchronous, so the benchmark that calls it stays a synchronous one (the runner runs an async
/// benchmark in a task of the cooperative pool instead): the end of its output is the end of the
/// program, whose exit is polled, not awaited with `waitForExit`.
func sqlite(_ path: String, _ query: String) throws -> [String] {
    let log = path + "-sqlite3-\(UInt32.random(in: 0...UInt32.max)).log"
    defer { try? FileManager.default.removeItem(atPath: log) }
    let process = try ChildProcess(["/usr/bin/sqlite3", "-readonly", path, query], logPath: log, pipes: .standardOutput)
    var data: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 65_536)
    while true {
        let count = read(process.standardOutput, &buffer, buffer.count)
        if count < 0 && errno == EINTR { continue }
        if count <= 0 { break }
        data.append(contentsOf: buffer[0..<count])
    }
    while process.isRunning { usleep(1_000) }
    let errors = process.output
    if !errors.isEmpty { FileHandle.standardError.write(Data(errors.utf8)) }
    return String(decoding: data, as: UTF8.self).split(separator: "\n").map(String.init)
}

/// `calls` GetStatus round trips, each on a new connection, in µs.
func statusLatencies(_ rig: ScrapeRig, calls: Int) throws -> [Double] {
    try (0..<calls).map { _ in
        let start = ContinuousClock.now
        try rig.status()
        return (ContinuousClock.now - start).seconds * 1_000_000
    }
}

/// One ListItems page on `fd`: the items in it and the cursor of the next (`nil` at the end).
func listItems(fd: Int32, feed: String, after: String?) throws -> (Int, String?) {
    let afterJSON = after.map { #","after":"\#($0)""# } ?? ""
    let request = Array(#"{"method":"io.syncd.ListItems","parameters":{"feed":"\#(feed)","limit":500\#(afterJSON)}}"#.utf8) + [0]
    try sendWhole(request, on: fd)
    var reply: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 262_144)
    while reply.last != 0 {
        let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        guard count > 0 else { throw SyncRigError("ListItems: no reply (errno \(errno))") }
        reply.append(contentsOf: buffer[0..<count])
    }
    // Scanned as bytes: the clients must cost little CPU next to the syncd they load.
    if reply.starts(with: Array(#"{"error""#.utf8)) || occurrences(of: Array(#""error":"#.utf8), in: reply.prefix(64)) > 0 {
        throw SyncRigError("ListItems: \(String(decoding: reply.prefix(200), as: UTF8.self))")
    }
    let count = occurrences(of: Array(#""summary":"#.utf8), in: reply[...])
    var next: String?
    let marker = Array(#""next":""#.utf8)
    if let start = lastIndex(of: marker, in: reply) {
        let value = reply[(start + marker.count)...].prefix { $0 != UInt8(ascii: "\"") }
        next = String(decoding: value, as: UTF8.self)
    }
    return (count, next)
}

/// How often `needle` occurs in `haystack`.
func occurrences(of needle: [UInt8], in haystack: ArraySlice<UInt8>) -> Int {
    var count = 0
    var index = haystack.startIndex
    while index + needle.count <= haystack.endIndex {
        if haystack[index] == needle[0] && haystack[index..<(index + needle.count)].elementsEqual(needle) {
            count += 1
            index += needle.count
        } else {
            index += 1
        }
    }
    return count
}

/// Where `needle` last starts in `haystack`.
func lastIndex(of needle: [UInt8], in haystack: [UInt8]) -> Int? {
    var index = haystack.count - needle.count
    while index >= 0 {
        if haystack[index] == needle[0] && haystack[index..<(index + needle.count)].elementsEqual(needle) { return index }
        index -= 1
    }
    return nil
}

/// scripts/control-attack.py, the attacking client this benchmark and scripts/heap-under-attack
/// share, run with `arguments` (after the socket) as `user` (none: as this process), to its end.
/// Given to Python as `-c`, so `nobody` need not reach the checkout.
func controlAttack(_ rig: ScrapeRig, _ arguments: [String], as user: UInt32? = nil) throws -> String {
    let script = try String(contentsOfFile: HelperPaths.packageDirectory + "/../scripts/control-attack.py", encoding: .utf8)
    let asUser = user.map { ["setpriv", "--reuid=\($0)", "--regid=\($0)", "--clear-groups"] } ?? []
    return try runCommand(asUser + ["/usr/bin/python3", "-c", script, rig.controlSocket] + arguments)
}

/// syncd's RSS before and at its peak while 16 connections of `nobody` pipeline 127 calls of
/// ~64 KiB each (non-blocking writes, never a read) for 5 s, measured from a warm daemon: the
/// attack's calls made first by a client that reads its replies (the script's warm-up).
func attackGrowth(_ rig: ScrapeRig) throws -> (connections: Int, calls: Int, before: Int, peak: Int, grown: Int, anonymousGrown: Int) {
    // ATTACK_CONNECTIONS (default 16, the per-user limit) tells per-connection costs from shared ones;
    // ATTACK_CALLS=0 (default 127) measures what the connections cost with only their Watch.
    let connections = knob("ATTACK_CONNECTIONS", default: 16)
    let calls = knob("ATTACK_CALLS", default: 127)
    _ = try controlAttack(rig, ["warm-up", "\(connections)"])
    let before = procKiB(pid: rig.syncdPID, file: "status", "VmRSS")
    // The heap alone: code the attack's paths fault in is file-backed and counts in VmRSS only.
    let anonymousBefore = procKiB(pid: rig.syncdPID, file: "status", "RssAnon")
    // The issue's attacker is `nobody`: root's connections are not charged to a user's bound.
    // ATTACK_AS_ROOT=1 attacks as root instead.
    let attacker: UInt32? = getuid() == 0 && knob("ATTACK_AS_ROOT", default: 0) == 0 ? 65534 : nil
    let outcome = Mutex<Result<String, any Error>?>(nil)
    Thread.detachNewThread {
        let result = Result { try controlAttack(rig, ["attack", "\(connections)", "\(calls)", "5"], as: attacker) }
        outcome.withLock { $0 = result }
    }
    var peak = before
    var anonymousPeak = anonymousBefore
    // runCommand kills the client past its timeout, so this ends.
    while outcome.withLock({ $0 == nil }) {
        peak = max(peak, procKiB(pid: rig.syncdPID, file: "status", "VmRSS"))
        anonymousPeak = max(anonymousPeak, procKiB(pid: rig.syncdPID, file: "status", "RssAnon"))
        usleep(1_000)
    }
    _ = try outcome.withLock { $0! }.get()
    return (connections, calls, before, peak, peak - before, anonymousPeak - anonymousBefore)
}
