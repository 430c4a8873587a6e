// Fleet: 10,000 agents reconnecting together after an outage, simulated (pure, no network) with the
// real FeedMachine, RetryPolicy.default and SyncConfiguration.default.reconnectSpread. Peak requests
// per 1 ms and 10 ms bucket at the server with the default spread against no spread, and with the
// server failing the first wave (503 for FLEET_FAIL_SECONDS, default 5) under full jitter against
// no jitter. Knobs: FLEET_AGENTS (default 10000).

import Benchmark
import BenchmarkHarness
import Foundation
import SyncBenchmarkSupport
@_spi(StateMachine) import SyncCore

let peak10Metric = BenchmarkMetric.reported("peak requests / 10 ms")
let peak1Metric = BenchmarkMetric.reported("peak requests / 1 ms")
let retryPeakMetric = BenchmarkMetric.reported("peak retries / 10 ms")

func describe(_ result: FleetSimulation.Result) -> String {
    String(
        format: "  %@: requests %d (503: %d), peak/1ms %d, peak/10ms %d (= %.0f req/s), peak/100ms %d; retries only: peak/1ms %d, peak/10ms %d; all synced at %.2f s",
        result.scenario.name as NSString, result.arrivals.count, result.failedRequests, result.peak(bucket: .milliseconds(1)),
        result.peak(bucket: .milliseconds(10)), result.peakRate(bucket: .milliseconds(10)), result.peak(bucket: .milliseconds(100)),
        result.peak(bucket: .milliseconds(1), retriesOnly: true), result.peak(bucket: .milliseconds(10), retriesOnly: true),
        Double(result.allSyncedAt) / 1e9)
}

func histogramLine(_ result: FleetSimulation.Result, until: Duration) -> String {
    "  \(result.scenario.name), requests per 250 ms from the reconnect: "
        + result.histogram(bucket: .milliseconds(250), until: until).map(String.init).joined(separator: " ")
}

let benchmarks: @Sendable () -> Void = {
    let agents = knob("FLEET_AGENTS", default: 10_000)
    let failFor = Duration.seconds(knob("FLEET_FAIL_SECONDS", default: 5))
    let spread = SyncConfiguration.default.reconnectSpread
    var noJitter = RetryPolicy.default
    noJitter.jitter = .none
    let summary = SummaryLines()
    let scenarios: [FleetSimulation.Scenario] = [
        .init(name: "healthy server, default spread (\(spread))", agents: agents, reconnectSpread: spread),
        .init(name: "healthy server, no spread (baseline)", agents: agents, reconnectSpread: .zero),
        .init(name: "503 first \(failFor), default spread, full jitter", agents: agents, reconnectSpread: spread, failFor: failFor),
        .init(name: "503 first \(failFor), default spread, no jitter", agents: agents, reconnectSpread: spread, retry: noJitter, failFor: failFor),
        .init(name: "503 first \(failFor), no spread, full jitter", agents: agents, reconnectSpread: .zero, failFor: failFor),
        .init(name: "503 first \(failFor), no spread, no jitter", agents: agents, reconnectSpread: .zero, retry: noJitter, failFor: failFor),
    ]
    for scenario in scenarios {
        Benchmark(
            "Fleet \(agents): \(scenario.name)",
            configuration: .counting(
                [peak10Metric, peak1Metric, retryPeakMetric], timeUnits: .milliseconds, maxIterations: 1, teardown: { summary.flush() })
        ) { benchmark in
            benchmark.startMeasurement()
            let result = FleetSimulation.run(scenario)
            benchmark.stopMeasurement()
            benchmark.measurement(peak10Metric, result.peak(bucket: .milliseconds(10)))
            benchmark.measurement(peak1Metric, result.peak(bucket: .milliseconds(1)))
            benchmark.measurement(retryPeakMetric, result.peak(bucket: .milliseconds(10), retriesOnly: true))
            summary.append(describe(result))
            if scenario.failFor > .zero { summary.append(histogramLine(result, until: .seconds(12))) }
        }
    }
    // The ratio the target is stated in, from one pair of runs (same seed).
    Benchmark(
        "Fleet \(agents): peak ratio no spread / default spread",
        configuration: .init(
            metrics: [.wallClock], timeUnits: .milliseconds, warmupIterations: 0, maxIterations: 1, teardown: { summary.flush() })
    ) { _ in
        let spreadRun = FleetSimulation.run(scenarios[0])
        let burst = FleetSimulation.run(scenarios[1])
        for bucket in [Duration.milliseconds(1), .milliseconds(10)] {
            let ratio = Double(burst.peak(bucket: bucket)) / Double(max(1, spreadRun.peak(bucket: bucket)))
            summary.append("  peak per \(bucket): no spread \(burst.peak(bucket: bucket)), default spread \(spreadRun.peak(bucket: bucket)): ratio \(String(format: "%.0f", ratio))×")
        }
    }
}
