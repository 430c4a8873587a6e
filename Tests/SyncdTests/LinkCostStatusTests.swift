import Foundation
import SyncControl
import SyncTerminal
import Testing
import TestSupport

/// What a link costs reaches the status: a feed whose host is reached over a link the
/// configuration calls metered says so on the wire and in `syncctl status`.
@Suite(.enabled(if: Privileges.rootTestsEnabled, Comment(rawValue: Privileges.skipReason)))
struct LinkCostStatusTests {
    typealias Rig = EndToEndTests.Rig

    @Test func aMeteredLinkShowsInTheStatus() async throws {
        try Privileges.requireRoot()
        let rig = try await Rig(initialItems: 60, network: #"metered = ["veth-*"]"#)
        defer { Task { [rig] in _ = await rig.daemon.stop(); _ = await rig.feedServer.stop() } }

        let status = try await rig.waitForStatus("the feed synced over the metered link") { s in
            guard s.feeds.first?.itemCount == 60, case .online(_, _, _, let cost)? = s.feeds.first?.connectivity else { return false }
            return cost?.isMetered == true
        }
        guard case .online(let link, _, _, let cost)? = status.feeds.first?.connectivity else { Issue.record("feed not online: \(status)"); return }
        #expect(link == VethTopology.clientLink)
        #expect(cost?.source == .configuration)
        #expect(cost?.detail == #"metered = "veth-*""#)
        guard case .online(_, _, _, let internetCost)? = status.internet else { Issue.record("internet not online: \(status)"); return }
        #expect(internetCost?.isMetered == true)

        let text = try await runCommand([try BuildProducts.path("syncctl"), "status", "--socket", rig.directory.file("io.syncd")])
        #expect(text.contains("Internet: online via veth-c (ipv4, metered, set in the configuration)"), "\(text)")

        // The wire form, as the interface describes it.
        let json = try await runCommand([try BuildProducts.path("syncctl"), "status", "--json=short", "--socket", rig.directory.file("io.syncd")])
        #expect(json.contains(#""cost":{"cost":"metered","detail":"metered = \"veth-*\"","source":"configuration"}"#), "\(json)")
    }
}
