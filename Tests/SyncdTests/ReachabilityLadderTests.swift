import Foundation
import SyncControl
import SyncTerminal
import Testing
import TestSupport

/// The ladder above the route, with the real syncd in a namespace and real servers in another:
/// a resolver (dnsmasq) that fails and then answers, a name that moves, a server that silently
/// drops, a captive portal. Each step's status is held against what the servers and the kernel
/// say.
@Suite(.serialized, .enabled(if: Privileges.rootTestsEnabled, Comment(rawValue: Privileges.skipReason)))
struct ReachabilityLadderTests {
    typealias Rig = EndToEndTests.Rig
    static let name = "feed.test"

    /// dnsmasq in the server namespace, answering `feed.test` from a hosts directory it watches.
    final class Resolver: Sendable {
        let process: ChildProcess
        let hosts: String

        init(_ rig: Rig, hosts: String, listen: String = VethTopology.serverAddress) async throws {
            let directory = rig.directory.file("dns-hosts")
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            self.hosts = "\(directory)/feed"
            try hosts.write(toFile: self.hosts, atomically: true, encoding: .utf8)
            process = try ChildProcess(
                ["ip", "netns", "exec", rig.topology.server.name, "dnsmasq", "--no-daemon", "--no-resolv", "--no-hosts",
                 "--hostsdir=\(directory)", "--listen-address=\(listen)", "--bind-interfaces",
                 "--port=53", "--local=/test/", "--log-queries", "--pid-file="],
                logPath: rig.directory.file("dnsmasq.log")
            )
            // It logs "started" once it listens.
            try await waitUntil("dnsmasq listens", interval: .milliseconds(50)) { process.output.contains("started") }
        }

        /// Replaces the hosts file; dnsmasq reads it again by itself.
        func answer(_ hosts: String) async throws {
            try hosts.write(toFile: self.hosts, atomically: true, encoding: .utf8)
        }
    }

    /// One resolver attempt of one second: a test of DNS should not wait for glibc's defaults.
    static func resolvConf(_ server: String = VethTopology.serverAddress) -> String {
        "nameserver \(server)\noptions timeout:1 attempts:1\n"
    }

