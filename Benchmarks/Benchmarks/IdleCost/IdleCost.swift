// Idle cost of the real syncd binary (release): one demo feed on loopback with a 60 s refresh
// interval, synced, then watched from outside through /proc for IDLE_SECONDS (default 60):
// context switches of all its threads per second, and RSS. Baseline in the same window:
// `ip monitor link address route`, which only sleeps on netlink, i.e. what kernel events alone cost.
// Knobs: IDLE_SECONDS (default 60), IDLE_REFRESH_SECONDS (default 60).

import Benchmark
import Foundation
import SyncBenchmarkSupport

let switchesMetric = BenchmarkMetric.custom("syncd context switches/s (×100)", polarity: .prefersSmaller, useScalingFactor: false)
let rssMetric = BenchmarkMetric.custom("syncd RSS (KiB)", polarity: .prefersSmaller, useScalingFactor: false)
let baselineMetric = BenchmarkMetric.custom("ip monitor context switches/s (×100)", polarity: .prefersSmaller, useScalingFactor: false)

let benchmarks: @Sendable () -> Void = {
    let environment = ProcessInfo.processInfo.environment
    let seconds = Int(environment["IDLE_SECONDS"] ?? "") ?? 60
    let refresh = Int(environment["IDLE_REFRESH_SECONDS"] ?? "") ?? 60
    let summary = SummaryLines()
    Benchmark(
        "syncd idle: wakeups and RSS",
        configuration: .init(
            metrics: [.wallClock, switchesMetric, rssMetric, baselineMetric],
            timeUnits: .seconds,
            units: [switchesMetric: .count, rssMetric: .count, baselineMetric: .count],
            warmupIterations: 0,
            maxDuration: .seconds(seconds * 3 + 300),
            maxIterations: 1,
            teardown: { summary.flush() }
        )
    ) { benchmark in
        do {
            benchmark.startMeasurement()
            let result = try await IdleRig().run(seconds: seconds, refreshSeconds: refresh)
            benchmark.stopMeasurement()
            benchmark.measurement(switchesMetric, Int(result.rate * 100))
            benchmark.measurement(rssMetric, result.rssKiB)
            benchmark.measurement(baselineMetric, Int(result.baselineRate * 100))
            summary.append(IdleRig.summary(result, refreshSeconds: refresh))
        } catch {
            benchmark.error("idle-cost: \(error)")
        }
    }
}
