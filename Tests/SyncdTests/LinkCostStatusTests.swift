import ConnectivityPolicy
import Foundation
import SyncControl
import SyncTerminal
import Testing
import TestSupport

/// What a link costs reaches the status: a feed whose host is reached over a link the
/// configuration calls metered says so on the wire and in `syncctl status`, and under the
/// default `on_metered = "newer"` keeps its head current and holds its backfill.
@Suite(.enabled(if: Privileges.rootTestsEnabled, Comment(rawValue: Privileges.skipReason)))
struct LinkCostStatusTests {
    typealias Rig = EndToEndTests.Rig

    @Test func aMeteredLinkShowsInTheStatus() async throws {
        try Privileges.requireRoot()
        let rig = try await Rig(initialItems: 60, network: #"metered = ["veth-*"]"#)
        try await rig.using { rig in

            let status = try await rig.waitForStatus("the first page loaded over the metered link, the backfill held") { s in
                guard let feed = s.feeds.first, feed.initial.phase == .loaded, case .online(_, _, _, let cost)? = feed.connectivity else { return false }
                return cost?.isMetered == true && feed.older.held?.reason == .meteredLink
            }
            #expect(status.feeds.first?.itemCount == 50, "the first page only: 50 of the server's 60")
            #expect(status.feeds.first?.older.phase == .idle)
            #expect(status.feeds.first?.newer.held == nil)
            guard case .online(let link, _, _, let cost)? = status.feeds.first?.connectivity else { Issue.record("feed not online: \(status)"); return }
            #expect(link == VethTopology.clientLink)
            #expect(cost?.source == .configuration)
            #expect(cost?.detail == #"metered = "veth-*""#)
            guard case .online(_, _, _, let internetCost)? = status.internet else { Issue.record("internet not online: \(status)"); return }
            #expect(internetCost?.isMetered == true)

            let text = try await runCommand([try BuildProducts.path("syncctl"), "status", "--socket", rig.directory.file("io.syncd")])
            #expect(text.contains("Internet: online via veth-c (ipv4, metered, set in the configuration)"), "\(text)")
            #expect(text.contains("Older: paused (metered link)"), "\(text)")
            #expect(text.contains("State: synced"), "held older pages alone leave the feed current: \(text)")

            // Asked for by hand, one older page loads; the backfill does not go on by itself.
            let requests = try await rig.requestCount()
            _ = try await runCommand([try BuildProducts.path("syncctl"), "older", "--socket", rig.directory.file("io.syncd")])
            let older = try await rig.waitForStatus("the older page asked for by hand") { s in
                s.feeds.first?.itemCount == 60 && s.feeds.first?.older.phase == .loaded
            }
            #expect(try await rig.requestCount() == requests + 1)
            #expect(older.feeds.first?.endReached == true)

            // The wire form, as the interface describes it.
            let json = try await runCommand([try BuildProducts.path("syncctl"), "status", "--json=short", "--socket", rig.directory.file("io.syncd")])
            #expect(json.contains(#""cost":{"cost":"metered","detail":"metered = \"veth-*\"","source":"configuration"}"#), "\(json)")
        }
    }

    /// A link only NetworkManager calls metered, and a NetworkManager slow to say so at start:
    /// syncd waits for its first reading before the feeds start, so the backfill never begins.
    @Test(.enabled(if: NetworkManagerOracle.isAvailable || Privileges.isCI, "needs dbus-daemon, python3-dbus and python3-gi"))
    func networkManagersCostHoldsTheBackfillFromTheStart() async throws {
        try Privileges.requireRoot()
        try await withTestBus { bus in
            let networkManager = try await FakeNetworkManager.start(on: bus, devices: ["veth-c": "1"], slow: .milliseconds(500))
            do {
                let rig = try await Rig(initialItems: 2000, environment: ["DBUS_SYSTEM_BUS_ADDRESS=\(bus.address)"])
                try await rig.using { rig in
                    let status = try await rig.waitForStatus("the first page loaded, the backfill held by NetworkManager's cost") { s in
                        guard let feed = s.feeds.first else { return false }
                        return feed.initial.phase == .loaded && feed.older.held?.reason == .meteredLink
                    }
                    guard case .online(_, _, _, let cost)? = status.feeds.first?.connectivity else {
                        Issue.record("not online: \(status)")
                        return
                    }
                    #expect(cost == LinkCostAssessment(.metered, source: .networkManager, detail: "Metered=yes"))
                    #expect(try await rig.requestCount() == 1, "only the first page: the backfill never began")
                    #expect(status.feeds.first?.itemCount == 50)
                }
            } catch {
                await networkManager.stop()
                throw error
            }
            await networkManager.stop()
        }
    }
}