    @Test func dnsThatFailsThenAnswersIsLimitedThenOnline() async throws {
        try Privileges.requireRoot()
        let rig = try await Rig(initialItems: 60, feeds: [("named", Self.name)], network: #"resolve_interval = "1s""#, resolvConf: Self.resolvConf())
        try await rig.using { rig in
            // No resolver runs yet: the name cannot resolve, while the kernel routes everything.
            let limited = try await rig.waitForStatus("limited: dns-failed") { s in
                if case .limited(.dnsFailed, _, _, _, _)? = s.feeds.first?.connectivity { return true }
                return false
            }
            guard case .limited(_, let detail, let link, _, _)? = limited.feeds.first?.connectivity else { return }
            #expect(detail.hasPrefix("\(Self.name):"), "the evidence names the host: \(detail)")
            #expect(link == VethTopology.clientLink || link == nil)
            #expect(limited.connectivity.state == .limited, "\(limited.connectivity)")
            #expect(limited.banner?.message.contains("Can't resolve \(Self.name)") == true, "\(String(describing: limited.banner))")
            #expect(try await rig.requestCount() == 0, "no request while the name does not resolve")
            let text = try await runCommand([try BuildProducts.path("syncctl"), "status", "--socket", rig.directory.file("io.syncd")])
            print("ReachabilityLadderTests: DNS failed:\n\(text)")
            #expect(text.contains("State: paused (limited: name resolution failed)"), "\(text)")

            // The resolver comes up and answers: the periodic re-resolution finds it.
            let resolver = try await Resolver(rig, hosts: "\(VethTopology.serverAddress) \(Self.name)\n")
            defer { Task { [resolver] in _ = await resolver.process.stop() } }
            let online = try await rig.waitForStatus("online and synced after the name resolved") { s in
                s.connectivity.state == .online && s.feeds.first?.itemCount == 60
            }
            #expect(online.banner == nil)
            #expect(try await rig.storedIDs(feed: "named") == EndToEndTests.ids(1...60))
        }
    }

    @Test func aNameThatMovesIsFollowed() async throws {
        try Privileges.requireRoot()
        // The name lives in syncd's /etc/hosts (bind-mounted by `ip netns exec`, so it can only
        // be rewritten in place): a change is seen by the resolver's file watch at once.
        let rig = try await Rig(
            initialItems: 40, feeds: [("named", Self.name), ("far", Rig.farAddress)],
            hosts: "127.0.0.1 localhost\n\(VethTopology.serverAddress) \(Self.name)\n"
        )
        try await rig.using { rig in
            _ = try await rig.waitForStatus("synced through the first address") { s in
                s.connectivity.state == .online && s.feeds.allSatisfy { $0.itemCount == 40 }
            }
            // The name moves to the far address, and then the old address is blackholed: a verdict
            // that followed the address resolved at start would now read blocked.
            let hosts = try FileHandle(forWritingTo: URL(fileURLWithPath: "\(rig.netnsEtc!)/hosts"))
            try hosts.truncate(atOffset: 0)
            try hosts.write(contentsOf: Data("127.0.0.1 localhost\n\(Rig.farAddress) \(Self.name)\n".utf8))
            try hosts.close()
            do {
                try await waitUntil("syncd follows the name to the far address", interval: .milliseconds(50)) {
                    rig.daemon.output.contains("addresses=[\(Rig.farAddress)]")
                }
            } catch is WaitTimedOut {
                // The expectation below says so, with the log.
            }
            #expect(rig.daemon.output.contains("feed host resolved addresses=[\(Rig.farAddress)]"), "syncd followed the name:\n\(rig.daemon.output)")
            try await rig.topology.client.ip("route", "add", "blackhole", "\(VethTopology.serverAddress)/32")
            try await Task.sleep(for: .seconds(2))
            let status = try await rig.waitForStatus("the moved name still online") { s in
                s.feed(named: "named")?.connectivity?.isOnline == true
            }
            #expect(status.feed(named: "named")?.connectivity?.isOnline == true, "\(String(describing: status.feed(named: "named")?.connectivity))")
            // And it still syncs: a refresh reaches the server at its new address (a connection kept
            // alive to the old address may fail it once; the retry connects anew).
            let before = try await rig.requestCount()
            _ = try await rig.client.bounded("Refresh") { try await $0.refresh(feed: "named") }
            _ = try await rig.waitForStatus("refresh through the new address") { s in
                s.feed(named: "named").map(FeedCondition.init) == .synced && s.feed(named: "named")?.newer.phase == .loaded
            }
            #expect(try await rig.requestCount() > before, "the refresh reached the server")
        }
    }

    @Test func aServerThatSilentlyDropsIsServerUnreachableUntilItAnswers() async throws {
        try Privileges.requireRoot()
        let rig = try await Rig(initialItems: 30, feeds: [("demo", VethTopology.serverAddress)], network: "unanswered_threshold = 2")
        try await rig.using { rig in
            _ = try await rig.waitForStatus("synced") { s in s.connectivity.state == .online && s.feeds.first?.itemCount == 30 }
            // The server's replies to the client vanish (its route back is a blackhole): SYNs arrive,
            // nothing comes back, connects time out. The client's kernel still routes the server.
            try await rig.topology.server.ip("route", "add", "blackhole", "\(VethTopology.clientAddress)/32")
            let oracle = try await IPRouteGet.ask(.init(VethTopology.serverAddress)!, in: rig.topology.client)
            #expect(oracle == .via(device: VethTopology.clientLink, gateway: nil), "\(oracle)")
            // Refreshes are what meet the silence: each takes a connect timeout (2 s) to fail, two
            // in a row mark the server, and on a loaded machine all of it runs late.
            var limited: ControlStatus?
            do {
                try await waitUntil("limited: server-unreachable", timeout: hangGuard * 2, interval: .milliseconds(500)) {
                    _ = try? await rig.client.bounded("Refresh") { try await $0.refresh(feed: "demo") }
                    if let s = try? await rig.client.boundedStatus(), case .limited(.serverUnreachable, _, _, _, _)? = s.feeds.first?.connectivity { limited = s }
                    return limited != nil
                }
            } catch is WaitTimedOut {
                // The guard below records it, with syncd's log.
            }
            guard let limited, case .limited(_, let detail, _, _, _)? = limited.feeds.first?.connectivity else {
                Issue.record("never limited: server-unreachable; syncd log:\n\(rig.daemon.output)")
                return
            }
            #expect(detail == "\(VethTopology.serverAddress): connection timed out", "\(detail)")
            #expect(limited.banner?.message.hasPrefix("Can't reach \(VethTopology.serverAddress): connection timed out") == true, "\(String(describing: limited.banner))")
            #expect(limited.feeds.first?.newer.paused == true || limited.feeds.first?.newer.phase != .failed, "limited pauses; it spends no retry budget")
            let text = try await runCommand([try BuildProducts.path("syncctl"), "status", "--socket", rig.directory.file("io.syncd")])
            print("ReachabilityLadderTests: server unreachable:\n\(text)")

            // The server answers again: the probe notices and the feed is back.
            try await rig.topology.server.ip("route", "del", "blackhole", "\(VethTopology.clientAddress)/32")
            let back = try await rig.waitForStatus("online after the server answered again", timeout: .seconds(90)) { s in
                s.feeds.first?.connectivity?.isOnline == true
            }
            #expect(back.banner == nil)
        }
    }

    @Test func aCaptivePortalIsLimitedUntilItLetsThrough() async throws {
        try Privileges.requireRoot()
        let check = "http://\(VethTopology.serverAddress):8081/generate_204"
        let rig = try await Rig(
            initialItems: 20, feeds: [("demo", VethTopology.serverAddress)],
            tables: """

            [connectivity_check]
            url = "\(check)"
            interval = "1s"
            timeout = "2s"
            """
        )
        try await rig.using { rig in
            // A portal: the check URL is answered with a redirect to a login page while a flag file exists.
            let flag = rig.directory.file("portal-active")
            try "".write(toFile: flag, atomically: true, encoding: .utf8)
            let portal = try ChildProcess(
                ["ip", "netns", "exec", rig.topology.server.name, "python3", "-c", """
                import http.server, os
                class H(http.server.BaseHTTPRequestHandler):
                    def do_GET(self):
                        if os.path.exists("\(flag)"):
                            self.send_response(302); self.send_header("Location", "http://\(VethTopology.serverAddress):8081/login"); self.end_headers()
                        else:
                            self.send_response(204); self.end_headers()
                    def log_message(self, *a): pass
                http.server.HTTPServer(("\(VethTopology.serverAddress)", 8081), H).serve_forever()
                """],
                logPath: rig.directory.file("portal.log")
            )
            defer { Task { [portal] in _ = await portal.stop() } }
            let limited = try await rig.waitForStatus("limited: portal") { s in
                if case .limited(.portal, _, _, _, _)? = s.feeds.first?.connectivity { return true }
                return false
            }
            #expect(limited.banner?.message.hasPrefix("Sign in to the network at http://\(VethTopology.serverAddress):8081/login") == true, "\(String(describing: limited.banner))")
            let text = try await runCommand([try BuildProducts.path("syncctl"), "status", "--socket", rig.directory.file("io.syncd")])
            print("ReachabilityLadderTests: captive portal:\n\(text)")
            #expect(text.contains("Banner: Sign in to the network at http://\(VethTopology.serverAddress):8081/login"), "\(text)")
            // Signed in: the check passes at its next run and the feed syncs.
            try FileManager.default.removeItem(atPath: flag)
            let online = try await rig.waitForStatus("online after the portal let us through") { s in
                s.connectivity.state == .online && s.feeds.first?.itemCount == 20
            }
            #expect(online.banner == nil)
        }
    }
}
