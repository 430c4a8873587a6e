// Sync against the wire's floor (issue 14): N items (pages of 100) from the reference server,
// (a) walked by a plain keep-alive client on a raw socket that only follows the `Link` headers
// and reads the bodies (FloorClient: no parse, no store), and (b) synced by the release `syncd`
// binary, timed from exec until its store holds every item with the end reached, and (c) the
// same with its metrics endpoint and textfile on. Same server, same run, rotating order; the
// summary gives syncd's time as a multiple of the floor's, with and without metrics.
//
// Knobs: SYNC_FLOOR_ITEMS (default 100000), SYNC_FLOOR_ITERATIONS (default 3), SYNC_FLOOR_FORMAT
// (json, the bare array; envelope, a JSON object with a body cursor that syncd follows; atom, an
// Atom document whose links syncd follows). The floor client follows the `Link` header, which
// the server sends alike in every format: both walk the same pages.

import Benchmark
import BenchmarkHarness
import Foundation
import Synchronization
import SyncBenchmarkSupport

let floorMetric = BenchmarkMetric.reported("floor client (ms)")
let daemonMetric = BenchmarkMetric.reported("syncd exec → all stored (ms)")
let multipleMetric = BenchmarkMetric.reported("syncd / floor (×100)")
let metricsMultipleMetric = BenchmarkMetric.reported("syncd with metrics / floor (×100)")

let benchmarks: @Sendable () -> Void = {
    let environment = ProcessInfo.processInfo.environment
    let iterations = knob("SYNC_FLOOR_ITERATIONS", default: 3)
    let items = knob("SYNC_FLOOR_ITEMS", default: 100_000)
    let format = environment["SYNC_FLOOR_FORMAT"] ?? "json"
    let results = ResultLog()
    Benchmark(
        "Sync \(items) items\(format == "json" ? "" : " (\(format))"): syncd vs the floor client",
        configuration: .counting(
            [floorMetric, daemonMetric, multipleMetric, metricsMultipleMetric], timeUnits: .milliseconds, maxDuration: .seconds(3600),
            maxIterations: iterations),
        rig: "sync-floor",
        setUp: { try await ThroughputRig(items: items, pageSize: 100, python: false, format: format) },
        tearDown: { rig in
            print(results.summary(items: items))
            await rig.shutdown()
        }
    ) { benchmark, rig in
        benchmark.startMeasurement()
        let pair = try await rig.measureFloorPair(index: benchmark.currentIteration)
        benchmark.stopMeasurement()
        results.append(pair)
        benchmark.measurement(floorMetric, Int(pair.floor.seconds * 1000))
        benchmark.measurement(daemonMetric, Int(pair.daemon.seconds * 1000))
        benchmark.measurement(multipleMetric, Int(100 * pair.daemon.seconds / pair.floor.seconds))
        benchmark.measurement(metricsMultipleMetric, Int(100 * pair.daemonWithMetrics.seconds / pair.floor.seconds))
    }
}

/// Every pair of the run, for the closing summary.
final class ResultLog: Sendable {
    private let pairs = Mutex<[ThroughputRig.FloorPair]>([])

    func append(_ pair: ThroughputRig.FloorPair) {
        pairs.withLock { $0.append(pair) }
    }

    func summary(items: Int) -> String {
        let all = pairs.withLock { $0 }
        let cores = ProcessInfo.processInfo.activeProcessorCount
        var lines = ["sync-floor summary, \(items) items:"]
        for (index, pair) in all.enumerated() {
            let multiple = pair.daemon.seconds / pair.floor.seconds
            lines.append(String(
                format: "  run %d: floor %.3f s (%d pages, %.1f MiB of bodies), syncd %.3f s: %.2f× the floor (target ≤ 2×: %@)",
                index + 1, pair.floor.seconds, pair.floor.pages, Double(pair.floor.bodyBytes) / 1_048_576, pair.daemon.seconds, multiple,
                multiple <= 2 ? "met" : "missed"
            ))
            // Where the time can go: when the two processes together need more CPU than the
            // cores give in the wall time, the sync is CPU-bound, not waiting on the wire.
            let busy = (pair.daemon.cpuSeconds + pair.daemonServerCPU) / (Double(cores) * pair.daemon.seconds)
            lines.append(String(
                format: "         CPU: syncd %.3f s + server %.3f s during the sync (%.0f%% of %d cores over its wall time); server %.3f s during the floor walk",
                pair.daemon.cpuSeconds, pair.daemonServerCPU, 100 * busy, cores, pair.floorServerCPU
            ))
            let withMetrics = pair.daemonWithMetrics.seconds / pair.floor.seconds
            lines.append(String(
                format: "         with metrics on (endpoint + textfile): syncd %.3f s, CPU %.3f s: %.2f× the floor, %+.1f%% against without",
                pair.daemonWithMetrics.seconds, pair.daemonWithMetrics.cpuSeconds, withMetrics, 100 * (withMetrics / multiple - 1)
            ))
        }
        let plain = all.map { $0.daemon.seconds / $0.floor.seconds }.sorted()
        let metered = all.map { $0.daemonWithMetrics.seconds / $0.floor.seconds }.sorted()
        if !plain.isEmpty {
            let change = metered[metered.count / 2] / plain[plain.count / 2] - 1
            lines.append(String(
                format: "  median ratio to the floor: %.2f× without metrics, %.2f× with: %+.1f%% (target ≤ +5%%: %@)",
                plain[plain.count / 2], metered[metered.count / 2], 100 * change, change <= 0.05 ? "met" : "missed"))
        }
        return lines.joined(separator: "\n")
    }
}
