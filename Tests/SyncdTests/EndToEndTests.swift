import Foundation
import SyncControl
import Testing
import TestSupport

/// syncd as an operator runs it: the real binary in a network namespace, the reference feed
/// server (the real `demo-feed` binary, or `demo-feed-faults` where a test injects faults) in
/// the peer namespace, the control socket on disk.
@Suite(.enabled(if: Privileges.rootTestsEnabled, Comment(rawValue: Privileges.skipReason)))
struct EndToEndTests {
    /// The demo server's ids: zero-padded, newest first.
    static func ids(_ range: ClosedRange<Int>) -> [String] {
        range.reversed().map { String(format: "%010d", $0) }
    }

    final class Rig: Sendable {
        let topology: VethTopology
        let directory: TemporaryDirectory
        let feedServer: ChildProcess
        let daemon: ChildProcess
        let client: SyncControlClient
        /// `/etc/netns/NAME`, when the rig made one.
        let netnsEtc: String?

        /// A second address of the server, outside the client's subnet: reachable only through a
        /// route of its own (`10.88.0.0/24 via` the server), so it can be routed apart from the first.
        static let farAddress = "10.88.0.2"

        /// - Parameters:
        ///   - feeds: feed names and the server address (or host name) each is fetched from.
        ///   - network: more `[network]` keys; `tables`: more tables, before the feeds.
        ///   - server: the feed server's command, run in the server's namespace, listening on port
        ///     8080 and answering `/health`; `nil` for the demo server with `initialItems` items.
        ///   - faults: whether that demo server is `demo-feed-faults`, which takes `/admin/faults`.
        ///   - feedPath: the feeds' URL path on the server; `feedKeys`: more keys for each feed.
        ///   - environment: `NAME=value` settings for syncd's environment.
        ///   - store: the store's path; `nil` for one in the rig's directory; `daemonKeys`: more
        ///     `[daemon]` keys.
        ///   - resolvConf, hosts: syncd's `/etc/resolv.conf` and `/etc/hosts` (`ip netns exec`
        ///     mounts `/etc/netns/NAME/…` over them), removed with the rig.
        init(
            initialItems: Int,
            feeds: [(name: String, host: String)] = [("demo", VethTopology.serverAddress)],
            network: String = "",
            tables: String = "",
            resolvConf: String? = nil,
            hosts: String? = nil,
            server: [String]? = nil,
            faults: Bool = false,
            feedPath: String = "/feeds/demo",
            feedKeys: String = "",
            environment: [String] = [],
            store: String? = nil,
            daemonKeys: String = ""
        ) async throws {
            topology = try await VethTopology()
            directory = try TemporaryDirectory(prefix: "syncd-e2e")
            if resolvConf != nil || hosts != nil {
                let etc = "/etc/netns/\(topology.client.name)"
                try FileManager.default.createDirectory(atPath: etc, withIntermediateDirectories: true)
                try resolvConf?.write(toFile: "\(etc)/resolv.conf", atomically: false, encoding: .utf8)
                try hosts?.write(toFile: "\(etc)/hosts", atomically: false, encoding: .utf8)
                netnsEtc = etc
            } else {
                netnsEtc = nil
            }
            if feeds.contains(where: { $0.host == Self.farAddress }) {
                try await topology.server.ip("addr", "add", "\(Self.farAddress)/32", "dev", VethTopology.serverLink)
                try await topology.client.ip("route", "add", "10.88.0.0/24", "via", VethTopology.serverAddress)
            }
            let demo = [try BuildProducts.path(faults ? "demo-feed-faults" : "demo-feed"),
                        "--host", "0.0.0.0", "--port", "8080", "--feed", "demo:\(initialItems):0", "--limit", "50", "--log-level", "warning"]
            feedServer = try ChildProcess(["ip", "netns", "exec", topology.server.name] + (server ?? demo), logPath: directory.file("demo-feed.log"))
            try SyncdConfig(
                store: store ?? directory.file("syncd.sqlite"),
                controlSocket: directory.file("io.syncd"),
                logLevel: "info",
                daemonLines: [daemonKeys],
                network: SyncdConfig.Network(settle: "500ms", lines: [network]),
                retry: SyncdConfig.Retry(base: "200ms", cap: "2s", reconnectSpread: "0s", connectTimeout: "2s"),
                tables: [tables],
                feeds: feeds.map { feed in
                    SyncdConfig.Feed(
                        name: feed.name, url: "http://\(feed.host):8080\(feedPath)", pageSize: 50, backfill: 100000, timeout: "5s",
                        lines: [feedKeys])
                }
            ).write(toFile: directory.file("syncd.toml"))
            try await Self.waitForServer(topology)
            daemon = try ChildProcess(
                ["ip", "netns", "exec", topology.client.name] + (environment.isEmpty ? [] : ["env"] + environment)
                    + [try BuildProducts.path("syncd"), "--config", directory.file("syncd.toml")],
                logPath: directory.file("syncd.log")
            )
            client = SyncControlClient(socketPath: directory.file("io.syncd"))
        }

