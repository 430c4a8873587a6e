// Route storm: 100,000 route adds, the default route's removal, then 100,000 deletes, in a fresh
// namespace per iteration. The monitor runs alone in a process (`storm-monitor`) next to
// `ip monitor route`, both consuming the same storm in the same run; both are measured from
// outside through /proc (CPU time from just before the storm until each has caught up, peak RSS).
// Every iteration also checks that the monitor's final verdict equals a fresh kernel dump's.
// STORM_EXPIRES=N makes the storm IPv6 routes with an N-second lifetime (`expires`), which the
// monitor reads from each notification (RTA_CACHEINFO) and keeps until the route goes;
// STORM_EXPIRES=0, the same IPv6 routes without a lifetime.
// Needs root, and `storm-monitor` built next to this executable (scripts/bench does both).

import Benchmark
import BenchmarkHarness
import BenchmarkSupport
import Foundation

/// The figures recorded for one consumer of the storm, named after it.
struct ConsumerMetrics: Sendable {
    let cpu: BenchmarkMetric
    let peakRSS: BenchmarkMetric
    let caughtUp: BenchmarkMetric
    let drops: BenchmarkMetric

    init(_ consumer: String) {
        cpu = .reported("\(consumer) CPU (ms)")
        peakRSS = .reported("\(consumer) peak RSS (KiB)")
        caughtUp = .reported("\(consumer) caught up (ms)")
        drops = .reported("\(consumer) kernel drops (#)")
    }

    func record(_ cost: StormConsumerCost, in benchmark: Benchmark) {
        benchmark.measurement(cpu, cost.cpu.wholeMilliseconds)
        benchmark.measurement(peakRSS, cost.peakRSS >> 10)
        benchmark.measurement(caughtUp, cost.caughtUp.wholeMilliseconds)
        benchmark.measurement(drops, cost.drops)
    }
}

let monitorMetrics = ConsumerMetrics("monitor")
let ipMonitorMetrics = ConsumerMetrics("ip monitor")
let cpuRatioPercent = BenchmarkMetric.reported("CPU monitor/ip monitor (%)")

/// `storm-monitor` sits in the same build directory as this benchmark executable.
func helperPath() -> String {
    if let path = ProcessInfo.processInfo.environment["STORM_MONITOR"] { return path }
    let me = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
    return me.deletingLastPathComponent().appendingPathComponent("storm-monitor").path
}

let benchmarks: @Sendable () -> Void = {
    let environment = ProcessInfo.processInfo.environment
    let routes = knob("STORM_ROUTES", default: 100_000)
    let iterations = knob("STORM_ITERATIONS", default: 3)
    // STORM_EXPIRES=N: IPv6 routes with a lifetime of N seconds instead (see RouteStormRig.run).
    let expires = Int(environment["STORM_EXPIRES"] ?? "")
    // Per-iteration details: the runner silences output while a benchmark runs, not during teardown.
    let log = SummaryLines()
    Benchmark(
        "Route storm \(routes) \(expires.map { $0 > 0 ? "IPv6 routes expiring in \($0) s: " : "IPv6 routes: " } ?? "")adds + deletes: monitor vs ip monitor",
        configuration: .counting(
            [
                monitorMetrics.cpu, ipMonitorMetrics.cpu, cpuRatioPercent, monitorMetrics.peakRSS, ipMonitorMetrics.peakRSS,
                monitorMetrics.caughtUp, ipMonitorMetrics.caughtUp, monitorMetrics.drops, ipMonitorMetrics.drops,
            ],
            timeUnits: .milliseconds, maxDuration: .seconds(900), maxIterations: iterations, teardown: { log.flush() })
    ) { benchmark in
        do {
            let result = try await RouteStormRig.run(routes: routes, expires: expires, helperPath: helperPath())
            monitorMetrics.record(result.monitor, in: benchmark)
            ipMonitorMetrics.record(result.ip, in: benchmark)
            benchmark.measurement(cpuRatioPercent, Int((result.cpuRatio * 100).rounded()))
            log.append("iteration \(benchmark.currentIteration): \(result.description)")
        } catch {
            benchmark.error("route storm: \(error)")
        }
    }
}
