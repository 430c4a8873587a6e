import DemoFeedServer
import Foundation
import SyncdTesting
import Synchronization
import Testing
import TestSupport

extension SyncdResilienceTests {
    /// Faults rolled for every feed request during the soak (the server's seeded generator
    /// picks them): errors with and without `Retry-After`, stalls past syncd's timeout, broken
    /// bodies, resets. About a third of all requests fail.
    static let soakFaults: [RandomFault] = [
        RandomFault(fault: .status(429, retryAfter: .seconds(2)), probability: 0.05),
        RandomFault(fault: .status(503, retryAfter: .seconds(1)), probability: 0.05),
        RandomFault(fault: .status(503, retryAfter: .date(secondsAhead: 2)), probability: 0.03),
        RandomFault(fault: .status(429, retryAfter: nil), probability: 0.02),
        RandomFault(fault: .status(500, retryAfter: nil), probability: 0.04),
        RandomFault(fault: .stall(.headers), probability: 0.02),
        RandomFault(fault: .stall(.body), probability: 0.015),
        RandomFault(fault: .malformed, probability: 0.03),
        RandomFault(fault: .truncated, probability: 0.03),
        RandomFault(fault: .reset(.headers), probability: 0.03),
        RandomFault(fault: .reset(.body), probability: 0.02),
        RandomFault(fault: .latency(milliseconds: 400), probability: 0.03),
        // Over syncd's max_body_bytes (64 KiB here), declared or chunked.
        RandomFault(fault: .oversized(bytes: 100_000, chunked: false), probability: 0.01),
        RandomFault(fault: .oversized(bytes: 100_000, chunked: true), probability: 0.01),
    ]

