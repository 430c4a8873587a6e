// swift-tools-version: 6.1
import PackageDescription

/// Products of the root package, by name.
func syncd(_ products: String...) -> [Target.Dependency] {
    products.map { .product(name: $0, package: "syncd") }
}

/// A benchmark executable in `Benchmarks/<name>`, run by the benchmark plugin: the harness, the
/// benchmark library and `dependencies`.
func benchmark(_ name: String, _ dependencies: [Target.Dependency] = []) -> Target {
    .executableTarget(
        name: name,
        dependencies: ["BenchmarkHarness", .product(name: "Benchmark", package: "benchmark")] + dependencies,
        path: "Benchmarks/\(name)",
        plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
    )
}

/// syncd's benchmarks (ordo-one/benchmark): `scripts/bench` at the repository root builds them in
/// release and runs them. Each directory under `Benchmarks/` is one benchmark executable; add a
/// new one with `benchmark(_:_:)` (see BENCHMARKS.md).
///
/// Kept out of the root package so that the benchmark tool and its malloc interposer never enter
/// the product's dependency graph. Most benchmarks need root: they build network namespaces.
let package = Package(
    name: "syncd-benchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        // `name:` pins the identity to the root package's name, so the manifest does not depend on
        // the directory the repository was cloned into.
        .package(name: "syncd", path: ".."),
        .package(url: "https://github.com/ordo-one/benchmark", from: "1.38.1", traits: ["MallocInterposer"]),
        // The same versions the root package resolves; only `http-walk` uses them directly.
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-extras", from: "1.0.0"),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
    ],
    targets: [
        /// The benchmark library's side of every benchmark: a benchmark over a rig set up once,
        /// configurations of count metrics, lines printed at teardown. Apart from the rigs so that
        /// the helper processes, which link those, do not link the benchmark library and its
        /// malloc interposer.
        .target(name: "BenchmarkHarness", dependencies: [.product(name: "Benchmark", package: "benchmark")]),
        /// Rigs shared by the benchmarks: process and socket accounting read from /proc, child processes.
        .target(name: "BenchmarkSupport", dependencies: syncd("NetlinkMonitor", "NetlinkProbe", "ConnectivityPolicy")),
        /// The monitor alone in a process of its own, so a storm's CPU time and peak RSS can be
        /// read for it exactly as for `ip monitor` (built by `scripts/bench` before the run).
        .executableTarget(name: "storm-monitor", dependencies: ["BenchmarkSupport"] + syncd("NetlinkMonitor", "ConnectivityPolicy")),
        /// Link goes admin-down → offline verdict published, next to the raw kernel notification.
        benchmark("LinkLatency", ["BenchmarkSupport"]),
        /// 100,000 route adds then deletes: the monitor's CPU time and peak RSS next to `ip monitor route`.
        benchmark("RouteStorm", ["BenchmarkSupport"]),

        // MARK: Sync benchmarks (throughput, reconnect, idle cost, fleet)

        /// Rigs of the sync benchmarks: the Python-baseline throughput run, the namespace reconnect
        /// rig, the idle-cost watcher and the fleet simulation. Separate from BenchmarkSupport so the
        /// storm helper does not link the HTTP, SQLite and server stacks.
        .target(
            name: "SyncBenchmarkSupport",
            dependencies: syncd("NetlinkProbe", "SyncCore", "SyncCoordinator", "SyncStore", "HTTPFeedSource")
        ),
        /// Both ends of the reconnect rig, each run inside one of its namespaces (built by `scripts/bench`).
        .executableTarget(
            name: "reconnect-helper",
            dependencies: ["SyncBenchmarkSupport"] + syncd(
                "DemoFeedServer", "SyncdTesting", "NetlinkMonitor", "ConnectivityPolicy", "SyncCoordinator", "SyncCore", "SyncStore",
                "HTTPFeedSource")
        ),
        /// Walks a feed's pages by their `Link` headers three ways (bare SwiftNIO, AsyncHTTPClient,
        /// `HTTPFeedSource`) and prints each one's wall and CPU time: what the HTTP stack costs
        /// per page, apart from the coordinator and the store (BENCHMARKS.md, issue 14).
        .executableTarget(
            name: "http-walk",
            dependencies: syncd("HTTPFeedSource", "SyncStore", "SyncCore") + [
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHTTPCompression", package: "swift-nio-extras"),
            ]
        ),
        /// 100,000 items through HTTPFeedSource + SyncCoordinator + SQLiteFeedStore vs Python requests+sqlite3.
        benchmark("SyncThroughput", ["SyncBenchmarkSupport"]),
        /// N items: the release syncd binary vs a raw-socket client that only walks the pages (issue 14).
        benchmark("SyncFloor", ["SyncBenchmarkSupport"]),
        /// Carrier back → first retried request at the server; carrier loss → coordinator paused.
        benchmark("ReconnectLatency", ["SyncBenchmarkSupport"]),
        /// One scrape of syncd's /metrics with 10 feeds, against GetStatus of the same daemon.
        benchmark("MetricsScrape", ["SyncBenchmarkSupport"]),
        /// Root's GetStatus while 16 clients page through a feed with ListItems, ListItems items/s,
        /// and syncd's memory under a flood of pipelined calls nobody reads.
        benchmark("ControlFairness", ["SyncBenchmarkSupport"] + syncd("NetlinkProbe")),
        /// The syncd binary idle between refreshes: context switches per second and RSS.
        benchmark("IdleCost", ["SyncBenchmarkSupport"]),
        /// 10,000 simulated agents reconnecting: peak request rate with and without spread and jitter.
        benchmark("FleetReconnect", ["SyncBenchmarkSupport"] + syncd("SyncCore")),
    ],
    swiftLanguageModes: [.v6]
)
