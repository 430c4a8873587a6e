import DemoFeedServer
import Foundation
import Testing
import TestSupport

extension SyncdResilienceTests {
    /// SIGKILL the real daemon at random moments while it backfills a feed of thousands of items
    /// that keeps growing, served with latency so kills land mid-request and mid-commit. After
    /// every kill the store must be intact, free of duplicates, and hold exactly one contiguous
    /// slice of the server's feed, with cursors at its edges; after the last restart it must
    /// converge to the whole feed.
    @Test(.timeLimit(.minutes(12)))
    func sigkillAtRandomMomentsNeverLeavesAGapOrADuplicate() async throws {
        let seed = Seed.resolve("sigkill")
        var rng = SplitMix64(seed: seed)
        let kills = 36
        let feed = "home"
        let server = try await startServer(.init(
            feeds: [FeedDefinition(name: feed, initialCount: 6_000)],
            latencyMilliseconds: 2...40
        ), faults: .init(seed: seed))
        let harness = try DaemonHarness(
            test: "sigkill", seed: seed,
            feeds: [FeedSetup(name: feed, url: try #require(server.feedURL(feed)), pageSize: 10, refreshInterval: "700ms", timeout: "3s")]
        )
        let scratch = harness.directory.file("snapshot")

        // Items keep appearing while the daemon is being killed.
        let growthSeed = rng.next()
        let growth = BoundedTask {
            var growthRNG = SplitMix64(seed: growthSeed)
            while !Task.isCancelled {
                try? await Task.sleep(for: .milliseconds(growthRNG.int(in: 100...500)))
                _ = try? await server.appendItems(feed: feed, count: growthRNG.int(in: 0...3))
            }
        }

        try await withCleanup {
            var history: [String] = []
            var killsWithRequestInFlight = 0
            var previousCount = 0
            var progressed = 0
            for round in 0..<kills {
                let process = try harness.start()
                let runStart = ContinuousClock.now
                // Half the rounds kill at a random moment (start-up included); the others wait
                // for a feed request to arrive, then kill within its latency window, when the
                // response is being sent, parsed or committed.
                let targeted = rng.chance(0.5)
                try await Task.sleep(for: .milliseconds(rng.int(in: targeted ? 150...900 : 30...1_400)))
                if targeted {
                    let seen = await server.requestCount(feed: feed)
                    let deadline = ContinuousClock.now + .seconds(2)
                    while await server.requestCount(feed: feed) == seen, ContinuousClock.now < deadline {
                        try await Task.sleep(for: .milliseconds(1))
                    }
                    try await Task.sleep(for: .milliseconds(rng.int(in: 0...45)))
                }
                let delay = ContinuousClock.now - runStart
                guard process.isRunning else {
                    let exitStatus = await process.stop()
                    Issue.record("syncd exited on its own in round \(round) (status \(exitStatus))\n\(harness.diagnostics())")
                    return
                }
                let killedAt = ContinuousClock.now
                await process.stop(signal: SIGKILL)
                let recent = await server.requests(feed: feed).filter { killedAt - $0.receivedAt < .milliseconds(60) }
                if !recent.isEmpty { killsWithRequestInFlight += 1 }

                let served = try await server.items(feed: feed)
                let snapshot = try StoreSnapshot.read(storePath: harness.storePath, feed: feed, scratch: scratch)
                let line = "round \(round): killed \(targeted ? "near a request" : "at random") after \(delay), \(snapshot.summary)"
                history.append(line)
                if snapshot.items.count != previousCount { progressed += 1 }
                previousCount = snapshot.items.count
                let problems = snapshot.problems(against: served)
                if !problems.isEmpty {
                    Issue.record("""
                        store inconsistent after SIGKILL in round \(round) (killed \(delay) after start):
                        \(problems.joined(separator: "\n"))
                        history:
                        \(history.joined(separator: "\n"))
                        \(harness.diagnostics())
                        """)
                    return
                }
            }
            print("[sigkill] \(kills) kills, \(killsWithRequestInFlight) within 60 ms of a feed request, \(progressed) changed the store")
            print(history.joined(separator: "\n"))

            growth.cancel()
            try await growth.value("the feed's growth")

            // Let the last run finish: the store must then be the server's feed, exactly. The
            // window is a hang guard: thousands of pages with latency take what they take on a
            // loaded machine.
            let process = try harness.start()
            _ = try await harness.waitUntilServing(process)
            let syncStart = ContinuousClock.now
            let (synced, state) = await waitUntilSynced(harness, server: server, feeds: [feed], timeout: .seconds(360))
            print("[sigkill] converged in \(ContinuousClock.now - syncStart): \(synced)")
            #expect(synced, "syncd did not converge after the kills: \(state)\n\(harness.diagnostics())")
            let status = await process.stop(signal: SIGTERM)
            #expect(status == 0, "syncd exited \(status) on SIGTERM\n\(harness.diagnostics())")

            let served = try await server.items(feed: feed)
            let final = try StoreSnapshot.read(storePath: harness.storePath, feed: feed, scratch: scratch)
            let problems = final.problems(against: served)
            #expect(problems.isEmpty, "final store: \(problems.joined(separator: "\n"))\n\(harness.diagnostics())")
            #expect(final.ids == served.map(\.id), "final store \(final.summary) is not the server's feed of \(served.count) items\n\(harness.diagnostics())")
            #expect(final.endReached)
        } cleanup: {
            growth.cancel()
            await harness.stopAll()
            await stopServerInCleanup(server)
        }
    }
}
