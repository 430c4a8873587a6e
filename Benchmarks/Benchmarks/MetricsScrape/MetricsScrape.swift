// One scrape of syncd's /metrics (HTTP on a Unix socket, a new connection each, read to its end)
// with SCRAPE_FEEDS feeds (default 10), against the same daemon's GetStatus on its control socket
// (also a new connection each) as the baseline, alternating, in the same run. The release syncd
// binary, synced and otherwise idle. The summary gives p50/p99 of both, their ratio, and the
// exposition's size and series count.
//
// Knobs: SCRAPE_FEEDS (default 10), SCRAPE_ITERATIONS (default 1000).

import Benchmark
import BenchmarkHarness
import Foundation
import Synchronization
import SyncBenchmarkSupport

let scrapeMetric = BenchmarkMetric.reported("scrape /metrics (µs)")
let statusMetric = BenchmarkMetric.reported("GetStatus (µs)")

let benchmarks: @Sendable () -> Void = {
    let feeds = knob("SCRAPE_FEEDS", default: 10)
    let iterations = knob("SCRAPE_ITERATIONS", default: 1000)
    let warmup = 20
    let samples = Mutex<(scrape: [Double], status: [Double], bytes: Int, series: Int)>(([], [], 0, 0))
    Benchmark(
        "Scrape /metrics with \(feeds) feeds vs GetStatus",
        configuration: .counting(
            [scrapeMetric, statusMetric], timeUnits: .microseconds, warmupIterations: warmup, maxDuration: .seconds(600),
            maxIterations: iterations),
        rig: "metrics-scrape",
        setUp: { try await ScrapeRig(feeds: feeds) },
        tearDown: { rig in
            rig.shutdown()
            // The runner calls the closure for its warm-up iterations too: leave those out.
            let all = samples.withLock { $0 }
            print(summary(feeds: feeds, scrape: Array(all.scrape.dropFirst(warmup)), status: Array(all.status.dropFirst(warmup)), bytes: all.bytes, series: all.series))
        }
    ) { benchmark, rig in
        // Alternate which goes first, so neither always follows the other's wakeup.
        var scrapeMicros = 0.0, statusMicros = 0.0, body = ""
        for step in benchmark.currentIteration % 2 == 0 ? [0, 1] : [1, 0] {
            let start = ContinuousClock.now
            if step == 0 {
                body = try rig.scrape()
                scrapeMicros = (ContinuousClock.now - start).microseconds
            } else {
                try rig.status()
                statusMicros = (ContinuousClock.now - start).microseconds
            }
        }
        benchmark.measurement(scrapeMetric, Int(scrapeMicros))
        benchmark.measurement(statusMetric, Int(statusMicros))
        let series = body.split(separator: "\n").filter { !$0.hasPrefix("#") }.count
        samples.withLock {
            $0.scrape.append(scrapeMicros)
            $0.status.append(statusMicros)
            $0.bytes = body.utf8.count
            $0.series = series
        }
    }
}

func summary(feeds: Int, scrape: [Double], status: [Double], bytes: Int, series: Int) -> String {
    let s50 = percentile(scrape, 0.5), s99 = percentile(scrape, 0.99)
    let g50 = percentile(status, 0.5), g99 = percentile(status, 0.99)
    return String(
        format: """
        metrics-scrape summary, %d feeds, %d scrapes (warm-up excluded):
          scrape /metrics: p50 %.0f µs, p99 %.0f µs; exposition %d bytes, %d series
          GetStatus (baseline, same daemon, same run): p50 %.0f µs, p99 %.0f µs
          scrape / GetStatus: p50 %.2f×, p99 %.2f×
        """,
        feeds, scrape.count, s50, s99, bytes, series, g50, g99, s50 / max(g50, 1), s99 / max(g99, 1))
}

extension Duration {
    var microseconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) * 1_000_000 + Double(attoseconds) / 1_000_000_000_000
    }
}
