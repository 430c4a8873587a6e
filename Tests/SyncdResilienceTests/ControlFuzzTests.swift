import DemoFeedServer
import Foundation
import SyncControl
import Synchronization
import Testing
import TestSupport

extension SyncdResilienceTests {
    /// The control socket of a running syncd, fed garbage: random bytes, truncated JSON, valid
    /// JSON of the wrong shape, unknown methods, oversized messages, callers that hang up
    /// mid-call, half-open connections and a flood beyond the connection limit. syncd must not
    /// crash, must answer every complete message that is due a reply with a proper Varlink
    /// error, and must keep serving a well-behaved `SyncControlClient` throughout (except while
    /// every connection slot is taken) and afterwards.
    @Test(.timeLimit(.minutes(8)))
    func controlSocketSurvivesFuzzing() async throws {
        let seed = Seed.resolve("control-fuzz")
        var rng = SplitMix64(seed: seed)
        let feed = "home"
        let server = try await startServer(.init(feeds: [FeedDefinition(name: feed, initialCount: 300, itemsPerSecond: 2)]), faults: .init(seed: seed))
        let harness = try DaemonHarness(
            test: "control-fuzz", seed: seed,
            feeds: [FeedSetup(name: feed, url: try #require(server.feedURL(feed)), pageSize: 50, refreshInterval: "300ms")]
        )
        let socket = harness.socketPath
        let bystander = Bystander(client: harness.client, feed: feed)
        let held = SocketPool()

        try await withCleanup {
            let process = try harness.start()
            _ = try await harness.waitUntilServing(process)
            do {
                try await waitUntil("syncd loaded 300 items of the feed", timeout: hangGuard * 2, interval: .milliseconds(100)) {
                    ((try? await harness.status().feed(named: feed)?.itemCount) ?? 0) >= 300
                }
            } catch {
                Issue.record("\(error)\nsyncd did not load the feed before fuzzing\n\(harness.diagnostics())")
            }
            bystander.start()

            // A Watch whose client never reads, open during everything below and at shutdown.
            let stuckWatcher = try await onDedicatedThread { () throws -> RawSocket in
                let connection = try RawSocket(path: socket)
                try connection.sendMessage(#"{"method":"io.syncd.Watch","more":true}"#)
                return connection
            }

            var problems: [String] = []
            for phase in FuzzPhase.allCases where phase != .flood {
                bystander.enter(phase.rawValue)
                let cases = (0..<phase.caseCount).map { _ in rng.next() }
                problems += try await runConcurrently(cases, width: 4) { caseSeed in
                    var caseRNG = SplitMix64(seed: caseSeed)
                    return phase.run(socket: socket, rng: &caseRNG).map { "\(phase.rawValue) case seed \(caseSeed): \($0)" }
                }
                guard process.isRunning else {
                    Issue.record("syncd died during fuzz phase '\(phase.rawValue)'\n\(problems.prefix(10).joined(separator: "\n"))\n\(harness.diagnostics())")
                    return
                }
            }

            // Half-open connections that say nothing, or half a message, and stay.
            bystander.enter("half-open")
            for index in 0..<8 {
                let connection = try await onDedicatedThread { () throws -> RawSocket in
                    let connection = try RawSocket(path: socket)
                    if index % 2 == 1 { try connection.send(Array(#"{"method":"io.syncd.GetSt"#.utf8)) }
                    return connection
                }
                held.add([connection])
            }
            try await Task.sleep(for: .milliseconds(300))

            // More connections than the limit (64), all at once and all idle.
            bystander.enter(FuzzPhase.flood.rawValue)
            var flood = try await onDedicatedThread { () throws -> FloodTally in
                var sockets: [RawSocket] = []
                var refusedAtConnect = 0
                // A second per connect: a full backlog refuses in that time (and counts as
                // turned away), 100 of them stay well inside the hang guard.
                for _ in 0..<100 {
                    do { sockets.append(try RawSocket(path: socket, timeout: .seconds(1))) } catch { refusedAtConnect += 1 }
                }
                return FloodTally(sockets: sockets, refusedAtConnect: refusedAtConnect)
            }
            held.add(flood.sockets)
            // Those over the limit are closed by syncd right after it accepts them (they read
            // EOF), which a loaded machine may delay by seconds: wait until no more are open than
            // the slots that the 8 half-open connections and the stuck watcher leave.
            // Not met in time: the expectations below say what was left open.
            try? await waitUntil("syncd closed the connections over its limit", timeout: hangGuard, interval: .milliseconds(20)) {
                flood.update()
                return flood.open + 8 + 1 <= 64
            }
            print("[control-fuzz] flood of 100 over 8 half-open: \(flood.open) held open, \(flood.closed) closed by syncd, \(flood.refusedAtConnect) refused at connect")
            #expect(process.isRunning, "syncd died under the connection flood\n\(harness.diagnostics())")
            #expect(flood.open + 8 + 1 <= 64, "more connections held open than the limit (64): \(flood.open) + 8 half-open + 1 watcher")
            #expect(flood.closed + flood.refusedAtConnect >= 100 - 64, "the connection limit did not turn clients away: \(flood.closed) closed, \(flood.refusedAtConnect) refused")
            #expect(flood.unexpected.isEmpty, "idle connections got messages: \(flood.unexpected)")
            held.closeAll()

            // After: slots come back and the well-behaved client is served again.
            bystander.enter("recovering")
            do {
                try await waitUntil("the control socket answers GetStatus again", timeout: hangGuard, interval: .milliseconds(50)) {
                    (try? await harness.status()) != nil
                }
            } catch {
                Issue.record("\(error)\nthe control socket did not recover after the flood\n\(harness.diagnostics())")
            }
            bystander.enter("after")
            // Not met in time: the expectations below say so, with the bystander's report.
            try? await waitUntil("the well-behaved client is served after the flood", timeout: hangGuard, interval: .milliseconds(20)) {
                bystander.report().successes["after", default: 0] > 0
            }
            try await bystander.finish()

            #expect(process.isRunning, "syncd died\n\(harness.diagnostics())")
            #expect(problems.isEmpty, "\(problems.count) problems:\n\(problems.prefix(25).joined(separator: "\n"))\n\(harness.diagnostics())")
            let report = bystander.report()
            print("[control-fuzz] well-behaved client: \(report.summary)")
            #expect(report.failuresOutsideFlood.isEmpty, "the well-behaved client failed while syncd was being fuzzed:\n\(report.failuresOutsideFlood.prefix(10).joined(separator: "\n"))\n\(harness.diagnostics())")
            #expect(report.successes["after", default: 0] > 0, "the well-behaved client was not served after the flood")
            #expect(report.totalSuccessesOutsideFlood > 10, "the well-behaved client was hardly served: \(report.summary)")

            // Syncing went on: the feed (growing 2 items a second) is caught up again.
            let served = try await server.items(feed: feed).count
            do {
                try await waitUntil("syncd caught up with the server's \(served) items", timeout: hangGuard * 2, interval: .milliseconds(100)) {
                    ((try? await harness.status().feed(named: feed)?.itemCount) ?? 0) >= served
                }
            } catch {
                Issue.record("\(error)\nsyncd stopped syncing after the fuzzing (server has \(served) items)\n\(harness.diagnostics())")
            }
            let client = harness.client
            let page = try await withHangGuard("ListItems from syncd") { try await client.items(feed: feed, limit: 3) }
            #expect(page.items.count == 3)
            #expect(!process.output.contains("Fatal error"), "syncd logged a fatal error\n\(harness.diagnostics())")

            // Shutdown is not held up by the Watch client that never read a byte: one that
            // waited for it would wait for good, well past the hang guard.
            let started = ContinuousClock.now
            let exitStatus = await process.stop(signal: SIGTERM)
            #expect(exitStatus == 0, "syncd exited \(exitStatus) on SIGTERM (after \(ContinuousClock.now - started); 137: still running \(hangGuard) after it, killed) with a stuck Watch client\n\(harness.diagnostics())")
            withExtendedLifetime(stuckWatcher) {}
        } cleanup: {
            bystander.stop()
            held.closeAll()
            await harness.stopAll()
            await stopServerInCleanup(server)
        }
    }
}

/// Runs `work` for every input on its own thread, `width` at a time; concatenates the results.
func runConcurrently<Input: Sendable>(_ inputs: [Input], width: Int, _ work: @escaping @Sendable (Input) -> [String]) async throws -> [String] {
    var results: [String] = []
    var start = 0
    while start < inputs.count {
        let batch = inputs[start..<min(inputs.count, start + width)]
        start += width
        try await withThrowingTaskGroup(of: [String].self) { group in
            for input in batch { group.addTask { try await onDedicatedThread { work(input) } } }
            for try await result in group { results += result }
        }
    }
    return results
}

/// Connections kept open on purpose, closed together.
final class SocketPool: Sendable {
    private let sockets = Mutex<[RawSocket]>([])
    func add(_ more: [RawSocket]) { sockets.withLock { $0 += more } }
    func closeAll() { sockets.withLock { $0.removeAll() } }
}

/// The flood's connections, each classified once syncd has closed it or sent something on it.
struct FloodTally: Sendable {
    enum State: Sendable {
        case open
        case closed
        case spoke
    }

    let sockets: [RawSocket]
    /// Connections that could not even be made (a full backlog): turned away too.
    let refusedAtConnect: Int
    private var states: [State]
    /// What arrived on idle connections, which should get nothing at all.
    private(set) var unexpected: [String] = []

    init(sockets: [RawSocket], refusedAtConnect: Int) {
        self.sockets = sockets
        self.refusedAtConnect = refusedAtConnect
        states = Array(repeating: .open, count: sockets.count)
    }

    var open: Int { states.filter { $0 == .open }.count }
    var closed: Int { states.filter { $0 == .closed }.count }

    /// Looks at every connection still open, without waiting.
    mutating func update() {
        for (index, connection) in sockets.enumerated() where states[index] == .open {
            switch connection.poll() {
            case .eof, .reset: states[index] = .closed
            case .timeout: break
            case .message(let bytes):
                states[index] = .spoke
                unexpected.append(String(decoding: bytes.prefix(200), as: UTF8.self))
            }
        }
    }
}
