import Foundation
import ConnectivityPolicy
import NetlinkMonitor

/// Measures how long a link going down takes to reach (a) a plain netlink socket and (b) a
/// consumer of the monitor's verdict stream, both timed from the same `RTM_NEWLINK` request.
///
/// The change is an admin-down of the monitored link, which the kernel announces synchronously.
/// (A carrier loss caused by the peer is held back by the kernel's linkwatch for about a second,
/// which would drown the monitor's own share.) The request is sent from inside this process so
/// no `ip` start-up time hides in the figures; the default route that the kernel flushes is put
/// back with `ip` between measurements.
public enum LinkLatencyProbe {
    public struct Sample: Sendable {
        /// Request sent → plain netlink socket received the link message.
        public var raw: Duration
        /// Request sent → verdict-stream consumer received `offline(noCarrier)`.
        public var verdict: Duration
        /// What the monitor adds on top of the kernel's notification.
        public var added: Duration { verdict - raw }
    }

    public static func run(iterations: Int, warmup: Int = 5, progress: @Sendable (Int) -> Void = { _ in }) async throws -> [Sample] {
        let topology = try await VethTopology()
        let clientIndex = try await RawNetlink.linkIndex(named: VethTopology.clientLink, namespacePath: topology.client.path)
        let listener = RawLinkListener(fd: try await RawNetlink.open(groups: RawNetlink.linkGroup, namespacePath: topology.client.path))
        defer { listener.close() }
        let control = try await RawNetlink.open(groups: 0, namespacePath: topology.client.path)
        defer { _ = close(control) }

        let monitor = NetlinkMonitor(configuration: .init(networkNamespacePath: topology.client.path))
        try await monitor.start()
        // Released on return: a released monitor ends its thread.
        let (stamped, stamp) = AsyncStream<(Verdict, ContinuousClock.Instant)>.makeStream()
        let consumer = Task {
            for await verdict in ConnectivityMonitor.verdicts(from: monitor, settle: .zero) {
                stamp.yield((verdict, ContinuousClock.now))
            }
            stamp.finish()
        }
        defer { consumer.cancel() }

        var verdicts = stamped.makeAsyncIterator()
        var raw = listener.events.makeAsyncIterator()
        func nextVerdict(_ wanted: (Verdict) -> Bool) async throws -> ContinuousClock.Instant {
            while let (verdict, at) = await verdicts.next() {
                if wanted(verdict) { return at }
            }
            throw ProbeError("verdict stream ended", EPIPE)
        }
        func nextRaw(up: Bool) async throws -> ContinuousClock.Instant {
            while let event = await raw.next() {
                if event.index == clientIndex && (event.flags & 0x1 != 0) == up { return event.receivedAt }
            }
            throw ProbeError("raw listener ended", EPIPE)
        }

        _ = try await nextVerdict(\.isOnline)
        var samples: [Sample] = []
        var sequence: UInt32 = 1
        for i in 0..<(warmup + iterations) {
            let start = ContinuousClock.now
            try RawNetlink.setLink(fd: control, index: clientIndex, up: false, sequence: sequence)
            sequence += 1
            let rawAt = try await nextRaw(up: false)
            let verdictAt = try await nextVerdict { $0 == .offline(.noCarrier) }
            if i >= warmup {
                samples.append(Sample(raw: rawAt - start, verdict: verdictAt - start))
                progress(samples.count)
            }
            try RawNetlink.setLink(fd: control, index: clientIndex, up: true, sequence: sequence)
            sequence += 1
            _ = try await nextRaw(up: true)
            try await topology.client.ip("route", "replace", "default", "via", VethTopology.serverAddress, "dev", VethTopology.clientLink)
            _ = try await nextVerdict(\.isOnline)
        }
        return samples
    }
}

/// Percentiles of a set of durations (nearest-rank).
public struct DurationSummary: Sendable, CustomStringConvertible {
    public var count: Int
    public var p50: Duration
    public var p90: Duration
    public var p99: Duration
    public var max: Duration

    public init(_ values: [Duration]) {
        let sorted = values.sorted()
        func rank(_ p: Double) -> Duration {
            guard !sorted.isEmpty else { return .zero }
            return sorted[Swift.min(sorted.count - 1, Swift.max(0, Int((p * Double(sorted.count)).rounded(.up)) - 1))]
        }
        count = sorted.count
        p50 = rank(0.5)
        p90 = rank(0.9)
        p99 = rank(0.99)
        max = sorted.last ?? .zero
    }

    public var description: String {
        "n=\(count) p50=\(Self.micro(p50)) p90=\(Self.micro(p90)) p99=\(Self.micro(p99)) max=\(Self.micro(max))"
    }

    public static func micro(_ d: Duration) -> String {
        let (s, atto) = d.components
        return "\((Double(s) * 1e6 + Double(atto) / 1e12).formatted(.number.precision(.fractionLength(0))))µs"
    }
}
