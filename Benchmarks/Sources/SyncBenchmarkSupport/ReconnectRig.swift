import Foundation
import NetlinkProbe

/// Reconnect latency through the real stack, across two network namespaces joined by a veth pair
/// (``VethTopology``): syncd's monitor, coordinator, HTTP source and store run in a helper process
/// inside the client namespace (`reconnect-helper agent`), the demo feed server in a helper inside
/// the server namespace bound to the peer address 10.77.0.2 (`reconnect-helper server`).
///
/// Each iteration:
/// 1. a newer load is put in flight and held by the server (a scripted stall);
/// 2. **down**: the peer link (veth-s) goes admin-down with one in-process `RTM_NEWLINK`; the
///    client's veth-c loses carrier (routes are kept, marked linkdown, as on a pulled cable).
///    Timed from the request: a plain netlink socket in the client namespace seeing veth-c lose
///    `IFF_LOWER_UP` (the raw notification), the agent's verdict stream saying offline, and the
///    coordinator's published `FeedState` showing the load paused (cancelled, not failed);
/// 3. **up**: veth-s goes admin-up; timed from that request: the raw carrier notification, the
///    agent's online verdict (after the settle period), and the retried request's arrival at
///    the server (the server's own arrival stamp);
/// 4. the retried load completes (outside the measured window).
public actor ReconnectRig {
    public struct Sample: Sendable {
        public var rawDown: Int64
        public var verdictDown: Int64
        public var paused: Int64
        public var rawUp: Int64
        public var verdictUp: Int64
        public var arrival: Int64
        /// The up request's instant (CLOCK_MONOTONIC ns), to line samples up with helper logs.
        public var upAt: Int64
    }

    public let settle: Duration
    /// Whether a load is in flight (held by the server) when the link goes down; otherwise the
    /// feed is idle at the down and a refresh is asked for while offline (paused).
    public let inFlight: Bool
    /// The last link request, so that the next carrier loss is at least 1.1 s later: the kernel's
    /// linkwatch delivers carrier changes at most about once a second (it rate-limits them), and
    /// back-to-back cycles would measure that delay instead of syncd.
    private var lastLinkChange = ContinuousClock.now
    private let topology: VethTopology
    private let server: LineProcess
    private let agent: LineProcess
    private let serverLines: LineReader
    private let agentLines: LineReader
    private let listener: RawLinkListener
    private var raw: AsyncStream<RawLinkEvent>.Iterator
    private let control: Int32
    private let clientIndex: Int32
    private let peerIndex: Int32
    private var sequence: UInt32 = 1
    private let directory: String
    public private(set) var samples: [Sample] = []

    private static let lowerUp: UInt32 = 0x10000  // IFF_LOWER_UP

    public init(settle: Duration, inFlight: Bool) async throws {
        self.settle = settle
        self.inFlight = inFlight
        let helper = try HelperPaths.executable("reconnect-helper")
        topology = try await VethTopology()
        if ProcessInfo.processInfo.environment["RECONNECT_STATIC_NEIGHBOUR"] == "1" {
            // Diagnostic: the server's address resolved for good, so no ARP happens after the
            // link returns. Tells kernel neighbour resolution apart from syncd's own path.
            let link = try await topology.server.ip("-o", "link", "show", VethTopology.serverLink)
            guard let range = link.range(of: "link/ether "),
                  let mac = link[range.upperBound...].split(separator: " ").first
            else { throw SyncRigError("no MAC address in: \(link)") }
            try await topology.client.ip("neigh", "replace", VethTopology.serverAddress, "lladdr", String(mac),
                                         "dev", VethTopology.clientLink, "nud", "permanent")
        }
        directory = NSTemporaryDirectory() + "reconnect-\(getpid())-\(Int.random(in: 0..<1_000_000))"
        server = try LineProcess(
            executable: "/usr/bin/env",
            arguments: ["ip", "netns", "exec", topology.server.name, helper, "server", VethTopology.serverAddress, "8080"])
        let serverLines = LineReader(server, name: "reconnect-helper server")
        _ = try await serverLines.next { $0.hasPrefix("listening") }
        self.serverLines = serverLines
        agent = try LineProcess(
            executable: "/usr/bin/env",
            arguments: [
                "ip", "netns", "exec", topology.client.name, helper, "agent",
                "http://\(VethTopology.serverAddress):8080/feeds/live?limit=20", "\(settle.nanoseconds / 1_000_000)", directory,
            ])
        let agentLines = LineReader(agent, name: "reconnect-helper agent")
        _ = try await agentLines.next(timeout: .seconds(60)) { $0 == "ready" }
        self.agentLines = agentLines
        clientIndex = try await RawNetlink.linkIndex(named: VethTopology.clientLink, namespacePath: topology.client.path)
        peerIndex = try await RawNetlink.linkIndex(named: VethTopology.serverLink, namespacePath: topology.server.path)
        listener = RawLinkListener(fd: try await RawNetlink.open(groups: RawNetlink.linkGroup, namespacePath: topology.client.path))
        raw = listener.events.makeAsyncIterator()
        control = try await RawNetlink.open(groups: 0, namespacePath: topology.server.path)
    }

    public func shutdown() {
        agent.finish()
        server.finish()
        listener.close()
        _ = close(control)
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// One down/up cycle; `record` false for warm-up rounds.
    public func measure(record: Bool = true) async throws -> Sample {
        // 1. with `inFlight`, a newer load in flight, held by the server.
        if inFlight {
            try server.send("stall")
            _ = try await serverLines.next { $0 == "ok" }
            try agent.send("refresh")
            _ = try await agentLines.next { $0 == "refreshed" }
            try server.send("stalled")
            let stalled = try await serverLines.next { $0.hasPrefix("stalled") }
            guard stalled != "stalled 0" else { throw SyncRigError("the refresh never reached the server") }
        }
        try await Task.sleep(until: lastLinkChange + .milliseconds(1100), clock: .continuous)

        // 2. carrier loss: the coordinator pauses the load in flight, or (idle) shows offline.
        let down = Monotonic.now()
        try RawNetlink.setLink(fd: control, index: peerIndex, up: false, sequence: nextSequence())
        lastLinkChange = .now
        let rawDown = try await nextRaw(carrier: false)
        var verdictDown: Int64?
        var paused: Int64?
        let pausedState = inFlight ? "off=1 paused=1" : "off=1 paused=0"
        while verdictDown == nil || paused == nil {
            let line = try await agentLines.next(timeout: .seconds(10)) { $0.hasPrefix("verdict") || $0.hasPrefix("state") }
            let fields = line.split(separator: " ")
            if fields[0] == "verdict", fields[2] == "offline", verdictDown == nil { verdictDown = Int64(fields[1]) }
            if fields[0] == "state", line.contains(pausedState), paused == nil { paused = Int64(fields[1]) }
        }
        if !inFlight {
            // A refresh while offline: paused, not sent.
            try agent.send("refresh")
            _ = try await agentLines.next { $0.hasPrefix("state") && $0.contains("off=1 paused=1") }
        }

        // 3. carrier back.
        let up = Monotonic.now()
        try RawNetlink.setLink(fd: control, index: peerIndex, up: true, sequence: nextSequence())
        lastLinkChange = .now
        let rawUp = try await nextRaw(carrier: true)
        let verdictLine = try await agentLines.next(timeout: .seconds(30)) { $0.hasPrefix("verdict") && $0.hasSuffix("online") }
        let verdictUp = Int64(verdictLine.split(separator: " ")[1]) ?? 0
        try server.send("wait-request \(up)")
        let arrivalLine = try await serverLines.next(timeout: .seconds(40)) { $0.hasPrefix("request") || $0 == "timeout" }
        guard arrivalLine != "timeout" else { throw SyncRigError("no request reached the server after the link came back") }
        let arrival = Int64(arrivalLine.split(separator: " ")[1]) ?? 0

        // 4. the retried load completes.
        _ = try await agentLines.next(timeout: .seconds(30)) { $0.hasPrefix("state") && $0.hasSuffix("off=0 paused=0 newer=loaded") }

        let sample = Sample(
            rawDown: rawDown - down, verdictDown: (verdictDown ?? 0) - down, paused: (paused ?? 0) - down,
            rawUp: rawUp - up, verdictUp: verdictUp - up, arrival: arrival - up, upAt: up)
        if record { samples.append(sample) }
        return sample
    }

    public func summary() -> String {
        func row(_ label: String, _ values: [Int64]) -> String {
            "  \(label.padding(toLength: 42, withPad: " ", startingAt: 0)) \(NanoSummary(values))"
        }
        let arrival = NanoSummary(samples.map(\.arrival))
        let paused = NanoSummary(samples.map(\.paused))
        let rawDown = NanoSummary(samples.map(\.rawDown))
        let debug = ProcessInfo.processInfo.environment["RECONNECT_DEBUG"] == nil ? "" : "\n" + samples.map {
            "  sample up=\($0.upAt) rawUp=+\($0.rawUp / 1000)µs verdictUp=+\($0.verdictUp / 1000)µs arrival=+\($0.arrival / 1000)µs"
        }.joined(separator: "\n")
        return """
        reconnect summary, settle \(settle), \(inFlight ? "a newer load in flight at the down" : "idle at the down, refresh while offline") (reconnect spread 0; nearest-rank; from the link request):
        down (peer admin-down → client carrier loss):
        \(row("raw netlink notification (veth-c)", samples.map(\.rawDown)))
        \(row("offline verdict (agent)", samples.map(\.verdictDown)))
        \(row(inFlight ? "coordinator paused (FeedState published)" : "coordinator offline (FeedState published)", samples.map(\.paused)))
        \(row("added by syncd (state − raw)", samples.map { $0.paused - $0.rawDown }))
          p50 ratio state/raw: \(String(format: "%.2f", Double(paused.p50) / Double(max(1, rawDown.p50)))), p99 ratio: \(String(format: "%.2f", Double(paused.p99) / Double(max(1, rawDown.p99))))
        up (peer admin-up → carrier back):
        \(row("raw netlink notification (veth-c)", samples.map(\.rawUp)))
        \(row("online verdict (agent, after settle)", samples.map(\.verdictUp)))
        \(row("retried request at the server", samples.map(\.arrival)))
        \(row("request − online verdict", samples.map { $0.arrival - $0.verdictUp }))
          target p99 < 50 ms: \(arrival.p99 < 50_000_000 ? "met" : "missed") (p99 \(NanoSummary.format(arrival.p99)))\(debug)
        """
    }

    private func nextSequence() -> UInt32 {
        defer { sequence &+= 1 }
        return sequence
    }

    private func nextRaw(carrier: Bool) async throws -> Int64 {
        var iterator = raw
        defer { raw = iterator }
        while let event = await iterator.next(isolation: #isolation) {
            if event.index == clientIndex && (event.flags & Self.lowerUp != 0) == carrier {
                return Monotonic.nanoseconds(of: event.receivedAt)
            }
        }
        throw SyncRigError("raw listener ended")
    }
}
