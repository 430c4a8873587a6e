import ConnectivityPolicy
import Foundation
import NetlinkMonitor
import Testing
import TestSupport

/// Randomized link, address, route and policy-rule operations against a real kernel: at every
/// checkpoint the monitor's snapshot must equal a fresh kernel dump (with fresh route lookups),
/// each published verdict must equal the policy's verdict for that dump, and the verdict for
/// each host must agree with `ip route get` (iproute2's own request and parser).
///
/// Runs fixed seeds plus one random seed, printed (set `RESILIENCE_SEED` to replay it, and
/// `RESILIENCE_STEPS` to change the length of each sequence). A failure names the seed, the
/// step, the operations since the previous checkpoint and the difference from the kernel.
@Suite(.enabled(if: Privileges.rootTestsEnabled, Comment(rawValue: Privileges.skipReason)))
struct RandomizedOperationTests {
    static let fixedSeeds: [UInt64] = [1, 0x5EED, 0xC0FFEE]
    static let randomSeed: UInt64 = {
        if let text = ProcessInfo.processInfo.environment["RESILIENCE_SEED"], let seed = UInt64(text) { return seed }
        return UInt64.random(in: 0...UInt64.max)
    }()
    static var seeds: [UInt64] {
        print("ResilienceTests: random seed \(randomSeed) (replay with RESILIENCE_SEED=\(randomSeed))")
        return fixedSeeds + [randomSeed]
    }
    static var steps: Int { Int(ProcessInfo.processInfo.environment["RESILIENCE_STEPS"] ?? "") ?? 800 }

    /// A host that only a specific route (or a blackhole) decides about.
    static let host4 = IPAddress("198.51.100.7")!
    static let host6 = IPAddress("2001:db8:100::7")!

    @Test(arguments: seeds)
    func monitorMatchesKernelAtEveryCheckpoint(seed: UInt64) async throws {
        try Privileges.requireRoot()
        let h = try await ResilienceHarness()
        let destinations: [Destination] = [.internet, .addresses([Self.host4, Self.host6]), .addresses([Self.host4]), .addresses([Self.host6])]
        let logs = destinations.map { _ in VerdictLog() }
        var consumers: [Task<Void, Never>] = []
        for (destination, log) in zip(destinations, logs) {
            let stream = ConnectivityMonitor.verdicts(from: h.monitor, for: destination, settle: .zero)
            consumers.append(Task { for await verdict in stream { log.append(verdict) } })
        }
        defer { for consumer in consumers { consumer.cancel() } }

        var rng = SplitMix64(seed: seed)
        var sequence: UInt32 = 1
        var step = 0
        var checkpoints = 0
        var history: [String] = []
        while step < Self.steps {
            // Segments of varying length: single changes and bursts that arrive as one batch.
            let length = min(Self.steps - step, Int.random(in: 1...24, using: &rng))
            let segment = (0..<length).map { _ in Self.randomOperation(&rng) }
            history.append(contentsOf: segment.enumerated().map { "#\(step + $0.offset) \($0.element)" })
            try await h.apply(segment, sequence: &sequence)
            step += length
            checkpoints += 1

            let failure = try await h.waitForAgreement(lookingUp: [Self.host4, Self.host6] + Destination.internetProbes) { dump in
                zip(destinations, logs).allSatisfy { destination, log in
                    log.latest == ConnectivityPolicy.evaluate(dump, for: destination)
                }
            }
            var oracleDisagreement: String?
            if failure == nil, let dump = try? await h.kernel(lookingUp: [Self.host4, Self.host6] + Destination.internetProbes) {
                for (address, log) in [(Self.host4, logs[2]), (Self.host6, logs[3])] {
                    let oracle = try await IPRouteGet.ask(address, in: h.client)
                    if let verdict = log.latest, !oracle.agrees(with: verdict, for: address, in: dump) {
                        oracleDisagreement = "\(address): monitor published \(verdict), ip route get says \(oracle)"
                    }
                }
            }
            if let disagreement = oracleDisagreement {
                Issue.record("""
                seed \(seed) (0x\(String(seed, radix: 16))), checkpoint \(checkpoints) after step \(step - 1): \(disagreement)
                  operations since the previous checkpoint:
                    \(history.suffix(length).joined(separator: "\n    "))
                  earlier operations (last 40):
                    \(history.dropLast(length).suffix(40).joined(separator: "\n    "))
                """)
                return
            }
            if let dump = failure {
                let verdicts = zip(destinations, logs).map { destination, log in
                    "\(destination): monitor published \(log.latest.map { "\($0)" } ?? "nothing"), kernel dump gives \(ConnectivityPolicy.evaluate(dump, for: destination))"
                }
                Issue.record("""
                seed \(seed) (0x\(String(seed, radix: 16))), checkpoint \(checkpoints) after step \(step - 1): monitor disagrees with the kernel
                  \(verdicts.joined(separator: "\n  "))
                  \(SnapshotDiff(monitor: h.monitor.snapshot, kernel: dump))
                  operations since the previous checkpoint:
                    \(history.suffix(length).joined(separator: "\n    "))
                  earlier operations (last 40):
                    \(history.dropLast(length).suffix(40).joined(separator: "\n    "))
                  monitor statistics: \(h.monitor.statistics)
                """)
                return
            }
        }
        print("ResilienceTests: seed \(seed): \(step) steps, \(checkpoints) checkpoints agreed with the kernel; \(h.monitor.statistics)")
    }

