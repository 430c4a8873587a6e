import ConnectivityPolicy
import NameResolution
import NetlinkMonitor
import Reachability
import Synchronization
import Testing
import TestSupport

/// The ladder for one host, on a real monitor in a namespace: the kernel's route, a name whose
/// answers the test scripts, and the evidence a feed's requests and probes report.
@Suite(.enabled(if: Privileges.rootTestsEnabled, Comment(rawValue: Privileges.skipReason)))
struct HostReachabilityTests {
    static let server = IPAddress(VethTopology.serverAddress)!
    static let far = IPAddress("10.88.0.2")!

    final class Rig: Sendable {
        let topology: VethTopology
        let monitor: NetlinkMonitor
        final class Log: Sendable {
            let values = Mutex<[Verdict]>([])
        }
        let log = Log()
        let tasks = Mutex<[Task<Void, Never>]>([])

        init() async throws {
            topology = try await VethTopology()
            monitor = NetlinkMonitor(configuration: .init(networkNamespacePath: topology.client.path))
            try await monitor.start()
        }

        deinit {
            tasks.withLock { for task in $0 { task.cancel() } }
        }

        /// Follows `reachability`: runs it and records its verdicts.
        func follow(_ reachability: HostReachability<ContinuousClock>, resolver: NameResolver? = nil) {
            let stream = reachability.verdicts()
            let log = self.log
            var started = [
                Task { for await verdict in stream { log.values.withLock { $0.append(verdict) } } },
                Task { await reachability.run() },
            ]
            if let resolver { started.append(Task { try? await resolver.run() }) }
            tasks.withLock { $0 += started }
        }

        var latest: Verdict? { log.values.withLock { $0.last } }

        func expect(_ what: String, sourceLocation: SourceLocation = #_sourceLocation, _ predicate: (Verdict) -> Bool) async throws {
            let deadline = ContinuousClock.now + .seconds(10)
            while !(latest.map(predicate) ?? false) {
                guard ContinuousClock.now < deadline else {
                    Issue.record("\(what): latest \(String(describing: latest))", sourceLocation: sourceLocation)
                    return
                }
                try await Task.sleep(for: .milliseconds(10))
            }
        }
    }

    static func limited(_ reason: LimitedReason) -> (Verdict) -> Bool {
        { verdict in
            if case .limited(let limitation) = verdict { return limitation.reason == reason }
            return false
        }
    }

    @Test func unansweredRequestsMarkTheServerUntilTheProbeGetsThrough() async throws {
        try Privileges.requireRoot()
        let rig = try await Rig()
        let answers = Mutex(false)
        let reachability = HostReachability(
            destination: .addresses([Self.server]), monitor: rig.monitor,
            configuration: .init(settle: .zero, unansweredThreshold: 2, probeDelay: .milliseconds(20), maxProbeDelay: .milliseconds(100)),
            probe: { _ in answers.withLock { $0 } }
        )
        rig.follow(reachability)
        try await rig.expect("online") { $0.isOnline }
        reachability.requestFailed(unanswered: "10.77.0.2: connection timed out")
        try await Task.sleep(for: .milliseconds(100))
        #expect(rig.latest?.isOnline == true, "one lost connection is not an outage")
        // An answer of any kind in between resets the count.
        reachability.requestFailed(unanswered: nil)
        reachability.requestFailed(unanswered: "10.77.0.2: connection timed out")
        try await Task.sleep(for: .milliseconds(100))
        #expect(rig.latest?.isOnline == true)
        reachability.requestFailed(unanswered: "10.77.0.2: connection timed out")
        try await rig.expect("server unreachable", Self.limited(.serverUnreachable))
        guard case .limited(let limitation)? = rig.latest else { return }
        #expect(limitation.detail == "10.77.0.2: connection timed out" && limitation.path?.link == VethTopology.clientLink)
        // Probes fail for a while, then the server answers.
        try await Task.sleep(for: .milliseconds(200))
        #expect(Self.limited(.serverUnreachable)(rig.latest!))
        answers.withLock { $0 = true }
        try await rig.expect("online once the probe got through") { $0.isOnline }
        // Offline explains everything: a link without carrier is offline, not limited.
        reachability.portalChanged("http://portal.example/login")
        try await rig.expect("portal", Self.limited(.portal))
        try await rig.topology.server.ip("link", "set", VethTopology.serverLink, "down")
        try await rig.expect("offline wins over the portal") { $0 == .offline(.noCarrier) }
        try await rig.topology.server.ip("link", "set", VethTopology.serverLink, "up")
        try await rig.expect("portal again") { Self.limited(.portal)($0) }
        reachability.portalChanged(nil)
        try await rig.expect("signed in") { $0.isOnline }
    }

    @Test func aNameIsFollowedThroughFailureAndMoves() async throws {
        try Privileges.requireRoot()
        let rig = try await Rig()
        try await rig.topology.server.ip("addr", "add", "10.88.0.2/32", "dev", VethTopology.serverLink)
        try await rig.topology.client.ip("route", "add", "10.88.0.0/24", "via", VethTopology.serverAddress)
        let answer = Mutex<Resolution>(.failed(ResolutionFailure(host: "feed.test", code: -3, message: "Temporary failure in name resolution")))
        let resolver = NameResolver(configuration: .init(refreshInterval: .seconds(3600), watchedFiles: []), lookup: { _ in answer.withLock { $0 } })
        let reachability = HostReachability(destination: .host("feed.test"), monitor: rig.monitor, resolver: resolver, configuration: .init(settle: .zero))
        rig.follow(reachability, resolver: resolver)
        try await rig.expect("dns failed", Self.limited(.dnsFailed))
        guard case .limited(let limitation)? = rig.latest else { return }
        #expect(limitation.detail == "feed.test: Temporary failure in name resolution")

        answer.withLock { $0 = .resolved([Self.server]) }
        resolver.reresolve()
        try await rig.expect("resolved") { $0.isOnline }
        // The name moves to the far address; then the old one is blackholed: still online.
        answer.withLock { $0 = .resolved([Self.far]) }
        resolver.reresolve()
        try await Task.sleep(for: .milliseconds(300))
        try await rig.topology.client.ip("route", "add", "blackhole", "\(VethTopology.serverAddress)/32")
        try await Task.sleep(for: .milliseconds(300))
        #expect(rig.latest?.isOnline == true, "the verdict follows the new address: \(String(describing: rig.latest))")
        // And the far address is what the kernel is asked about now.
        #expect(rig.monitor.snapshot.kernelRoutes[Self.far] != nil)
        #expect(rig.monitor.snapshot.kernelRoutes[Self.server] == nil, "the old address is no longer tracked")
        try await rig.topology.client.ip("route", "add", "blackhole", "10.88.0.2/32")
        try await rig.expect("blocked at the new address") { $0 == .offline(.blocked) }
    }
}
