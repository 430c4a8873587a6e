// Idle cost of the real syncd binary (release): one demo feed on loopback with a refresh armed
// (by default an hour away, so the window holds nothing scheduled), synced, then watched from outside through /proc for IDLE_SECONDS (default 60):
// context switches of all its threads per second, RSS and PSS. Baseline in the same window:
// `ip monitor link address route`, which only sleeps on netlink, i.e. what kernel events alone cost.
// Run four times: as is (the NetworkManager watcher on, the default, on this machine's system bus,
// which may not exist); with `[network] networkmanager = false`; with the watcher on a private
// dbus-daemon where the tests' stand-in NetworkManager says every link is metered (checked in
// syncd's log before the window and in GetStatus after it); and with the metrics endpoint and
// textfile on (nobody scraping). The two NetworkManager variants run one after the other, so their
// figures are from the same stretch of the machine's load. `--filter` picks variants.
// Knobs: IDLE_SECONDS (default 60), IDLE_REFRESH_SECONDS (default 3600), IDLE_FAKE_NETWORKMANAGER
// (default Tests/TestSupport/Oracle/fake_networkmanager.py, run with /usr/bin/python3).

import Benchmark
import BenchmarkHarness
import Foundation
import SyncBenchmarkSupport

let switchesMetric = BenchmarkMetric.reported("syncd context switches/s (×100)")
let rssMetric = BenchmarkMetric.reported("syncd RSS (KiB)")
let pssMetric = BenchmarkMetric.reported("syncd PSS (KiB)")
let baselineMetric = BenchmarkMetric.reported("ip monitor context switches/s (×100)")

let benchmarks: @Sendable () -> Void = {
    let seconds = knob("IDLE_SECONDS", default: 60)
    let refresh = knob("IDLE_REFRESH_SECONDS", default: 3600)
    let summary = SummaryLines()
    let variants: [(name: String, metrics: Bool, networkManager: IdleNetworkManager)] = [
        ("syncd idle: wakeups and RSS", false, .system),
        ("syncd idle, NetworkManager watcher off: wakeups and RSS", false, .off),
        ("syncd idle, NetworkManager watcher on a bus with NetworkManager: wakeups and RSS", false, .standIn),
        ("syncd idle, metrics on: wakeups and RSS", true, .system),
    ]
    for (name, metrics, networkManager) in variants {
        Benchmark(
            name,
            configuration: .counting(
                [switchesMetric, rssMetric, pssMetric, baselineMetric], timeUnits: .seconds, maxDuration: .seconds(seconds * 3 + 300),
                maxIterations: 1, teardown: { summary.flush() })
        ) { benchmark in
            do {
                benchmark.startMeasurement()
                let result = try await IdleRig().run(seconds: seconds, refreshSeconds: refresh, metrics: metrics, networkManager: networkManager)
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
