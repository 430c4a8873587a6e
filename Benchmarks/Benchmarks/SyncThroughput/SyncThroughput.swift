// Sync throughput: 100,000 items (1,000 pages of 100) from the reference server into SQLite through
// syncd's real stack (HTTPFeedSource + SyncCoordinator + SQLiteFeedStore), next to a straightforward
// Python baseline (requests + sqlite3, Baselines/sync_baseline.py) syncing the same feed from the
// same server in the same run. Each iteration runs both, in alternating order; the closing summary
// gives the ratio the target (≥ 3× the baseline's items/s) is stated in.
//
// Knobs: SYNC_THROUGHPUT_ITERATIONS (default 3), SYNC_THROUGHPUT_ITEMS (default 100000).
// Needs python3 with `requests` (checked, and installed with pip when missing).

import Benchmark
import BenchmarkHarness
import Foundation
import SyncBenchmarkSupport

let syncdMetric = BenchmarkMetric.reported("syncd (items/s)", .prefersLarger)
let pythonMetric = BenchmarkMetric.reported("python baseline (items/s)", .prefersLarger)
let ratioMetric = BenchmarkMetric.reported("ratio syncd/python (×100)", .prefersLarger)

let benchmarks: @Sendable () -> Void = {
    let iterations = knob("SYNC_THROUGHPUT_ITERATIONS", default: 3)
    let items = knob("SYNC_THROUGHPUT_ITEMS", default: 100_000)
    Benchmark(
        "Sync \(items) items: syncd vs python requests+sqlite3",
        configuration: .counting(
            [syncdMetric, pythonMetric, ratioMetric], timeUnits: .milliseconds, maxDuration: .seconds(1800), maxIterations: iterations),
        rig: "sync-throughput",
        setUp: { try await ThroughputRig(items: items, pageSize: 100) },
        tearDown: { rig in
            print(await rig.summary())
            await rig.shutdown()
        }
    ) { benchmark, rig in
        benchmark.startMeasurement()
        let pair = try await rig.measurePair(index: benchmark.currentIteration)
        benchmark.stopMeasurement()
        benchmark.measurement(syncdMetric, Int(pair.syncd.itemsPerSecond))
        benchmark.measurement(pythonMetric, Int(pair.python.itemsPerSecond))
        benchmark.measurement(ratioMetric, Int(100 * pair.syncd.itemsPerSecond / pair.python.itemsPerSecond))
    }
}