    /// syncd against a server injecting random faults, for a bounded time while items appear:
    /// the process must stay alive throughout, never send a request for a feed's direction
    /// before a `Retry-After` it was given has passed, and, once the faults stop, converge to
    /// exactly the server's feeds.
    @Test(.timeLimit(.minutes(12)))
    func soakAgainstAFaultInjectingServer() async throws {
        let seed = Seed.resolve("soak")
        var rng = SplitMix64(seed: seed)
        let soakDuration = Duration.seconds(ProcessInfo.processInfo.environment["SYNCD_RESILIENCE_SOAK_SECONDS"].flatMap(Int.init) ?? 30)
        let feeds = [FeedDefinition(name: "alpha", initialCount: 3_000), FeedDefinition(name: "beta", initialCount: 1_200)]
        // Restarted fault-free on the same port below: a port outside the ephemeral range, so
        // no other test's server or connection can take it in between.
        let faulty = try await startServerOnAFixedPort(
            .init(feeds: feeds, latencyMilliseconds: 0...40),
            faults: .init(randomFaults: Self.soakFaults, seed: seed, stallLimit: .seconds(5)))
        let port = try #require(faulty.port)
        let harness = try DaemonHarness(
            test: "soak", seed: seed,
            feeds: feeds.map { FeedSetup(name: $0.name, url: "http://127.0.0.1:\(port)/feeds/\($0.name)", pageSize: 20, refreshInterval: "300ms", timeout: "1500ms", maxBodyBytes: 65_536) },
            // Retries come fast, so a Retry-After ignored would show well inside its delay.
            retry: SyncdConfig.Retry(base: "100ms", cap: "1s", reconnectSpread: "0s", lines: ["multiplier = 2"])
        )
        let growthSeed = rng.next()
        let growth = BoundedTask {
            var growthRNG = SplitMix64(seed: growthSeed)
            while !Task.isCancelled {
                try? await Task.sleep(for: .milliseconds(growthRNG.int(in: 100...600)))
                _ = try? await faulty.appendItems(feed: growthRNG.pick(feeds).name, count: growthRNG.int(in: 1...3))
            }
        }
        let calm = Mutex<DemoFeedServer?>(nil)

        try await withCleanup {
            let process = try harness.start()
            _ = try await harness.waitUntilServing(process)

            // The soak: the process is watched all along.
            let soakEnd = ContinuousClock.now + soakDuration
            while ContinuousClock.now < soakEnd {
                guard process.isRunning else {
                    let status = await process.stop()
                    Issue.record("syncd died during the soak (exit status \(status))\n\(harness.diagnostics())")
                    return
                }
                try await Task.sleep(for: .milliseconds(50))
            }
            growth.cancel()
            try await growth.value("the feeds' growth")
            #expect(process.isRunning, "syncd died during the soak\n\(harness.diagnostics())")

            // Faults stop: the same feeds (items are a pure function of their sequence) served
            // on the same port without faults.
            var counts: [String: Int] = [:]
            var logs: [String: [RequestRecord]] = [:]
            for feed in feeds {
                counts[feed.name] = try await faulty.items(feed: feed.name).count
                logs[feed.name] = await faulty.requests(feed: feed.name)
            }
            try await stopServer(faulty)
            let fixed = try await startServer(.init(
                port: port, feeds: feeds.map { var f = $0; f.initialCount = counts[f.name]!; return f }), faults: .init(seed: seed))
            calm.withLock { $0 = fixed }
            for feed in feeds {
                #expect(try await fixed.items(feed: feed.name) == faulty.items(feed: feed.name), "the fault-free server serves the same items")
            }

            // A hang guard, not a performance bound: the backlog left by the faults takes what it
            // takes on a loaded machine.
            let syncStart = ContinuousClock.now
            let (synced, state) = await waitUntilSynced(harness, server: fixed, feeds: feeds.map(\.name), timeout: .seconds(360))
            print("[soak] converged in \(ContinuousClock.now - syncStart): \(synced)")
            #expect(synced, "syncd did not converge once the faults stopped: \(state)\n\(harness.diagnostics())")
            #expect(process.isRunning, "syncd died after the soak\n\(harness.diagnostics())")
            let exitStatus = await process.stop(signal: SIGTERM)
            #expect(exitStatus == 0, "syncd exited \(exitStatus) on SIGTERM\n\(harness.diagnostics())")

            // Nothing lost, nothing doubled.
            for feed in feeds {
                let served = try await fixed.items(feed: feed.name)
                let stored = try StoreSnapshot.read(storePath: harness.storePath, feed: feed.name, scratch: harness.directory.file("snapshot-\(feed.name)"))
                let problems = stored.problems(against: served)
                #expect(problems.isEmpty, "\(feed.name): \(problems.joined(separator: "\n"))\n\(harness.diagnostics())")
                #expect(stored.ids == served.map(\.id), "\(feed.name): store \(stored.summary) is not the server's \(served.count) items\n\(harness.diagnostics())")
            }

            // Retry-After: checked over both servers' logs, which share one monotonic clock.
            var checked = 0
            var faultsSeen: [String: Int] = [:]
            var violations: [String] = []
            for feed in feeds {
                let requests = (logs[feed.name] ?? []) + (await fixed.requests(feed: feed.name))
                for record in requests { if let fault = record.fault { faultsSeen["\(fault)", default: 0] += 1 } }
                let result = RetryAfterAudit.audit(requests)
                checked += result.checked
                violations += result.violations.map { "\(feed.name): \($0)" }
                if let tightest = result.tightest { print("[soak] \(feed.name): closest retry \(tightest)") }
            }
            let totalRequests = logs.values.map(\.count).reduce(0, +)
            print("[soak] \(totalRequests) requests during the soak; faults injected: \(faultsSeen.sorted { $0.key < $1.key }.map { "\($0.key)×\($0.value)" }.joined(separator: ", ")); \(checked) Retry-After delays checked")
            #expect(checked > 0, "no Retry-After was exercised; the soak proves nothing about it")
            #expect(violations.isEmpty, "Retry-After not honoured:\n\(violations.prefix(20).joined(separator: "\n"))\n\(harness.diagnostics())")
        } cleanup: {
            growth.cancel()
            await harness.stopAll()
            await stopServerInCleanup(faulty)
            if let fixed = calm.withLock({ $0 }) { await stopServerInCleanup(fixed) }
        }
    }
}

