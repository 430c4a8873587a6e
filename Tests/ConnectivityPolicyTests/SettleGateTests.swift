import ConnectivityPolicy
import Testing

/// A plain instant so the gate is tested without any clock.
struct Tick: InstantProtocol {
    var ns: Int64
    func advanced(by duration: Duration) -> Tick {
        Tick(ns: ns + duration.components.seconds * 1_000_000_000 + duration.components.attoseconds / 1_000_000_000)
    }
    func duration(to other: Tick) -> Duration { .nanoseconds(other.ns - ns) }
    static func < (lhs: Tick, rhs: Tick) -> Bool { lhs.ns < rhs.ns }
}

@Suite struct SettleGateTests {
    let eth0 = Verdict.online(OnlinePath(link: "eth0", linkIndex: 2, family: .ipv4, route: .defaultRoute(.ipv4), gateway: nil))
    let wlan0 = Verdict.online(OnlinePath(link: "wlan0", linkIndex: 3, family: .ipv4, route: .defaultRoute(.ipv4), gateway: nil))
    let t0 = Tick(ns: 0)

    @Test func firstVerdictIsPublishedAtOnce() {
        var gate = SettleGate<Tick>(settle: .seconds(2))
        #expect(gate.observe(eth0, at: t0) == .publish(eth0))
        #expect(gate.published == eth0)
    }

    @Test func offlineIsPublishedAtOnce() {
        var gate = SettleGate<Tick>(settle: .seconds(2))
        _ = gate.observe(eth0, at: t0)
        #expect(gate.observe(.offline(.noCarrier), at: t0.advanced(by: .milliseconds(1))) == .publish(.offline(.noCarrier)))
        #expect(gate.observe(.offline(.noCarrier), at: t0.advanced(by: .milliseconds(2))) == .cancelTimer)
        #expect(gate.published == .offline(.noCarrier))
    }

    @Test func offlineWhileAPathChangeSettlesIsPublishedAtOnce() {
        var gate = SettleGate<Tick>(settle: .seconds(2))
        _ = gate.observe(eth0, at: t0)
        #expect(gate.observe(wlan0, at: t0) == .schedule(t0.advanced(by: .seconds(2))))
        #expect(gate.observe(.offline(.noRoute), at: t0.advanced(by: .milliseconds(5))) == .publish(.offline(.noRoute)))
        #expect(gate.deadlineReached(at: t0.advanced(by: .seconds(2))) == .none, "the pending path change is dropped")
    }

    @Test func aChangedOfflineReasonWaitsForTheSettlePeriod() {
        var gate = SettleGate<Tick>(settle: .seconds(2))
        _ = gate.observe(eth0, at: t0)
        _ = gate.observe(.offline(.noRoute), at: t0)
        let at = t0.advanced(by: .milliseconds(10))
        #expect(gate.observe(.offline(.noCarrier), at: at) == .schedule(at.advanced(by: .seconds(2))))
        #expect(gate.observe(.offline(.noCarrier), at: at.advanced(by: .seconds(1))) == .none, "the deadline stays")
        #expect(gate.deadlineReached(at: at.advanced(by: .seconds(1))) == .none)
        #expect(gate.deadlineReached(at: at.advanced(by: .seconds(2))) == .publish(.offline(.noCarrier)))
        #expect(gate.published == .offline(.noCarrier))
    }

    @Test func aReasonThatComesBackCancelsThePendingChange() {
        var gate = SettleGate<Tick>(settle: .seconds(2))
        _ = gate.observe(.offline(.noRoute), at: t0)
        #expect(gate.observe(.offline(.noAddress), at: t0) == .schedule(t0.advanced(by: .seconds(2))))
        #expect(gate.observe(.offline(.noRoute), at: t0.advanced(by: .seconds(1))) == .cancelTimer)
        #expect(gate.deadlineReached(at: t0.advanced(by: .seconds(2))) == .none)
        #expect(gate.published == .offline(.noRoute))
    }

