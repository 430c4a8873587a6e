import ConnectivityPolicy
import Foundation
import LinkCost
import NetlinkMonitor
import Synchronization
import Testing
import TestSupport

/// The tracker on a real kernel and a real bus: a monitor in a fresh namespace, a stand-in
/// NetworkManager on a dbus-daemon of the test's own, and the verdict for a host behind the
/// namespace's default route carrying the cost of the link it goes through.
@Suite(.enabled(if: Privileges.rootTestsEnabled, Comment(rawValue: Privileges.skipReason)))
struct LinkCostTrackerTests {
    static let host = IPAddress("10.88.0.7")!

    @Test(.enabled(if: NetworkManagerOracle.isAvailable || Privileges.isCI, "needs dbus-daemon, python3-dbus and python3-gi"))
    func theVerdictCarriesTheCostFromNetworkManagerThenTheConfiguration() async throws {
        try Privileges.requireRoot()
        let topology = try await VethTopology()
        let monitor = NetlinkMonitor(configuration: .init(networkNamespacePath: topology.client.path))
        try await monitor.start()
        let verdicts = VerdictLog()
        let stream = ConnectivityMonitor.verdicts(from: monitor, for: .addresses([Self.host]), settle: .zero)
        let consumer = Task { for await verdict in stream { verdicts.values.withLock { $0.append(verdict) } } }
        defer { consumer.cancel() }
        func expectPath(_ what: String, _ predicate: @escaping @Sendable (OnlinePath) -> Bool) async throws {
            do {
                try await waitUntil(what) {
                    if case .online(let path) = verdicts.values.withLock({ $0.last }) { return predicate(path) }
                    return false
                }
            } catch {
                Issue.record("\(what): the last verdict is \(verdicts.values.withLock { $0.last.map(String.init(describing:)) ?? "none" }), path \(String(describing: verdicts.values.withLock { $0.last?.path }))")
                throw error
            }
        }

        try await withTestBus { bus in
            let empty = try TemporaryDirectory(prefix: "syncd-linkcost")
            let networkManager = try await FakeNetworkManager.start(on: bus, devices: ["veth-c": "0"])
            let watcher = NetworkManagerWatcher(configuration: .init(busAddress: bus.address))
            let tracker = LinkCostTracker(
                monitor: monitor, networkManager: watcher,
                configuration: .init(globs: LinkCostGlobs(metered: ["wwan*"]), files: LinkCostFiles(leaseDirectory: empty.path, sysfsNetDirectory: empty.path))
            )
            let watching = BoundedTask { try await watcher.run() }
            let tracking = BoundedTask { try await tracker.run() }

            try await expectPath("online via veth-c, cost unknown (NetworkManager says unknown)") { $0.link == "veth-c" && $0.cost == .unknown }
            try await networkManager.send("set veth-c 3")
            try await expectPath("metered, NetworkManager's guess") {
                $0.link == "veth-c" && $0.cost == LinkCostAssessment(.metered, source: .networkManager, detail: "Metered=guess-yes")
            }
            #expect(verdicts.values.withLock { $0.last?.description } == "online via veth-c (ipv4, metered)")
            try await networkManager.send("set veth-c 4")
            try await expectPath("unmetered, NetworkManager's guess") { $0.cost.cost == .unmetered && $0.cost.source == .networkManager }

            // Renamed to match the configuration's glob: the configuration decides.
            try await topology.client.ip("link", "set", VethTopology.clientLink, "down")
            try await topology.client.ip("link", "set", VethTopology.clientLink, "name", "wwan0")
            try await topology.client.ip("link", "set", "wwan0", "up")
            try await topology.client.ip("route", "add", "default", "via", VethTopology.serverAddress, "dev", "wwan0")
            try await expectPath("metered by the configuration's glob") {
                $0.link == "wwan0" && $0.cost == LinkCostAssessment(.metered, source: .configuration, detail: #"metered = "wwan*""#)
            }
            #expect(tracker.costs["wwan0"]?.isMetered == true)

            tracking.cancel()
            watching.cancel()
            try await tracking.value("the tracker's run() after cancellation")
            try await watching.value("the watcher's run() after cancellation")
            await networkManager.stop()
        }
        await monitor.stop()
    }
}

/// Verdicts as a consumer task receives them.
final class VerdictLog: Sendable {
    let values = Mutex<[Verdict]>([])
}
