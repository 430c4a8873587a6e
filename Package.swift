// swift-tools-version: 6.1
import PackageDescription

/// The library targets that are products, each of its own name.
let libraries = [
    "ConnectivityPolicy", "NetlinkMonitor", "NameResolution", "ConnectivityCheck", "Reachability", "LinkCost", "SyncCore",
    "SyncStore", "SyncCoordinator", "HTTPFeedSource", "DemoFeedServer", "Varlink", "SyncControl", "EventLoopClock",
    "EventLoopExecutor", "SyncMetrics", "SyncDaemon",
]

/// Test and measurement tooling, not part of what syncd ships: NetlinkProbe (network namespaces,
/// veth pairs, raw netlink listeners, subprocesses) and SyncdTesting (the demo feed server's
/// fault injection). The in-repo Benchmarks package, a package of its own, sets
/// SYNCD_DEVELOPMENT_PRODUCTS=1 to see them as products; nobody else does. This package's own
/// tests depend on the targets directly, and `swift build` builds the tooling executables
/// (`demo-feed-faults`, `netprobe`) with everything else.
let developmentLibraries = Context.environment["SYNCD_DEVELOPMENT_PRODUCTS"] == "1" ? ["NetlinkProbe", "SyncdTesting"] : []

// The package dependencies' products that many targets use.
let argumentParser = Target.Dependency.product(name: "ArgumentParser", package: "swift-argument-parser")
let asyncHTTPClient = Target.Dependency.product(name: "AsyncHTTPClient", package: "async-http-client")
let grdb = Target.Dependency.product(name: "GRDB", package: "GRDB.swift")
let logging = Target.Dependency.product(name: "Logging", package: "swift-log")
let nioCore = Target.Dependency.product(name: "NIOCore", package: "swift-nio")
let nioHTTP1 = Target.Dependency.product(name: "NIOHTTP1", package: "swift-nio")
let nioPosix = Target.Dependency.product(name: "NIOPosix", package: "swift-nio")
let nioEmbedded = Target.Dependency.product(name: "NIOEmbedded", package: "swift-nio")
let serviceLifecycle = Target.Dependency.product(name: "ServiceLifecycle", package: "swift-service-lifecycle")

