import ConnectivityPolicy
import Foundation
import NetlinkMonitor
import Testing
import TestSupport

/// Hundreds of real link flaps, each burst faster than the settle period: the settled verdict
/// stream must go offline exactly once per burst, resume (publish online) exactly once per quiet
/// period, never during a burst, and end in the kernel's verdict.
///
/// The settle timer runs on a `ManualClock` that only moves when the test says a quiet period has
/// passed, so "faster than settle" holds by construction and no assertion depends on how fast
/// this machine is. The kernel side is real: a veth pair whose client sees every flap.
///
/// A burst is judged only once the monitor has read all of it. Seeing the monitor agree with the
/// kernel is not enough for that: a peer-side flap ends in the very state it began in, so a
/// monitor still behind the burst agrees too, and its offline verdict comes after the test has
/// looked. After each burst the test adds an address (a sentinel: no verdict reads it) and waits
/// until the monitor shows it; the kernel queues a socket's notifications in order, so by then
/// the monitor has read every announcement of the burst. The kernel's own announcements, read by
/// a plain listener, get a sentinel of their own (``waitForAnnouncements(_:after:burst:of:sequence:)``).
@Suite(.enabled(if: Privileges.rootTestsEnabled, Comment(rawValue: Privileges.skipReason)))
struct FlappingTests {
    enum Side: String, Sendable, CaseIterable, CustomTestStringConvertible {
        /// The peer goes admin-down: the client link loses carrier; routes stay, marked linkdown.
        case peer
        /// The client link itself goes admin-down: the kernel flushes its IPv4 routes silently.
        case client
        var testDescription: String { rawValue }
    }

    static let bursts = 6
    static let flapsPerBurst = 50
    static let settle = Duration.seconds(30)

    @Test(arguments: Side.allCases)
    func oneResumePerSettledPeriod(side: Side) async throws {
        try Privileges.requireRoot()
        let h = try await ResilienceHarness()
        let clock = ManualClock()
        let log = VerdictLog()
        // The daemon's own path: the monitor's thread evaluates every snapshot it publishes, so a
        // verdict is decided before the next snapshot is (a snapshot stream keeps only the newest).
        let stream = ConnectivityMonitor.verdicts(from: h.monitor, for: .internet, settle: Self.settle, clock: clock)
        let consumer = Task { for await verdict in stream { log.append(verdict) } }
        defer { consumer.cancel() }

        // The kernel's own announcements, on a plain socket: a burst counts only if the kernel
        // told of a loss in it. Under heavy load linkwatch (a kernel worker) may run only once a
        // whole burst is over, find the carrier back, and announce nothing.
        let listener = RawLinkListener(fd: try await RawNetlink.open(groups: RawNetlink.linkGroup, namespacePath: h.client.path))
        defer { listener.close() }
        let announced = ReceivedLog<RawLinkEvent>()
        let recorder = Task { for await event in listener.events where event.index == ResilienceHarness.clientIndex { announced.append(event) } }
        defer { recorder.cancel() }

        try await waitForVerdicts(log) { $0.count >= 1 }
        #expect(log.all.first?.isOnline == true, "starts online: \(log.all)")

        var rng = SplitMix64(seed: 0xF1A9)
        var sequence: UInt32 = 1
        var offlineBursts = 0
        var announcedBursts = 0
        for burst in 0..<Self.bursts {
            let before = log.all.count
            let announcedBefore = announced.all.count
            for _ in 0..<Self.flapsPerBurst {
                try await h.apply([side == .peer ? .peerLink(up: false) : .clientLink(up: false)], sequence: &sequence)
                try await Task.sleep(for: .microseconds(Int.random(in: 0...2000, using: &rng)))
                try await h.apply([side == .peer ? .peerLink(up: true) : .clientLink(up: true)], sequence: &sequence)
                try await Task.sleep(for: .microseconds(Int.random(in: 0...2000, using: &rng)))
            }
            if side == .client {
                // Admin-down flushed the default route; put it back as a DHCP client would.
                try await h.apply([.ip("route replace default via \(ResilienceHarness.gateway4) dev \(ResilienceHarness.link)")], sequence: &sequence)
            }
            // What the kernel announced in this burst, once the listener has read all of it.
            let burstEvents = try await waitForAnnouncements(announced, after: announcedBefore, burst: burst, of: h, sequence: &sequence)
            let kernelLost = burstEvents.contains { !Self.hasCarrierFlags($0.flags) }
            if kernelLost { announcedBursts += 1 }
            // The kernel settles (carrier back, routes re-read) while the test clock stands still,
            // and the monitor reads up to the sentinel, which comes after every flap.
            let sentinel = "10.77.1.\(burst + 1)"
            try await h.apply([.ip("address add \(sentinel)/32 dev \(ResilienceHarness.link)")], sequence: &sequence)
            let disagreement = try await h.waitForAgreement { dump in
                ConnectivityPolicy.evaluate(dump).isOnline && dump.addresses.contains { $0.address.description == sentinel }
            }
            if let dump = disagreement {
                Issue.record("burst \(burst): monitor never matched an online kernel with the sentinel: \(SnapshotDiff(monitor: h.monitor.snapshot, kernel: dump))")
            }
            // Every verdict of the burst is decided by now; the consumer's task may not have
            // recorded the offline one yet on a loaded machine.
            if kernelLost {
                try? await waitForVerdicts(log) { $0.dropFirst(before).contains { !$0.isOnline } }
            }
            let duringBurst = Array(log.all.dropFirst(before))
            let resumedEarly = duringBurst.contains { $0.isOnline }
            #expect(!resumedEarly, "burst \(burst): online published before the settle period: \(duringBurst)")
            let wentOffline = duringBurst.contains { !$0.isOnline }
            // The reason changes on every step of a flap (no carrier, no route, …); only the
            // first offline is published during the burst, the rest wait for a settle period
            // that never comes, so a client redraws its banner once.
            let offlines = duringBurst.filter { !$0.isOnline }.count
            #expect(offlines <= 1, "burst \(burst): \(offlines) offline verdicts published: \(duringBurst)")
            if wentOffline { offlineBursts += 1 }
            #expect(wentOffline == kernelLost, "burst \(burst): kernel announced a loss: \(kernelLost), offline published: \(wentOffline)")

            // The quiet period: the pending online comes out once the settle period has passed.
            // The clock moves once the settle timer is asleep, so it cannot start after the advance.
            let onlineBefore = log.all.filter(\.isOnline).count
            if wentOffline {
                try await clock.advance(by: Self.settle, waking: "burst \(burst)'s settle timer")
                try await waitForVerdicts(log) { $0.filter(\.isOnline).count > onlineBefore }
            }
            let resumed = log.all.filter(\.isOnline).count - onlineBefore
            #expect(resumed == (wentOffline ? 1 : 0), "burst \(burst): \(resumed) resumes after the quiet period, verdicts \(Array(log.all.dropFirst(before)))")
        }
        // Every burst whose loss the kernel announced is published offline: one that went unseen
        // would mean a lost event. On an idle machine the kernel announces a loss in every burst.
        #expect(offlineBursts == announcedBursts, "\(offlineBursts) bursts published offline, the kernel announced a loss in \(announcedBursts)")
        #expect(announcedBursts > 0, "the kernel announced no loss in \(Self.bursts) bursts")
        let dump = try await h.kernel()
        #expect(log.latest == ConnectivityPolicy.evaluate(dump), "final verdict \(String(describing: log.latest)), kernel says \(ConnectivityPolicy.evaluate(dump))")
        let matches = h.monitor.snapshot == dump
        #expect(matches, "\(SnapshotDiff(monitor: h.monitor.snapshot, kernel: dump))")
        let resumes = log.all.dropFirst().filter(\.isOnline).count
        print("FlappingTests[\(side)]: \(Self.bursts * Self.flapsPerBurst) flaps in \(Self.bursts) bursts (a loss announced in \(announcedBursts)) → \(resumes) resumes, \(log.all.count) verdicts; \(h.monitor.statistics)")
    }