        deinit {
            if let netnsEtc { try? FileManager.default.removeItem(atPath: netnsEtc) }
        }

        /// Runs `body`, then stops syncd and the feed server and waits for both, whether `body`
        /// threw or not. Not from a task a `defer` starts: a run of one test alone ends its
        /// process right after the test, before such a task runs, and the server outlives it.
        func using(_ body: (Rig) async throws -> Void) async throws {
            do {
                try await body(self)
            } catch {
                await stop()
                throw error
            }
            await stop()
        }

        /// Stops syncd and the feed server, waiting for both.
        func stop() async {
            _ = await daemon.stop()
            _ = await feedServer.stop()
        }

        static func waitForServer(_ topology: VethTopology) async throws {
            try await waitUntil("the demo feed server answers /health", interval: .milliseconds(50)) {
                (try? await admin(topology, "GET", "/health")) != nil
            }
        }

        /// An admin request to the feed server, from inside its namespace (admin is loopback-only).
        /// Its timeout is the hang guard: the server is expected to answer, if late on a loaded
        /// machine.
        @discardableResult
        static func admin(_ topology: VethTopology, _ method: String, _ path: String) async throws -> String {
            try await topology.server.exec(["python3", "-c", """
                import sys, urllib.request
                r = urllib.request.Request("http://127.0.0.1:8080\(path)", method="\(method)")
                sys.stdout.write(urllib.request.urlopen(r, timeout=\(hangGuard.components.seconds)).read().decode())
                """])
        }

        func requestCount() async throws -> Int {
            let json = try await Self.admin(topology, "GET", "/admin/feeds/demo/requests")
            let object = try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any]
            return object?["count"] as? Int ?? -1
        }

        /// Waits (bounded) until the status satisfies `predicate`; the failure names the last status and syncd's log.
        ///
        /// The default bound is twice the hang guard: syncing a feed, a settle period and a retry
        /// or two come before most of what is waited for.
        func waitForStatus(_ what: String, timeout: Duration = hangGuard * 2, _ predicate: (ControlStatus) -> Bool) async throws -> ControlStatus {
            let deadline = ContinuousClock.now + timeout
            var last: ControlStatus?
            while true {
                if let status = try? await client.boundedStatus() {
                    last = status
                    if predicate(status) { return status }
                }
                guard daemon.isRunning else {
                    Issue.record("syncd exited while waiting for \(what); last status \(String(describing: last)); syncd log:\n\(daemon.output)")
                    throw CommandFailed(command: ["wait", what], status: -1, stderr: "syncd exited")
                }
                if ContinuousClock.now >= deadline { break }
                try await Task.sleep(for: .milliseconds(100))
            }
            Issue.record("timed out waiting for \(what); last status \(String(describing: last)); syncd log:\n\(daemon.output)")
            throw CommandFailed(command: ["wait", what], status: -1, stderr: "timeout")
        }

