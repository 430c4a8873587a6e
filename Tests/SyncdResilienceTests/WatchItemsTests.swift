import DemoFeedServer
import Foundation
import SyncCore
import SyncStore
import Testing
import TestSupport

extension SyncdResilienceTests {
    /// A client of `WatchItems`, written with Python's reference `varlink` module, follows a feed
    /// while syncd backfills it, is SIGKILLed, restarts and syncs what arrived meanwhile, while
    /// the server's users delete and edit recent items (found by revalidation). The client
    /// reconnects from the last point it applied: replaying every change it printed into a
    /// dictionary gives exactly the store, it never gets a change twice (points only grow), and
    /// the store equals the server.
    @Test(.timeLimit(.minutes(5)))
    func aFollowerOfWatchItemsMissesNothingThroughAKill() async throws {
        let seed = Seed.resolve("watch-items")
        let feed = "home"
        let server = try await startServer(.init(feeds: [FeedDefinition(name: feed, initialCount: 1_500)], latencyMilliseconds: 1...5), faults: .init(seed: seed))
        let harness = try DaemonHarness(
            test: "watch-items", seed: seed,
            feeds: [FeedSetup(
                name: feed, url: try #require(server.feedURL(feed)), pageSize: 20, refreshInterval: "300ms",
                revalidate: (window: "200", interval: "300ms"))]
        )
        var random = SplitMix64(seed: seed)
        /// Deletes and edits a few of the newest 100 items, as the server's users would.
        func change() async throws {
            let newest = try await server.items(feed: feed).suffix(100).map(\.id)
            var picked = Set<String>()
            while picked.count < 6 { picked.insert(random.pick(newest)) }
            let chosen = Array(picked).sorted()
            try await server.deleteItems(feed: feed, ids: Array(chosen.prefix(3)))
            try await server.editItems(feed: feed, ids: Array(chosen.suffix(3)))
        }
        let script = harness.directory.file("follow.py"), changes = harness.directory.file("changes.jsonl")
        try Self.follower.write(toFile: script, atomically: true, encoding: .utf8)

        try await withCleanup {
            var process = try harness.start()
            _ = try await harness.waitUntilServing(process)
            let follower = try ChildProcess(["/usr/bin/env", "python3", script, harness.socketPath, feed, changes], logPath: harness.directory.file("follower.log"))
            // Killed mid-backfill, once the follower has seen some of it.
            do {
                try await waitUntil("the follower printed 200 changes", timeout: hangGuard * 2, interval: .milliseconds(100)) { Self.lines(changes).count >= 200 }
            } catch {
                Issue.record("\(error)\nthe follower printed \(Self.lines(changes).count) changes\n\(follower.output)\n\(harness.diagnostics())")
            }
            _ = await process.stop(signal: SIGKILL)
            _ = try await server.appendItems(feed: feed, count: 30)
            try await change()
            process = try harness.start()
            _ = try await harness.waitUntilServing(process)
            _ = try await server.appendItems(feed: feed, count: 25)
            try await change()
            let (synced, state) = await waitUntilSynced(harness, server: server, feeds: [feed], timeout: hangGuard * 4)
            #expect(synced, "syncd did not sync after the restart: \(state)\n\(harness.diagnostics())")

            // The store, read beside syncd (WAL readers do not block it), and its head once a
            // revalidation has brought the last edits.
            let store = try SQLiteFeedStore(path: harness.storePath, checkIntegrity: false)
            do {
                try await waitUntil("the store equals the server", timeout: hangGuard, interval: .milliseconds(100)) {
                    guard let stored = try? await store.items(feed: feed, offset: 0, limit: 100_000).map(\.payload),
                          let served = try? await server.items(feed: feed) else { return false }
                    return stored == served.reversed().map(\.jsonData)
                }
            } catch {
                Issue.record("\(error)\nthe store never equalled the server\n\(harness.diagnostics())")
            }
            let head = try await store.changeHead()
            do {
                try await waitUntil("the follower's last point is the store's head \(head)", timeout: hangGuard, interval: .milliseconds(100)) {
                    Self.lines(changes).last?["point"] as? String == head.description
                }
            } catch {
                Issue.record("\(error)\nthe follower's last point \(Self.lines(changes).last?["point"] ?? "none") is not the store's head \(head)")
            }
            _ = await follower.stop()
            _ = await process.stop()

            let printed = Self.lines(changes)
            var replayed: [String: NSObject] = [:]
            var last: Int64 = 0
            var repeated = 0
            for change in printed {
                guard let kind = change["kind"] as? String else { continue }  // a reconnect
                let seq = Int64((change["point"] as? String)?.split(separator: ":").last ?? "") ?? -1
                if kind == "reset" {
                    replayed = [:]
                } else {
                    if seq <= last { repeated += 1 }
                    last = seq
                }
                let id = change["id"] as? String ?? ""
                switch kind {
                case "inserted", "updated": replayed[id] = change["payload"] as? NSObject
                case "deleted", "evicted": replayed[id] = nil
                default: break
                }
            }
            #expect(repeated == 0, "\(repeated) changes came again or out of order")
            let stored = try await store.items(feed: feed, offset: 0, limit: 100_000)
            let truth = Dictionary(uniqueKeysWithValues: try stored.map { ($0.id, try JSONSerialization.jsonObject(with: $0.payload) as! NSObject) })
            #expect(replayed.count == truth.count, "replayed \(replayed.count) items, the store holds \(truth.count)")
            #expect(replayed == truth, "the replayed feed differs from the store")
            let served = try await server.items(feed: feed)
            #expect(stored.map(\.id) == served.reversed().map(\.id), "the store's items are not the server's")
            #expect(stored.map(\.payload) == served.reversed().map(\.jsonData), "edits did not all reach the store")
            #expect(printed.contains { $0["kind"] as? String == "deleted" }, "no deletion reached the follower")
            let reconnects = printed.filter { $0["reconnected"] != nil }.count
            print("[watch-items] \(printed.count) changes printed, \(reconnects) reconnects, \(truth.count) items")
        } cleanup: {
            await harness.stopAll()
            await server.stop()
        }
    }

    /// The printed changes, one JSON object per line (a line cut by a kill is skipped).
    static func lines(_ path: String) -> [[String: Any]] {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return [] }
        return text.split(separator: "\n").compactMap { line in
            (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any]
        }
    }

    /// Follows `WatchItems` and prints each change as a line, flushed; after a lost connection,
    /// reconnects from the last point printed (and notes it in a line of its own).
    static let follower = #"""
        import json, sys, time, varlink
        path, feed, out = sys.argv[1], sys.argv[2], sys.argv[3]
        point = None
        with open(out, "a") as log:
            while True:
                try:
                    with varlink.Client(address="unix:" + path) as client, client.open("io.syncd", namespaced=True) as syncd:
                        arguments = {"feed": feed}
                        if point is not None:
                            arguments["since"] = point
                        for reply in syncd.WatchItems(_more=True, **arguments):
                            change = {"kind": reply.kind, "point": reply.point}
                            if getattr(reply, "id", None) is not None:
                                change["id"] = reply.id
                            if getattr(reply, "payload", None) is not None:
                                change["payload"] = json.loads(json.dumps(reply.payload, default=lambda o: o.__dict__))
                            log.write(json.dumps(change) + "\n")
                            log.flush()
                            point = reply.point
                except Exception as error:
                    log.write(json.dumps({"reconnected": str(error)[:200]}) + "\n")
                    log.flush()
                    time.sleep(0.2)
        """#
}