    /// One random change; the pools are small so that adds and deletes meet often.
    static func randomOperation(_ rng: inout SplitMix64) -> Operation {
        let link = ResilienceHarness.link
        let gw4 = ResilienceHarness.gateway4, gw6 = ResilienceHarness.gateway6
        let v4 = ["10.77.0.1/24", "10.77.0.21/24", "10.77.5.1/24"]
        let v6 = ["fd00:77::1/64", "fd00:77::21/64"]
        switch Int.random(in: 0..<116, using: &rng) {
        case 0..<5: return .clientLink(up: false)
        case 5..<13: return .clientLink(up: true)
        case 13..<18: return .peerLink(up: false)
        case 18..<26: return .peerLink(up: true)
        case 26..<35: return .ip("address add \(rng.pick(v4)) dev \(link)")
        case 35..<39: return .ip("address del \(rng.pick(v4)) dev \(link)")
        case 39..<41: return .ip("address add 10.77.9.1/24 dev \(link) scope link")
        case 41..<49: return .ip("address add \(rng.pick(v6)) dev \(link) nodad")
        case 49..<53: return .ip("address del \(rng.pick(v6)) dev \(link)")
        case 53..<62: return .ip(rng.pick(["route replace default via \(gw4) dev \(link)", "route add default via \(gw4) dev \(link) metric 200"]))
        case 62..<67: return .ip(rng.pick(["route del default", "route del default metric 200"]))
        case 67..<72: return .ip("route replace ::/0 via \(gw6) dev \(link)")
        case 72..<75: return .ip("route del ::/0")
        case 75..<79: return .ip(rng.pick(["route replace 198.51.100.0/24 via \(gw4)", "route replace 198.51.100.0/25 dev \(link)"]))
        case 79..<82: return .ip(rng.pick(["route del 198.51.100.0/24", "route del 198.51.100.0/25"]))
        case 82..<85: return .ip(rng.pick(["route replace 2001:db8:100::/48 via \(gw6)", "route del 2001:db8:100::/48"]))
        case 85..<89: return .ip(rng.pick(["route add blackhole 198.51.100.7/32", "route add unreachable 198.51.100.0/26", "route add prohibit 2001:db8:100::/64"]))
        case 89..<94: return .ip(rng.pick(["route del blackhole 198.51.100.7/32", "route del unreachable 198.51.100.0/26", "route del prohibit 2001:db8:100::/64"]))
        case 94..<97: return .ip("route flush dev \(link)")
        case 97..<100: return .ip("address flush dev \(link)")
        // Policy routing: tables and rules the snapshot model does not read, and throw routes.
        case 100..<103: return .ip(rng.pick([
            "route replace 198.51.100.0/24 via \(gw4) table 100", "route replace unreachable 198.51.100.0/24 table 100",
            "route replace 2001:db8:100::/48 via \(gw6) table 100", "route replace prohibit 2001:db8:100::/48 table 100",
        ]))
        case 103..<105: return .ip(rng.pick(["route flush table 100", "route del 198.51.100.0/24 table 100"]))
        case 105..<109: return .ip(rng.pick([
            "rule add to 198.51.100.0/24 lookup 100 priority 100", "rule add to 2001:db8:100::/48 lookup 100 priority 100",
            "rule add to 198.51.100.7 prohibit priority 90", "rule add to 198.51.100.0/24 blackhole priority 95",
        ]))
        case 109..<113: return .ip(rng.pick(["rule del priority 100", "rule del priority 90", "rule del priority 95", "rule del to 2001:db8:100::/48 priority 100"]))
        default: return .ip(rng.pick(["route add throw 198.51.100.0/25", "route del throw 198.51.100.0/25"]))
        }
    }
}
