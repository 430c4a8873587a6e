// swift-tools-version: 6.1
// The README's library examples, as a consumer package would write them: only public API of
// the products named here. `scripts/test` builds every target, and builds ConnectivityExample
// alone in a scratch folder to check that a consumer of ConnectivityPolicy + NetlinkMonitor
// compiles nothing of the sync stack (no NIO, HTTP client, SQLite, Varlink).
import PackageDescription

/// An example executable in `Sources/<name>` that uses only the public API of the syncd `products`.
func example(_ name: String, using products: String...) -> Target {
    .executableTarget(name: name, dependencies: products.map { .product(name: $0, package: "syncd") })
}

let package = Package(
    name: "syncd-examples",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "syncd", path: ".."),
    ],
    targets: [
        example("ConnectivityExample", using: "ConnectivityPolicy", "NetlinkMonitor"),
        example("MonitorThreadExample", using: "ConnectivityPolicy", "NetlinkMonitor"),
        example("HostLadderExample", using: "ConnectivityPolicy", "NetlinkMonitor", "NameResolution", "Reachability"),
        example(
            "SyncExample", using: "ConnectivityPolicy", "NetlinkMonitor", "SyncCore", "SyncCoordinator", "SyncStore", "HTTPFeedSource"),
        example("ChangesExample", using: "SyncCore", "SyncStore"),
    ],
    swiftLanguageModes: [.v6]
)
