// Reconnect → first retried request arriving at the server, and link change → coordinator paused,
// through syncd's real stack in network namespaces (see ReconnectRig): the agent (monitor,
// coordinator with reconnect spread 0, HTTP source, SQLite store) in the client namespace, the demo
// feed server in the peer namespace. Carrier is taken away and given back through the peer link,
// which keeps the client's routes (marked linkdown), as a pulled cable does.
//
// Three benchmarks: settle 0 and syncd's default settle of 2 s with the feed idle at the down and a
// refresh asked for while offline, and settle 0 with a load in flight at the down (RECONNECT_ITERATIONS,
// default 100; RECONNECT_SETTLE_ITERATIONS, default 15). Needs root. RECONNECT_STATIC_NEIGHBOUR=1 pins
// the server's neighbour entry (no ARP after the link returns), to tell the kernel's share apart.

import Benchmark
import BenchmarkHarness
import Foundation
import SyncBenchmarkSupport

let rawDownMetric = BenchmarkMetric.reported("raw carrier-loss notification (µs)")
let pausedMetric = BenchmarkMetric.reported("coordinator paused/offline (µs)")
let rawUpMetric = BenchmarkMetric.reported("raw carrier-up notification (µs)")
let verdictUpMetric = BenchmarkMetric.reported("online verdict (µs)")
let arrivalMetric = BenchmarkMetric.reported("retried request at server (µs)")

func reconnectBenchmark(_ name: String, settle: Duration, inFlight: Bool, iterations: Int, warmup: Int) {
    Benchmark(
        name,
        configuration: .counting(
            [rawDownMetric, pausedMetric, rawUpMetric, verdictUpMetric, arrivalMetric], timeUnits: .microseconds,
            warmupIterations: warmup, maxDuration: .seconds(900), maxIterations: iterations),
        rig: "reconnect",
        setUp: { try await ReconnectRig(settle: settle, inFlight: inFlight) }
    ) { benchmark, _, sample in
        benchmark.measurement(rawDownMetric, Int(sample.rawDown / 1000))
        benchmark.measurement(pausedMetric, Int(sample.paused / 1000))
        benchmark.measurement(rawUpMetric, Int(sample.rawUp / 1000))
        benchmark.measurement(verdictUpMetric, Int(sample.verdictUp / 1000))
        benchmark.measurement(arrivalMetric, Int(sample.arrival / 1000))
    }
}

let benchmarks: @Sendable () -> Void = {
    let iterations = knob("RECONNECT_ITERATIONS", default: 100)
    let settleIterations = knob("RECONNECT_SETTLE_ITERATIONS", default: 15)
    reconnectBenchmark(
        "Reconnect → paused refresh at server (settle 0, spread 0)", settle: .zero, inFlight: false, iterations: iterations, warmup: 3)
    reconnectBenchmark(
        "Reconnect → paused refresh at server (settle 2 s, spread 0)", settle: .seconds(2), inFlight: false, iterations: settleIterations, warmup: 1)
    reconnectBenchmark(
        "Reconnect → load cancelled in flight, retried (settle 0, spread 0)", settle: .zero, inFlight: true, iterations: iterations, warmup: 3)
}

extension ReconnectRig: SampledRig {}