    /// `IFF_UP`, `IFF_RUNNING` and `IFF_LOWER_UP` all set: the flags of a link with carrier.
    static func hasCarrierFlags(_ flags: UInt32) -> Bool {
        LinkFlags(rawValue: flags).isSuperset(of: [.up, .running, .lowerUp])
    }

    /// `IFF_ALLMULTI`: a flag no verdict reads, which the sentinel below turns on and off.
    static let allMulticast: UInt32 = 0x200

    /// The kernel's announcements for the client link after the first `count`, up to a sentinel
    /// announcement made after the burst and once the listener has recorded it (bounded, real
    /// time), so however late the recorder runs, the burst is judged on all it announced.
    ///
    /// Carrier changes are announced by the kernel's linkwatch worker, which may run after the
    /// burst: `ip link show dev` first (RTM_GETLINK makes the kernel apply the link's pending
    /// linkwatch event there and then, announcing it), then the sentinel, a change of the
    /// client link's allmulticast flag (on for even bursts, off for odd ones: a listener sees
    /// only a link's index and flags, so the first announcement with the new setting is the
    /// sentinel). The kernel queues a socket's announcements in order, so everything before the
    /// sentinel is the burst's.
    private func waitForAnnouncements(
        _ announced: ReceivedLog<RawLinkEvent>, after count: Int, burst: Int, of h: ResilienceHarness, sequence: inout UInt32
    ) async throws -> [RawLinkEvent] {
        let on = burst % 2 == 0
        try await h.apply([
            .ip("link show dev \(ResilienceHarness.link)"),
            .ip("link set dev \(ResilienceHarness.link) allmulticast \(on ? "on" : "off")"),
        ], sequence: &sequence)
        func isSentinel(_ event: RawLinkEvent) -> Bool { (event.flags & Self.allMulticast != 0) == on }
        try await waitUntil("the listener recorded burst \(burst)'s sentinel") {
            announced.all.dropFirst(count).contains(where: isSentinel)
        }
        return Array(announced.all.dropFirst(count).prefix { !isSentinel($0) })
    }

    /// Waits (bounded, real time) until the recorded verdicts satisfy `condition`.
    private func waitForVerdicts(
        _ log: VerdictLog, timeout: Duration = hangGuard, sourceLocation: SourceLocation = #_sourceLocation,
        _ condition: ([Verdict]) -> Bool
    ) async throws {
        do {
            try await waitUntil("the verdicts awaited at \(sourceLocation)", timeout: timeout, interval: .milliseconds(2)) { condition(log.all) }
        } catch let error as WaitTimedOut {
            throw WaitTimedOut(description: "\(error.description); verdicts so far: \(log.all)")
        }
    }
}
