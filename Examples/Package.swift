// swift-tools-version: 6.1
// The README's library examples, as a consumer package would write them: only public API of
// the products named here. `scripts/test` builds every target, and builds ConnectivityExample
// alone in a scratch folder to check that a consumer of ConnectivityPolicy + NetlinkMonitor
// compiles nothing of the sync stack (no NIO, HTTP client, SQLite, Varlink).
import PackageDescription

let package = Package(
    name: "syncd-examples",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "syncd", path: ".."),
    ],
    targets: [
        .executableTarget(
            name: "ConnectivityExample",
            dependencies: [
                .product(name: "ConnectivityPolicy", package: "syncd"),
                .product(name: "NetlinkMonitor", package: "syncd"),
            ]
        ),
        .executableTarget(
            name: "MonitorThreadExample",
            dependencies: [
                .product(name: "ConnectivityPolicy", package: "syncd"),
                .product(name: "NetlinkMonitor", package: "syncd"),
            ]
        ),
        .executableTarget(
            name: "HostLadderExample",
            dependencies: [
                .product(name: "ConnectivityPolicy", package: "syncd"),
                .product(name: "NetlinkMonitor", package: "syncd"),
                .product(name: "NameResolution", package: "syncd"),
                .product(name: "Reachability", package: "syncd"),
            ]
        ),
        .executableTarget(
            name: "SyncExample",
            dependencies: [
                .product(name: "ConnectivityPolicy", package: "syncd"),
                .product(name: "NetlinkMonitor", package: "syncd"),
                .product(name: "SyncCore", package: "syncd"),
                .product(name: "SyncCoordinator", package: "syncd"),
                .product(name: "SyncStore", package: "syncd"),
                .product(name: "HTTPFeedSource", package: "syncd"),
            ]
        ),
        .executableTarget(
            name: "ChangesExample",
            dependencies: [
                .product(name: "SyncCore", package: "syncd"),
                .product(name: "SyncStore", package: "syncd"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
