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

        /// Waits (bounded by ``hangGuard``) until the latest verdict satisfies `predicate`; the
        /// failure names the latest verdict.
        func expect(_ what: String, sourceLocation: SourceLocation = #_sourceLocation, _ predicate: (Verdict) -> Bool) async throws {
            do {
                try await waitUntil(what) { latest.map(predicate) ?? false }
            } catch let error as WaitTimedOut {
                Issue.record("\(what): latest \(String(describing: latest))", sourceLocation: sourceLocation)
                throw error
            }
        }

        /// The verdicts published before this call, once the log holds all of them.
        ///
        /// For checks that a verdict did *not* come, which a pause cannot show on a loaded
        /// machine. The publisher yields a verdict in the very call that changed what it judges,
        /// so a portal reported now (the sentinel) is published after everything before it, and
        /// once the log shows the sentinel it shows all of them. The sentinel is then withdrawn
        /// and its end waited for. Only while the verdict is online or limited: offline hides a
        /// portal.
        func verdictsBeforeSentinel(of reachability: HostReachability<ContinuousClock>) async throws -> [Verdict] {
            let start = log.values.withLock { $0.count }
            reachability.portalChanged(Self.sentinelPortal)
            try await waitUntil("the sentinel verdict is recorded") {
                log.values.withLock { $0.dropFirst(start).contains(where: Self.isSentinel) }
            }
            let before = log.values.withLock { values in Array(values[..<values.lastIndex(where: Self.isSentinel)!]) }
            reachability.portalChanged(nil)
            try await expect("the sentinel withdrawn") { !Self.isSentinel($0) }
            return before
        }

        static let sentinelPortal = "http://sentinel.invalid/"

        static func isSentinel(_ verdict: Verdict) -> Bool {
            if case .limited(let limitation) = verdict { return limitation.reason == .portal && limitation.detail == sentinelPortal }
            return false
        }

        /// Waits until every observer of the monitor, the reachability's among them, has been
        /// handed a snapshot in which `condition` holds.
        ///
        /// The monitor hands one snapshot to all its observers before it publishes the next; so
        /// once a later change (a route to a network nobody asks about) is published as well,
        /// they have all had the first.
        func waitUntilObserved(_ what: String, _ condition: (NetworkSnapshot) -> Bool) async throws {
            try await waitUntil("the monitor publishes \(what)") { condition(monitor.snapshot) }
            let marker = markers.withLock { count -> IPPrefix in
                count += 1
                return IPPrefix("10.99.\(count).0/24")!
            }
            try await topology.client.ip("route", "add", "blackhole", marker.description)
            try await waitUntil("the monitor publishes the marker route after \(what)") {
                monitor.snapshot.routes.contains { $0.destination == marker }
            }
        }

        /// Marker routes added so far (``waitUntilObserved(_:_:)``).
        private let markers = Mutex(0)
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
        let probes = Mutex(0)
        let reachability = HostReachability(
            destination: .addresses([Self.server]), monitor: rig.monitor,
            configuration: .init(settle: .zero, unansweredThreshold: 2, probeDelay: .milliseconds(20), maxProbeDelay: .milliseconds(100)),
            probe: { _ in
                probes.withLock { $0 += 1 }
                return answers.withLock { $0 }
            }
        )
        rig.follow(reachability)
        try await rig.expect("online") { $0.isOnline }
        reachability.requestFailed(unanswered: "10.77.0.2: connection timed out")
        #expect(try await rig.verdictsBeforeSentinel(of: reachability).last?.isOnline == true, "one lost connection is not an outage")
        // An answer of any kind in between resets the count.
        reachability.requestFailed(unanswered: nil)
        reachability.requestFailed(unanswered: "10.77.0.2: connection timed out")
        #expect(try await rig.verdictsBeforeSentinel(of: reachability).last?.isOnline == true)
        reachability.requestFailed(unanswered: "10.77.0.2: connection timed out")
        try await rig.expect("server unreachable", Self.limited(.serverUnreachable))
        guard case .limited(let limitation)? = rig.latest else { return }
        #expect(limitation.detail == "10.77.0.2: connection timed out" && limitation.path?.link == VethTopology.clientLink)
        // Probes fail for a while (three of them, however long they take), then the server answers.
        let probed = probes.withLock { $0 }
        try await waitUntil("three more probes went unanswered") { probes.withLock { $0 } >= probed + 3 }
        let afterFailedProbes = try await rig.verdictsBeforeSentinel(of: reachability)
        #expect(afterFailedProbes.last.map(Self.limited(.serverUnreachable)) == true, "still unreachable after unanswered probes: \(afterFailedProbes)")
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
        // The name moves to the far address: the kernel is asked about it, no longer about the
        // old one.
        answer.withLock { $0 = .resolved([Self.far]) }
        resolver.reresolve()
        try await waitUntil("the monitor looks up the far address instead of the old one") {
            let routes = rig.monitor.snapshot.kernelRoutes
            return routes[Self.far] != nil && routes[Self.server] == nil
        }
        // Then the old address is blackholed: still online, once the reachability has seen it.
        let oldAddress = IPPrefix("\(VethTopology.serverAddress)/32")!
        try await rig.topology.client.ip("route", "add", "blackhole", oldAddress.description)
        try await rig.waitUntilObserved("the blackhole to the old address") { snapshot in
            snapshot.routes.contains { $0.destination == oldAddress && $0.type == .blackhole }
        }
        let afterBlackhole = try await rig.verdictsBeforeSentinel(of: reachability)
        #expect(afterBlackhole.last?.isOnline == true, "the verdict follows the new address: \(afterBlackhole)")
        try await rig.topology.client.ip("route", "add", "blackhole", "10.88.0.2/32")
        try await rig.expect("blocked at the new address") { $0 == .offline(.blocked) }
    }
}