        /// Waits (bounded) until the first feed holds `items` items and its end; returns that status.
        @discardableResult
        func waitUntilSynced(_ items: Int) async throws -> ControlStatus {
            try await waitForStatus("the feed synced (\(items) items, to its end)") {
                $0.feeds.first?.itemCount == items && $0.feeds.first?.endReached == true
            }
        }

        /// Waits (bounded) until syncd's quiet-time checkpoint has copied the store's log into the
        /// database file and emptied it: what is read next comes from the file.
        func waitForQuietCheckpoint(of store: String) async throws {
            try await waitUntil("syncd's quiet-time checkpoint empties the store's log") {
                ((try? FileManager.default.attributesOfItem(atPath: store + "-wal")[.size] as? Int) ?? 0) == 0
            }
        }

        /// Every stored id, newest first, through the control API's paging.
        func storedIDs(feed: String = "demo") async throws -> [String] {
            var ids: [String] = []
            var after: String?
            repeat {
                let cursor = after
                let page = try await client.bounded("ListItems") { try await $0.items(feed: feed, limit: 500, after: cursor) }
                ids += page.items.map(\.id)
                after = page.next
            } while after != nil
            return ids
        }
    }

    @Test func offlinePausesWithoutRequestsAndReconnectRetriesAndCatchesUp() async throws {
        try Privileges.requireRoot()
        let rig = try await Rig(initialItems: 400, faults: true)
        try await rig.using { rig in

            // Full sync: initial page, then older pages to the end.
            var status = try await rig.waitForStatus("the first full sync") { s in
                s.connectivity.isOnline && s.feeds.first.map { $0.itemCount == 400 && $0.endReached } == true
            }
            #expect(try await rig.storedIDs() == Self.ids(1...400))

            // A refresh that fails (503): a failed newer load waiting for its retry.
            try await Rig.admin(rig.topology, "POST", "/admin/faults?fault=status:503&count=1000&feed=demo")
            _ = try await rig.client.bounded("Refresh") { try await $0.refresh(feed: "demo") }
            status = try await rig.waitForStatus("the refresh to fail") { $0.feeds.first?.newer.phase == .failed }

            // The link goes: offline with its reason at once, the failed load paused, nothing sent.
            try await rig.topology.client.ip("link", "set", VethTopology.clientLink, "down")
            status = try await rig.waitForStatus("offline") { s in
                !s.connectivity.isOnline && s.feeds.first?.newer.paused == true
            }
            #expect(status.connectivity.state == .offline && status.connectivity.reasons == [.noCarrier], "\(status.connectivity)")
            guard case .offline(let reason, let since)? = status.feeds.first?.connectivity else { Issue.record("the feed is not offline"); return }
            #expect(reason == .noCarrier)
            #expect(since != nil)
            #expect(status.connectivity.since == since)
            #expect(status.banner?.reason == .noCarrier)
            #expect(status.feeds.first?.presentation.offlineBanner != nil)
            #expect(status.feeds.first?.itemCount == 400, "loaded content stays while offline")

            try await Rig.admin(rig.topology, "DELETE", "/admin/faults")
            try await Rig.admin(rig.topology, "POST", "/admin/feeds/demo/items?count=120")
            let requestsWhileOffline = try await rig.requestCount()
            _ = try await rig.client.bounded("Refresh") { try await $0.refresh(feed: "demo") }
            _ = try await rig.client.bounded("Retry") { try await $0.retry(feed: "demo") }
            try await Task.sleep(for: .seconds(2))
            #expect(try await rig.requestCount() == requestsWhileOffline, "requests reached the server while offline")
            // The text view shows the same: offline, the reason, paused.
            let text = try await runCommand([try BuildProducts.path("syncctl"), "status", "--socket", rig.directory.file("io.syncd")])
            #expect(text.contains("offline") && text.contains("no carrier") && text.contains("paused"), "\(text)")

            // Back: link up and the default route (the kernel flushed it) — the paused and failed
            // load runs again at once and the store catches up with what appeared meanwhile.
            try await rig.topology.client.ip("link", "set", VethTopology.clientLink, "up")
            try await rig.topology.client.ip("route", "replace", "default", "via", VethTopology.serverAddress)
            status = try await rig.waitForStatus("catching up after reconnect") { s in
                s.connectivity.isOnline && s.feeds.first?.itemCount == 520 && s.feeds.first?.newer.phase == .loaded
            }
            #expect(try await rig.requestCount() > requestsWhileOffline)
            #expect(try await rig.storedIDs() == Self.ids(1...520), "the store must equal the server's feed: no gap, no duplicate")
            #expect(status.banner == nil)

            // SIGTERM: a clean stop.
            #expect(await rig.daemon.stop(signal: SIGTERM) == 0, "\(rig.daemon.output)")
            #expect(rig.daemon.output.contains("syncd stopping"))
        }
    }

    @Test func permissionsAreCheckedByPeerCredentials() async throws {
        try Privileges.requireRoot()
        let rig = try await Rig(initialItems: 50)
        try await rig.using { rig in
            _ = try await rig.waitForStatus("first sync") { $0.feeds.first?.itemCount == 50 }
            let syncctl = try BuildProducts.path("syncctl")
            let socket = rig.directory.file("io.syncd")
            // The temporary directory must be searchable by `nobody` for this check.
            chmod(rig.directory.path, 0o755)
            let asNobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", syncctl]
            let status = try await runCommand(asNobody + ["status", "--json=short", "--socket", socket])
            #expect(status.contains("\"itemCount\":50"), "\(status)")
            for action in ["refresh", "older", "retry"] {
                let process = try ChildProcess(asNobody + [action, "demo", "--socket", socket], logPath: rig.directory.file("\(action).log"))
                #expect(await process.stop(signal: 0, timeout: hangGuard) != 0, "\(action) as nobody must fail")
                #expect(process.output.contains("permission denied"), "\(process.output)")
            }
            #expect(try await runCommand([syncctl, "refresh", "demo", "--socket", socket]).contains("demo"))
        }
    }

    /// A refresh that brings items shows them in the newer notice ("↑ 3 new items"); the count
    /// adds up over refreshes until `MarkSeen`.
    @Test func refreshShowsTheNewItemsNotice() async throws {
        try Privileges.requireRoot()
        let rig = try await Rig(initialItems: 50)
        try await rig.using { rig in
            let first = try await rig.waitForStatus("first sync") { $0.feeds.first?.itemCount == 50 }
            #expect(first.feeds.first?.presentation.newerNotice == nil, "the first load is not new items")
            try await Rig.admin(rig.topology, "POST", "/admin/feeds/demo/items?count=3")
            _ = try await rig.client.bounded("Refresh") { try await $0.refresh(feed: "demo") }
            let status = try await rig.waitForStatus("the new items notice") { $0.feeds.first?.itemCount == 53 && $0.feeds.first?.newer.phase == .loaded }
            #expect(status.feeds.first?.presentation.newerNotice == .newItems(count: 3))
            // Not seen yet: the next refresh's items add to the count.
            try await Rig.admin(rig.topology, "POST", "/admin/feeds/demo/items?count=2")
            _ = try await rig.client.bounded("Refresh") { try await $0.refresh(feed: "demo") }
            _ = try await rig.waitForStatus("five new items") { $0.feeds.first?.presentation.newerNotice == .newItems(count: 5) }
            // Seen: the notice goes.
            #expect(try await rig.client.bounded("MarkSeen") { try await $0.markSeen(feed: "demo") } == ["demo"])
            _ = try await rig.waitForStatus("the notice cleared") { $0.feeds.first?.presentation.newerNotice == nil }
        }
    }
}
