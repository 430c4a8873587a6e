// What a revalidation costs against a plain refresh (issue 38), measured on two release syncd
// daemons of the same run, each with one synced Mastodon-style demo feed of REVALIDATE_ITEMS
// items (default 10,000) at REVALIDATE_PAGE_SIZE a page (default 40, Mastodon's largest):
//
// - plain: a refresh asks for what is newer than the newest stored item (nothing is);
// - revalidating: `revalidate = 200` with an interval short enough that every refresh reads the
//   newest 200 items again and compares them with the store (nothing changed either).
//
// Each is refreshed REVALIDATE_REFRESHES times (default 50) through the control socket, one at a
// time (the next once the commit of the last is in the store). Per refresh: syncd's CPU (user +
// system from /proc, so in clock ticks summed over the run), the requests the server received,
// and the wall time from the call to the commit. The summary prints both and their ratios.

import Benchmark
import BenchmarkHarness
import Foundation
import SyncBenchmarkSupport
import SyncStore

/// The figures recorded for one daemon of the comparison, per refresh, named after what it does.
struct RefreshCostMetrics: Sendable {
    let cpu: BenchmarkMetric
    let requests: BenchmarkMetric
    let wall: BenchmarkMetric

    init(_ label: String) {
        cpu = .reported("\(label) CPU (µs)")
        requests = .reported("\(label) requests")
        wall = .reported("\(label) wall (µs)")
    }

    /// Records `cost`, the sum of `refreshes` refreshes, per refresh.
    func record(_ cost: RefreshCost, of refreshes: Int, in benchmark: Benchmark) {
        benchmark.measurement(cpu, cost.cpuMicroseconds / refreshes)
        benchmark.measurement(requests, cost.requests / refreshes)
        benchmark.measurement(wall, cost.wallMicroseconds / refreshes)
    }
}

let plainMetrics = RefreshCostMetrics("plain refresh")
let revalidationMetrics = RefreshCostMetrics("revalidation")

/// Both daemons of the comparison.
final class RevalidationRigs: Sendable {
    let plain: ScrapeRig
    let revalidating: ScrapeRig
    init(plain: ScrapeRig, revalidating: ScrapeRig) {
        self.plain = plain
        self.revalidating = revalidating
    }
}

let revalidationCost: @Sendable () -> Void = {
    let items = knob("REVALIDATE_ITEMS", default: 10_000)
    let pageSize = knob("REVALIDATE_PAGE_SIZE", default: 40)
    let refreshes = knob("REVALIDATE_REFRESHES", default: 50)
    let summary = SummaryLines()
    Benchmark(
        "revalidation of 200 items vs a plain refresh, \(items) items at \(pageSize) a page",
        configuration: .counting(
            [
                plainMetrics.cpu, revalidationMetrics.cpu, plainMetrics.requests, revalidationMetrics.requests, plainMetrics.wall,
                revalidationMetrics.wall,
            ],
            wallClock: false, timeUnits: .microseconds, maxDuration: .seconds(600), maxIterations: 1),
        rig: "revalidation",
        setUp: {
            let plain = try await ScrapeRig(feeds: 1, items: items, pageSize: pageSize, name: "revalidation-plain")
            let revalidating = try await ScrapeRig(
                feeds: 1, items: items, pageSize: pageSize, feedKeys: "revalidate = 200\nrevalidate_interval = \"1ms\"",
                name: "revalidation-on")
            return RevalidationRigs(plain: plain, revalidating: revalidating)
        },
        tearDown: { rigs in
            summary.flush()
            rigs.plain.shutdown()
            rigs.revalidating.shutdown()
        }
    ) { benchmark, rigs in
        // Interleaved, so a noisy moment of the machine falls on both.
        var plain = RefreshCost(), revalidating = RefreshCost()
        for _ in 0..<refreshes {
            plain.add(try refreshOnce(rigs.plain))
            revalidating.add(try refreshOnce(rigs.revalidating))
        }
        plainMetrics.record(plain, of: refreshes, in: benchmark)
        revalidationMetrics.record(revalidating, of: refreshes, in: benchmark)
        let cpuRatio = Double(revalidating.cpuMicroseconds) / Double(max(1, plain.cpuMicroseconds))
        let wallRatio = Double(revalidating.wallMicroseconds) / Double(max(1, plain.wallMicroseconds))
        summary.append(String(
            format: "revalidation: per refresh, plain %d µs CPU, %.2f requests, %d µs wall; revalidating 200: %d µs CPU, %.2f requests, %d µs wall (CPU %.1f×, wall %.1f×)",
            plain.cpuMicroseconds / refreshes, Double(plain.requests) / Double(refreshes), plain.wallMicroseconds / refreshes,
            revalidating.cpuMicroseconds / refreshes, Double(revalidating.requests) / Double(refreshes),
            revalidating.wallMicroseconds / refreshes, cpuRatio, wallRatio))
    }
}

/// What refreshes cost, summed.
struct RefreshCost {
    var cpuMicroseconds = 0
    var requests = 0
    var wallMicroseconds = 0

    mutating func add(_ one: RefreshCost) {
        cpuMicroseconds += one.cpuMicroseconds
        requests += one.requests
        wallMicroseconds += one.wallMicroseconds
    }
}

/// One refresh of `rig`'s feed through the control socket, waited for until its commit is in the
/// store (the feed's revision moves).
func refreshOnce(_ rig: ScrapeRig) throws -> RefreshCost {
    let store = try SQLiteFeedStore(path: rig.storePath)
    let revision = try store.loadSynchronously(feed: "feed1").revision
    let requestsBefore = try serverRequests(rig)
    let cpuBefore = procCPUSeconds(pid: rig.syncdPID)
    let start = ContinuousClock.now
    try varlinkCall(socket: rig.controlSocket, #"{"method":"io.syncd.Refresh","parameters":{"feed":"feed1"}}"#)
    let deadline = start + .seconds(30)
    while try store.loadSynchronously(feed: "feed1").revision == revision {
        guard ContinuousClock.now < deadline else { throw SyncRigError("the refresh was not committed within 30 s") }
        usleep(200)
    }
    let wall = ContinuousClock.now - start
    let cpu = procCPUSeconds(pid: rig.syncdPID) - cpuBefore
    return RefreshCost(
        cpuMicroseconds: Int(cpu * 1_000_000), requests: try serverRequests(rig) - requestsBefore,
        wallMicroseconds: Int(wall.seconds * 1_000_000))
}

/// The requests the demo server has received for `feed1`, from its admin endpoint.
func serverRequests(_ rig: ScrapeRig) throws -> Int {
    guard let port = URL(string: rig.serverURL)?.port else { throw SyncRigError("no port in \(rig.serverURL)") }
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard fd >= 0 else { throw SyncRigError("socket: errno \(errno)") }
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = in_port_t(UInt16(port).bigEndian)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    let connected = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard connected == 0 else { throw SyncRigError("connect to the demo server: errno \(errno)") }
    let text = try closingExchange(fd, "GET /admin/feeds/feed1 HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
    guard let body = text.range(of: "\r\n\r\n") else { throw SyncRigError("the demo server's answer: \(text.prefix(200))") }
    struct Summary: Decodable { var requests: Int }
    return try JSONDecoder().decode(Summary.self, from: Data(text[body.upperBound...].utf8)).requests
}
