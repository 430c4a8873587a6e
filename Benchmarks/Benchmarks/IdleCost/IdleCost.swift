// Idle cost of the real syncd binary (release): one demo feed on loopback with a refresh armed
// (by default an hour away, so the window holds nothing scheduled), synced, then watched from outside through /proc for IDLE_SECONDS (default 60):
// context switches of all its threads per second, RSS and PSS. Baseline in the same window:
// `ip monitor link address route`, which only sleeps on netlink, i.e. what kernel events alone cost.
// Run twice: as is, and with the metrics endpoint and textfile on (nobody scraping).
// Knobs: IDLE_SECONDS (default 60), IDLE_REFRESH_SECONDS (default 3600).

import Benchmark
import Foundation
import SyncBenchmarkSupport

let switchesMetric = BenchmarkMetric.custom("syncd context switches/s (×100)", polarity: .prefersSmaller, useScalingFactor: false)
let rssMetric = BenchmarkMetric.custom("syncd RSS (KiB)", polarity: .prefersSmaller, useScalingFactor: false)
let pssMetric = BenchmarkMetric.custom("syncd PSS (KiB)", polarity: .prefersSmaller, useScalingFactor: false)
let baselineMetric = BenchmarkMetric.custom("ip monitor context switches/s (×100)", polarity: .prefersSmaller, useScalingFactor: false)

let benchmarks: @Sendable () -> Void = {
    let environment = ProcessInfo.processInfo.environment
    let seconds = Int(environment["IDLE_SECONDS"] ?? "") ?? 60
    let refresh = Int(environment["IDLE_REFRESH_SECONDS"] ?? "") ?? 3600
    let summary = SummaryLines()
    for metrics in [false, true] {
        Benchmark(
            metrics ? "syncd idle, metrics on: wakeups and RSS" : "syncd idle: wakeups and RSS",
            configuration: .init(
                metrics: [.wallClock, switchesMetric, rssMetric, pssMetric, baselineMetric],
                timeUnits: .seconds,
                units: [switchesMetric: .count, rssMetric: .count, pssMetric: .count, baselineMetric: .count],
                warmupIterations: 0,
                maxDuration: .seconds(seconds * 3 + 300),
                maxIterations: 1,
                teardown: { summary.flush() }
            )
        ) { benchmark in
            do {
                benchmark.startMeasurement()
                let result = try await IdleRig().run(seconds: seconds, refreshSeconds: refresh, metrics: metrics)
                benchmark.stopMeasurement()
                benchmark.measurement(switchesMetric, Int(result.rate * 100))
                benchmark.measurement(rssMetric, result.rssKiB)
                benchmark.measurement(pssMetric, result.pssKiB)
                benchmark.measurement(baselineMetric, Int(result.baselineRate * 100))
                summary.append(IdleRig.summary(result, refreshSeconds: refresh, metrics: metrics))
            } catch {
                benchmark.error("idle-cost: \(error)")
            }
        }
    }
}
