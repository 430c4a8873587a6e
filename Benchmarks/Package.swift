// swift-tools-version: 6.1
import PackageDescription

/// syncd's benchmarks (ordo-one/benchmark): `scripts/bench` at the repository root builds them in
/// release and runs them. Each directory under `Benchmarks/` is one benchmark executable; add a
/// new one as another `.executableTarget` with the `BenchmarkPlugin` (see BENCHMARKS.md).
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
        /// Rigs shared by the benchmarks: process and socket accounting read from /proc, child processes.
        .target(
            name: "BenchmarkSupport",
            dependencies: [
                .product(name: "NetlinkMonitor", package: "syncd"),
                .product(name: "NetlinkProbe", package: "syncd"),
                .product(name: "ConnectivityPolicy", package: "syncd"),
            ]
        ),
        /// The monitor alone in a process of its own, so a storm's CPU time and peak RSS can be
        /// read for it exactly as for `ip monitor` (built by `scripts/bench` before the run).
        .executableTarget(
            name: "storm-monitor",
            dependencies: [
                "BenchmarkSupport",
                .product(name: "NetlinkMonitor", package: "syncd"),
                .product(name: "ConnectivityPolicy", package: "syncd"),
            ]
        ),
        /// Link goes admin-down → offline verdict published, next to the raw kernel notification.
        .executableTarget(
            name: "LinkLatency",
            dependencies: ["BenchmarkSupport", .product(name: "Benchmark", package: "benchmark")],
            path: "Benchmarks/LinkLatency",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        /// 100,000 route adds then deletes: the monitor's CPU time and peak RSS next to `ip monitor route`.
        .executableTarget(
            name: "RouteStorm",
            dependencies: ["BenchmarkSupport", .product(name: "Benchmark", package: "benchmark")],
            path: "Benchmarks/RouteStorm",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),

        // MARK: Sync benchmarks (throughput, reconnect, idle cost, fleet)

        /// Rigs of the sync benchmarks: the Python-baseline throughput run, the namespace reconnect
        /// rig, the idle-cost watcher and the fleet simulation. Separate from BenchmarkSupport so the
        /// storm helper does not link the HTTP, SQLite and server stacks.
        .target(
            name: "SyncBenchmarkSupport",
            dependencies: [
                .product(name: "NetlinkProbe", package: "syncd"),
                .product(name: "SyncCore", package: "syncd"),
                .product(name: "SyncCoordinator", package: "syncd"),
                .product(name: "SyncStore", package: "syncd"),
                .product(name: "HTTPFeedSource", package: "syncd"),
            ]
        ),
        /// Both ends of the reconnect rig, each run inside one of its namespaces (built by `scripts/bench`).
        .executableTarget(
            name: "reconnect-helper",
            dependencies: [
                "SyncBenchmarkSupport",
                .product(name: "DemoFeedServer", package: "syncd"),
                .product(name: "SyncdTesting", package: "syncd"),
                .product(name: "NetlinkMonitor", package: "syncd"),
                .product(name: "ConnectivityPolicy", package: "syncd"),
                .product(name: "SyncCoordinator", package: "syncd"),
                .product(name: "SyncCore", package: "syncd"),
                .product(name: "SyncStore", package: "syncd"),
                .product(name: "HTTPFeedSource", package: "syncd"),
            ]
        ),
        /// Walks a feed's pages by their `Link` headers three ways (bare SwiftNIO, AsyncHTTPClient,
        /// `HTTPFeedSource`) and prints each one's wall and CPU time: what the HTTP stack costs
        /// per page, apart from the coordinator and the store (BENCHMARKS.md, issue 14).
        .executableTarget(
            name: "http-walk",
            dependencies: [
                .product(name: "HTTPFeedSource", package: "syncd"),
                .product(name: "SyncStore", package: "syncd"),
                .product(name: "SyncCore", package: "syncd"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHTTPCompression", package: "swift-nio-extras"),
            ]
        ),
        /// 100,000 items through HTTPFeedSource + SyncCoordinator + SQLiteFeedStore vs Python requests+sqlite3.
        .executableTarget(
            name: "SyncThroughput",
            dependencies: ["BenchmarkSupport", "SyncBenchmarkSupport", .product(name: "Benchmark", package: "benchmark")],
            path: "Benchmarks/SyncThroughput",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        /// N items: the release syncd binary vs a raw-socket client that only walks the pages (issue 14).
        .executableTarget(
            name: "SyncFloor",
            dependencies: ["BenchmarkSupport", "SyncBenchmarkSupport", .product(name: "Benchmark", package: "benchmark")],
            path: "Benchmarks/SyncFloor",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        /// Carrier back → first retried request at the server; carrier loss → coordinator paused.
        .executableTarget(
            name: "ReconnectLatency",
            dependencies: ["BenchmarkSupport", "SyncBenchmarkSupport", .product(name: "Benchmark", package: "benchmark")],
            path: "Benchmarks/ReconnectLatency",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        /// One scrape of syncd's /metrics with 10 feeds, against GetStatus of the same daemon.
        .executableTarget(
            name: "MetricsScrape",
            dependencies: ["BenchmarkSupport", "SyncBenchmarkSupport", .product(name: "Benchmark", package: "benchmark")],
            path: "Benchmarks/MetricsScrape",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        /// Root's GetStatus while 16 clients page through a feed with ListItems, ListItems items/s,
        /// and syncd's memory under a flood of pipelined calls nobody reads.
        .executableTarget(
            name: "ControlFairness",
            dependencies: [
                "BenchmarkSupport",
                "SyncBenchmarkSupport",
                .product(name: "NetlinkProbe", package: "syncd"),
                .product(name: "Benchmark", package: "benchmark"),
            ],
            path: "Benchmarks/ControlFairness",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        /// The syncd binary idle between refreshes: context switches per second and RSS.
        .executableTarget(
            name: "IdleCost",
            dependencies: ["SyncBenchmarkSupport", .product(name: "Benchmark", package: "benchmark")],
            path: "Benchmarks/IdleCost",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        /// 10,000 simulated agents reconnecting: peak request rate with and without spread and jitter.
        .executableTarget(
            name: "FleetReconnect",
            dependencies: [
                "SyncBenchmarkSupport",
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "SyncCore", package: "syncd"),
            ],
            path: "Benchmarks/FleetReconnect",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
    ],
    swiftLanguageModes: [.v6]
)