/// Checks a feed's request log against the `Retry-After` delays the server handed out.
enum RetryAfterAudit {
    /// For each 429/503 with `Retry-After: N` (a request that reached the handler at `t`), the next
    /// request of the same feed and direction must not arrive before `t + N`. The response left
    /// the server after `t`, so this is a lower bound of what syncd owed. An HTTP-date is whole
    /// seconds on both ends (it and the `Date` header), so up to a second of it may be rounding.
    static func audit(_ requests: [RequestRecord]) -> (checked: Int, violations: [String], tightest: String?) {
        var checked = 0
        var violations: [String] = []
        var tightest: (slack: Duration, text: String)?
        for (index, record) in requests.enumerated() {
            guard case .status(let code, let retryAfter?)? = record.fault else { continue }
            let floor: Duration
            switch retryAfter {
            case .seconds(let seconds): floor = .seconds(seconds)
            case .date(let ahead): floor = .seconds(max(0, ahead - 1))
            }
            guard let next = requests[(index + 1)...].first(where: { $0.kind == record.kind }) else { continue }
            checked += 1
            let gap = next.receivedAt - record.receivedAt
            if tightest == nil || gap - floor < tightest!.slack {
                tightest = (gap - floor, "\(gap) after a \(code) with Retry-After \(retryAfter) (\(record.kind))")
            }
            if gap < floor {
                violations.append("\(record.kind) request \(record.query) got \(code) with Retry-After \(retryAfter); the next \(next.kind) request (\(next.query), fault \(next.fault.map { "\($0)" } ?? "none")) came \(gap) later")
            }
        }
        return (checked, violations, tightest?.text)
    }
}

extension SyncdResilienceTests {
    /// SIGTERM while every feed request hangs (a server that accepted and never answers, with
    /// syncd's own timeout far away): syncd must still stop promptly and cleanly, not wait for
    /// the requests, and the store must stay consistent.
    ///
    /// What is checked is that the stop does not wait for the request: syncd's request timeout
    /// (10 minutes) and the server's stall (15) are far beyond the stop's bound (the hang guard),
    /// so a stop that waited would be killed. How fast a clean stop is depends on the machine
    /// (the unit gives it TimeoutStopSec=20s, an idle machine needs well under a second): the
    /// time is printed, not asserted.
    @Test(.timeLimit(.minutes(4)))
    func sigtermIsNotHeldUpByHangingRequests() async throws {
        let seed = Seed.resolve("sigterm-stalled")
        let feed = "home"
        let server = try await startServer(
            .init(feeds: [FeedDefinition(name: feed, initialCount: 500)]),
            faults: .init(randomFaults: [RandomFault(fault: .stall(.headers), probability: 1)], seed: seed, stallLimit: .seconds(900)))
        let harness = try DaemonHarness(
            test: "sigterm-stalled", seed: seed,
            feeds: [FeedSetup(name: feed, url: try #require(server.feedURL(feed)), timeout: "10m")]
        )
        try await withCleanup {
            let process = try harness.start()
            _ = try await harness.waitUntilServing(process)
            do {
                try await waitUntil("syncd's first request is held by the stalling server", timeout: hangGuard, interval: .milliseconds(20)) {
                    await server.stalledRequestCount() > 0
                }
            } catch {
                Issue.record("\(error)\nsyncd never sent its first request\n\(harness.diagnostics())")
            }
            let started = ContinuousClock.now
            let exitCode = await process.stop(signal: SIGTERM)
            let took = ContinuousClock.now - started
            print("[sigterm-stalled] exit \(exitCode) after \(took) with a request hanging")
            #expect(exitCode == 0, "syncd exited \(exitCode) (137: still running \(hangGuard) after SIGTERM, killed) with a request hanging; took \(took)\n\(harness.diagnostics())")
            let snapshot = try StoreSnapshot.read(storePath: harness.storePath, feed: feed, scratch: harness.directory.file("snapshot"))
            #expect(snapshot.problems(against: try await server.items(feed: feed)).isEmpty)
        } cleanup: {
            await harness.stopAll()
            await stopServerInCleanup(server)
        }
    }
}