    /// Five flaps through changing reasons: one offline, then one online, nothing else.
    @Test func flappingThroughChangingReasonsYieldsOneOfflineAndOneOnline() {
        var gate = SettleGate<Tick>(settle: .seconds(2))
        _ = gate.observe(eth0, at: t0)
        var published: [Verdict] = []
        var now = t0
        var due: Tick?
        func feed(_ verdict: Verdict) {
            now = now.advanced(by: .milliseconds(15))
            switch gate.observe(verdict, at: now) {
            case .publish(let v): published.append(v)
            case .schedule(let d): due = d
            default: break
            }
        }
        for _ in 0..<5 {
            for reason in [OfflineReason.noRoute, .noCarrier, .noAddress, .noRoute] { feed(.offline(reason)) }
            feed(eth0)
        }
        if case .publish(let v) = gate.deadlineReached(at: due!) { published.append(v) }
        #expect(published == [.offline(.noRoute), eth0])
    }

    @Test func onlineWaitsForTheSettlePeriod() {
        var gate = SettleGate<Tick>(settle: .seconds(2))
        _ = gate.observe(.offline(.noCarrier), at: t0)
        let at = t0.advanced(by: .seconds(1))
        #expect(gate.observe(eth0, at: at) == .schedule(at.advanced(by: .seconds(2))))
        #expect(gate.deadlineReached(at: at.advanced(by: .seconds(1))) == .none)
        #expect(gate.deadlineReached(at: at.advanced(by: .seconds(2))) == .publish(eth0))
        #expect(gate.published == eth0)
    }

    @Test func flappingYieldsOneOnline() {
        var gate = SettleGate<Tick>(settle: .seconds(2))
        _ = gate.observe(.offline(.noCarrier), at: t0)
        var published: [Verdict] = []
        var now = t0
        var due: Tick?
        for _ in 0..<100 {
            now = now.advanced(by: .milliseconds(100))
            if case .schedule(let d) = gate.observe(eth0, at: now) { due = d }
            now = now.advanced(by: .milliseconds(100))
            if case .publish(let v) = gate.observe(.offline(.noCarrier), at: now) { published.append(v) }
        }
        now = now.advanced(by: .milliseconds(100))
        if case .schedule(let d) = gate.observe(eth0, at: now) { due = d }
        if case .publish(let v) = gate.deadlineReached(at: due!) { published.append(v) }
        #expect(published == [eth0])
    }

    @Test func repeatedOnlineWhilePendingKeepsTheDeadline() {
        var gate = SettleGate<Tick>(settle: .seconds(2))
        _ = gate.observe(.offline(.noRoute), at: t0)
        #expect(gate.observe(eth0, at: t0) == .schedule(t0.advanced(by: .seconds(2))))
        #expect(gate.observe(eth0, at: t0.advanced(by: .seconds(1))) == .none)
        #expect(gate.deadlineReached(at: t0.advanced(by: .seconds(2))) == .publish(eth0))
    }

    @Test func switchingLinksWhileOnlineSettlesToo() {
        var gate = SettleGate<Tick>(settle: .seconds(1))
        _ = gate.observe(eth0, at: t0)
        #expect(gate.observe(wlan0, at: t0) == .schedule(t0.advanced(by: .seconds(1))))
        // Back to the published one before the deadline: the pending switch is dropped.
        #expect(gate.observe(eth0, at: t0.advanced(by: .milliseconds(10))) == .cancelTimer)
        #expect(gate.deadlineReached(at: t0.advanced(by: .seconds(1))) == .none)
        #expect(gate.published == eth0)
    }

    @Test func zeroSettlePublishesImmediately() {
        var gate = SettleGate<Tick>(settle: .zero)
        _ = gate.observe(.offline(.noCarrier), at: t0)
        #expect(gate.observe(eth0, at: t0) == .publish(eth0))
    }
}
