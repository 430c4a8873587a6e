import Foundation
import SyncControl
import SyncTerminal
import Testing
import TestSupport

/// The status says what the feeds experience: each feed follows the verdict for its own host,
/// and the top line counts those verdicts instead of judging "the internet". The kernel's own
/// answer (`ip route get`) is checked beside each expectation.
@Suite(.enabled(if: Privileges.rootTestsEnabled, Comment(rawValue: Privileges.skipReason)))
struct FeedConnectivityTests {
    typealias Rig = EndToEndTests.Rig

    /// `ip route get HOST` in the client namespace: whether the kernel would send to it.
    static func kernelRoutes(_ rig: Rig, to host: String) async -> Bool {
        (try? await rig.topology.client.ip("route", "get", host)).map { !$0.contains("blackhole") && !$0.contains("unreachable") } ?? false
    }

    @Test func aRouteOnlyToTheFeedHostIsOnlineForTheFeedAndTheTopLine() async throws {
        try Privileges.requireRoot()
        let rig = try await Rig(initialItems: 120, feeds: [("far", Rig.farAddress)])
        try await rig.using { rig in
            // No default route: the internet at large is unreachable, the feed host is not.
            try await rig.topology.client.ip("route", "del", "default")
            #expect(await Self.kernelRoutes(rig, to: Rig.farAddress))

            let status = try await rig.waitForStatus("the feed synced with only a route to its host") { s in
                s.feeds.first?.itemCount == 120 && s.internet?.isOnline == false
            }
            #expect(status.connectivity.state == .online, "\(status.connectivity)")
            #expect(status.connectivity.link == VethTopology.clientLink)
            #expect(status.banner == nil, "no banner while every feed reaches its host")
            guard case .online(let link, _, _, _)? = status.feeds.first?.connectivity else { Issue.record("feed not online: \(status)"); return }
            #expect(link == VethTopology.clientLink)
            #expect(FeedCondition(status.feeds[0]) == .synced)
            #expect(status.internet == .offline(reason: .noRoute, since: status.internet?.since))
            #expect(try await rig.storedIDs(feed: "far") == EndToEndTests.ids(1...120))

            let text = try await runCommand([try BuildProducts.path("syncctl"), "status", "--socket", rig.directory.file("io.syncd")])
            #expect(text.contains("State: online via veth-c (1 of 1 feed reachable)"), "\(text)")
            #expect(text.contains("Internet: offline (no route to host)"), "\(text)")
            #expect(!text.contains("Banner"), "\(text)")
        }
    }

    @Test func aBlackholeToOneOfTwoHostsPausesThatFeedOnly() async throws {
        try Privileges.requireRoot()
        let rig = try await Rig(initialItems: 100, feeds: [("near", VethTopology.serverAddress), ("far", Rig.farAddress)])
        try await rig.using { rig in
            _ = try await rig.waitForStatus("both feeds synced") { s in
                s.connectivity.state == .online && s.feeds.allSatisfy { $0.itemCount == 100 && FeedCondition($0) == .synced }
            }

            // The far host goes behind a blackhole while its feed is idle: nothing is loading, yet
            // its next refresh cannot run, so it reads paused with the reason.
            try await rig.topology.client.ip("route", "add", "blackhole", "\(Rig.farAddress)/32")
            #expect(!(await Self.kernelRoutes(rig, to: Rig.farAddress)))
            #expect(await Self.kernelRoutes(rig, to: VethTopology.serverAddress))
            let status = try await rig.waitForStatus("the far feed paused") { s in
                s.feed(named: "far").map(FeedCondition.init) == .paused
            }
            #expect(status.connectivity.state == .partial && status.connectivity.offline == 1 && status.connectivity.reasons == [.blocked], "\(status.connectivity)")
            #expect(status.feed(named: "far")?.connectivity == .offline(reason: .blocked, since: status.feed(named: "far")?.connectivity?.since))
            #expect(status.feed(named: "far")?.presentation.offlineBanner != nil)
            #expect(status.feed(named: "near").map(FeedCondition.init) == .synced)
            #expect(status.feed(named: "near")?.connectivity?.isOnline == true)
            #expect(status.feed(named: "near")?.presentation.offlineBanner == nil)
            #expect(status.banner?.feeds == ["far"] && status.banner?.reason == .blocked, "\(String(describing: status.banner))")
            #expect(status.internet?.isOnline == true, "the default route still works")

            let text = try await runCommand([try BuildProducts.path("syncctl"), "status", "--socket", rig.directory.file("io.syncd")])
            print("FeedConnectivityTests: syncctl status with one of two hosts blackholed:\n\(text)")
            #expect(text.contains("State: partial: 1 of 2 feeds offline (blocked by a reject route or rule)"), "\(text)")
            #expect(text.contains("Banner: Offline (blocked by a reject route or rule) for far"), "\(text)")
            #expect(text.contains("State: paused (offline: blocked by a reject route or rule)"), "\(text)")

            // A refresh of the paused feed sends nothing; the other feed still syncs.
            let before = try await rig.requestCount()
            _ = try await rig.client.bounded("Refresh") { try await $0.refresh(feed: "far") }
            try await Task.sleep(for: .seconds(1))
            #expect(try await rig.requestCount() == before, "a request left for a host the kernel blackholes")

            // The blackhole goes: the feed comes back after the settle period.
            try await rig.topology.client.ip("route", "del", "blackhole", "\(Rig.farAddress)/32")
            let back = try await rig.waitForStatus("the far feed back online") { s in
                s.connectivity.state == .online && s.feeds.allSatisfy { FeedCondition($0) == .synced }
            }
            #expect(back.banner == nil)
        }
    }
}