let package = Package(
    name: "syncd",
    platforms: [.macOS(.v15)],
    products: (libraries + developmentLibraries).map { .library(name: $0, targets: [$0]) } + [
        .executable(name: "syncd", targets: ["syncd"]),
        .executable(name: "syncctl", targets: ["syncctl"]),
        .executable(name: "demo-feed", targets: ["demo-feed"]),
        .executable(name: "netmon", targets: ["netmon"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-collections", from: "1.6.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-nio-extras", from: "1.35.2"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        .package(url: "https://github.com/LebJe/TOMLKit", from: "0.6.0"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
    ],
    targets: [
        // MARK: C shim

        /// libnl-3 / libnl-route-3, found through pkg-config.
        .systemLibrary(
            name: "CNetlink",
            pkgConfig: "libnl-route-3.0",
            providers: [.apt(["libnl-3-dev", "libnl-route-3-dev"])]
        ),
        /// sd-bus from libsystemd, found through pkg-config: the D-Bus client that asks
        /// NetworkManager what a link costs.
        .systemLibrary(
            name: "CSystemdBus",
            pkgConfig: "libsystemd",
            providers: [.apt(["libsystemd-dev"])]
        ),
        /// glibc's allocator controls (`mallopt`, `malloc_trim`), which the Glibc module leaves out.
        .systemLibrary(name: "CMalloc"),
        /// Thread names and kernel thread ids (`prctl` and `syscall` are variadic, `gettid` hidden).
        .systemLibrary(name: "CThread"),
        /// `accept4` and `pipe2`, which the Glibc module hides (they need `_GNU_SOURCE`).
        .systemLibrary(name: "CSocket"),
        /// `sqlite3_config`, which is variadic and so out of Swift's reach.
        .systemLibrary(name: "CSQLiteConfig"),
        /// `sched_getattr` and `sched_setattr`, which reach Swift only through the variadic `syscall`.
        .systemLibrary(name: "CScheduling"),
        /// The Swift runtime's global-executor hook, reached by a C reference instead of `dlsym`.
        .target(name: "CGlobalExecutor"),

        // MARK: Pure core (no I/O)

        /// One fan-out type: the latest value and every later one to any number of async streams.
        .target(name: "AsyncBroadcast"),
        /// A `Clock` that sleeps on SwiftNIO event-loop timers instead of libdispatch.
        .target(name: "EventLoopClock", dependencies: [nioCore, nioPosix]),
        /// Swift concurrency's global executor on SwiftNIO's singleton event loops, in static builds too.
        .target(name: "EventLoopExecutor", dependencies: ["CGlobalExecutor", nioCore, nioPosix]),

        /// Network snapshot model, carrier rule and the connectivity verdict.
        .target(name: "ConnectivityPolicy"),
        /// Per-feed paging state machine, retry policy and presentation model.
        .target(name: "SyncCore", dependencies: ["ConnectivityPolicy"]),

        // MARK: Services

        /// Monitor of links, addresses (libnl cache manager) and routes (libnl-parsed, own table).
        .target(
            name: "NetlinkMonitor",
            dependencies: [
                "CNetlink", "CThread", "ConnectivityPolicy", "AsyncBroadcast",
                .product(name: "HeapModule", package: "swift-collections"), logging, serviceLifecycle,
            ]
        ),
        /// What each link costs (metered or not), from the configuration, NetworkManager over D-Bus,
        /// systemd-networkd's DHCP leases and the link's kind.
        .target(
            name: "LinkCost",
            dependencies: [
                "CSystemdBus", "CThread", "ConnectivityPolicy", "NetlinkMonitor", "AsyncBroadcast", logging, serviceLifecycle,
            ]
        ),
        /// Host names to addresses with getaddrinfo(3) on a thread of its own, re-resolved when the
        /// resolver's files change, on request and periodically.
        .target(name: "NameResolution", dependencies: ["ConnectivityPolicy", "CThread", logging, serviceLifecycle]),
        /// Checks above the route: an HTTP connectivity check (captive portals, as NetworkManager's)
        /// and a TCP connect probe (does the server answer).
        .target(
            name: "ConnectivityCheck",
            dependencies: ["ConnectivityPolicy", asyncHTTPClient, nioCore, nioPosix, nioHTTP1, logging]
        ),
        /// A host's place on the connectivity ladder: the kernel's route, the name, the evidence
        /// above the route.
        .target(
            name: "Reachability",
            dependencies: ["ConnectivityPolicy", "NetlinkMonitor", "NameResolution", logging, serviceLifecycle]
        ),
        /// Development only: network namespaces and veth pairs, a raw netlink listener and in-process
        /// link changes for latency probes, and the one process spawner of tests and benchmarks.
        .target(name: "NetlinkProbe", dependencies: ["CNetlink", "NetlinkMonitor", "ConnectivityPolicy"]),
        /// SQLite (WAL) store of feed items and cursors.
        .target(
            name: "SyncStore",
            dependencies: ["SyncCore", "CScheduling", "AsyncBroadcast", grdb, .product(name: "GRDBSQLite", package: "GRDB.swift")]
        ),
        /// Actor that drives feed sources from connectivity, triggers and the retry policy.
        .target(
            name: "SyncCoordinator",
            dependencies: ["SyncCore", "ConnectivityPolicy", "AsyncBroadcast", logging, serviceLifecycle]
        ),
        /// RFC 8288 Link-header paginated HTTP feeds over AsyncHTTPClient.
        .target(
            name: "HTTPFeedSource",
            dependencies: [
                "SyncCore", asyncHTTPClient, nioCore, nioHTTP1, nioPosix, .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOTLS", package: "swift-nio"), .product(name: "NIOHTTPCompression", package: "swift-nio-extras"),
                logging,
            ]
        ),
        /// Reference feed server (demo and tests), with a per-request hook that tooling plugs into.
        .target(
            name: "DemoFeedServer",
            dependencies: [
                .product(name: "Hummingbird", package: "hummingbird"), logging, nioCore, serviceLifecycle,
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            ]
        ),
        /// The demo feed server's command line, shared by `demo-feed` and `demo-feed-faults`.
        .target(name: "DemoFeedCLI", dependencies: ["DemoFeedServer", argumentParser, logging]),
        /// Development only: the demo feed server's fault injection (a request hook), for tests
        /// and benchmarks.
        .target(name: "SyncdTesting", dependencies: ["DemoFeedServer", "SyncCore", logging, nioCore]),
        /// Varlink wire protocol: NUL-delimited JSON over AF_UNIX, server and client.
        .target(name: "Varlink", dependencies: ["CSocket", "EventLoopClock", logging, nioCore, nioPosix]),
        /// syncd's control interface (io.syncd) on top of Varlink: types, server glue, Swift client.
        .target(
            name: "SyncControl",
            dependencies: ["Varlink", "SyncCore", "ConnectivityPolicy", "CScheduling", nioPosix, logging, serviceLifecycle],
            resources: [.copy("io.syncd.varlink")]
        ),
        /// syncd's metrics: recorded through swift-metrics into a Prometheus registry, exposed as
        /// the Prometheus text format or OpenMetrics, over HTTP, to a textfile, or as bytes.
        .target(
            name: "SyncMetrics",
            dependencies: [
                "SyncCore", "ConnectivityPolicy", .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"), logging, nioCore, nioPosix, nioHTTP1, serviceLifecycle,
            ]
        ),
        /// Terminal renderings of the control API's status and items (syncctl's tables, the live
        /// view), safe for hostile feed text.
        .target(name: "SyncTerminal", dependencies: ["SyncControl", "SyncCore"]),

        /// The daemon: configuration, systemd integration, and the wiring of monitor, coordinator,
        /// store, feed sources and control server into one service.
        .target(
            name: "SyncDaemon",
            dependencies: [
                "NetlinkMonitor", "ConnectivityPolicy", "SyncCore", "SyncStore", "SyncCoordinator", "HTTPFeedSource", "SyncControl",
                "AsyncBroadcast", "EventLoopClock", "NameResolution", "ConnectivityCheck", "Reachability", "CMalloc", "SyncMetrics",
                "LinkCost", logging, serviceLifecycle, .product(name: "TOMLKit", package: "TOMLKit"),
            ]
        ),

        // MARK: Executables

        .executableTarget(
            name: "syncd",
            dependencies: [
                "SyncDaemon", "SyncStore", "HTTPFeedSource", "SyncTerminal", "CMalloc", "CSQLiteConfig", "CSocket",
                "EventLoopExecutor", argumentParser, logging, serviceLifecycle,
            ]
        ),
        .executableTarget(name: "syncctl", dependencies: ["SyncControl", "SyncTerminal", "SyncCore", argumentParser]),
        .executableTarget(name: "demo-feed", dependencies: ["DemoFeedCLI", argumentParser]),
        /// Development only (no product): `demo-feed` with fault injection, for tests that run the
        /// server as a process of its own.
        .executableTarget(name: "demo-feed-faults", dependencies: ["DemoFeedCLI", "DemoFeedServer", "SyncdTesting", argumentParser]),
        .executableTarget(name: "netmon", dependencies: ["NetlinkMonitor", "ConnectivityPolicy", argumentParser]),
        /// Development only (no product): the monitor demonstrated and measured in namespaces of
        /// its own (`netprobe demo`, `netprobe latency`).
        .executableTarget(name: "netprobe", dependencies: ["NetlinkMonitor", "NetlinkProbe", "ConnectivityPolicy", argumentParser]),

        // MARK: Tests

        .testTarget(name: "ConnectivityPolicyTests", dependencies: ["ConnectivityPolicy"]),
        .testTarget(name: "LinkCostTests", dependencies: ["LinkCost", "ConnectivityPolicy", "NetlinkMonitor", "TestSupport", logging]),
        .testTarget(name: "EventLoopClockTests", dependencies: ["EventLoopClock", "TestSupport", nioCore, nioPosix]),
        .testTarget(name: "EventLoopExecutorTests", dependencies: ["EventLoopExecutor", nioPosix]),
        .testTarget(name: "NameResolutionTests", dependencies: ["NameResolution", "ConnectivityPolicy", "TestSupport"]),
        .testTarget(
            name: "ConnectivityCheckTests",
            dependencies: ["ConnectivityCheck", "ConnectivityPolicy", "TestSupport", nioCore, nioPosix, nioHTTP1]
        ),
        .testTarget(
            name: "ReachabilityTests",
            dependencies: ["Reachability", "NetlinkMonitor", "NameResolution", "ConnectivityPolicy", "TestSupport"]
        ),
        .testTarget(name: "ResilienceTests", dependencies: ["NetlinkMonitor", "ConnectivityPolicy", "TestSupport"]),
        .testTarget(
            name: "NetlinkMonitorTests",
            dependencies: ["NetlinkMonitor", "ConnectivityPolicy", "TestSupport", serviceLifecycle, logging]
        ),
        .testTarget(name: "SyncCoreTests", dependencies: ["SyncCore"]),
        .testTarget(name: "SyncStoreTests", dependencies: ["SyncStore", "SyncCore", "TestSupport", "CScheduling", grdb]),
        /// Writes pages to a store and can stop inside a commit, so SyncStoreTests can SIGKILL it there.
        .executableTarget(name: "store-writer", dependencies: ["SyncStore", "SyncCore"], path: "Tests/StoreWriter"),
        .testTarget(
            name: "SyncCoordinatorTests",
            dependencies: ["SyncCoordinator", "SyncCore", "ConnectivityPolicy", "SyncStore", "TestSupport", nioPosix]
        ),
        .testTarget(
            name: "HTTPFeedSourceTests",
            dependencies: [
                "HTTPFeedSource", "DemoFeedServer", "SyncdTesting", "SyncCore", "SyncCoordinator", "SyncStore", "TestSupport",
                asyncHTTPClient, nioCore, nioHTTP1, logging,
            ],
            // A GitHub-style server in Python, started by the tests: an oracle sharing no code with syncd.
            exclude: ["Oracle"]
        ),
        .testTarget(
            name: "VarlinkTests",
            dependencies: ["Varlink", "SyncControl", "SyncCore", "SyncTerminal", "AsyncBroadcast", "TestSupport", nioCore, nioEmbedded]
        ),
        .testTarget(name: "AsyncBroadcastTests", dependencies: ["AsyncBroadcast"]),
        .testTarget(name: "SyncMetricsTests", dependencies: ["SyncMetrics", "SyncCore", "ConnectivityPolicy", "TestSupport"]),
        .testTarget(
            name: "SyncdTests",
            dependencies: ["SyncDaemon", "SyncControl", "SyncTerminal", "SyncCore", "TestSupport", "NetlinkProbe", "LinkCost"]
        ),
        .testTarget(name: "SyncdResilienceTests", dependencies: ["SyncControl", "SyncStore", "SyncCore", "DemoFeedServer", "SyncdTesting", "NetlinkProbe", "TestSupport", grdb]),
        /// Helpers shared by tests (clocks, waits, root checks, build products); re-exports NetlinkProbe.
        .target(name: "TestSupport", dependencies: ["ConnectivityPolicy", "NetlinkProbe", "SyncCore"], path: "Tests/TestSupport", exclude: ["Oracle"]),
    ],
    swiftLanguageModes: [.v6]
)
