import ConnectivityPolicy
import Foundation
import NetlinkMonitor
import NetlinkProbe

/// One admin-down of the monitored link at a time: the time from the `RTM_NEWLINK` request to
/// (a) a plain netlink socket receiving the link message and (b) a consumer of the monitor's
/// verdict stream receiving `offline(noCarrier)` — both from the same kernel event.
///
/// The same method as ``LinkLatencyProbe`` (netprobe latency), split into one call per measurement
/// so that a benchmark harness can drive the iterations: set up once, then ``measure()`` and
/// ``restore()`` alternately. The request is sent in-process (no `ip` start-up in the figures);
/// the default route the kernel flushes on admin-down is put back by ``restore()``, outside the
/// measured window.
public actor LinkLatencyRig {
    public struct Sample: Sendable {
        public var raw: Duration
        public var verdict: Duration
        public var added: Duration { verdict - raw }
    }

    private let topology: VethTopology
    private let monitor: NetlinkMonitor
    private let listener: RawLinkListener
    private let control: Int32
    private let clientIndex: Int32
    private let consumer: Task<Void, Never>
    private var verdicts: AsyncStream<(Verdict, ContinuousClock.Instant)>.Iterator
    private var raw: AsyncStream<RawLinkEvent>.Iterator
    private var sequence: UInt32 = 1
    /// Every sample taken after warm-up, for the closing summary.
    public private(set) var samples: [Sample] = []

    /// What the verdict consumer judges: a host behind the default route (every snapshot then
    /// asks the kernel for its route, as syncd's feeds do) or the internet at large (the model
    /// alone, no lookup): the pair measures what the kernel's lookup adds.
    public enum Judged: String, Sendable {
        case host
        case internet
    }

    public let judged: Judged

    /// Where the verdict consumer's task runs: on the global executor, as syncd's own consumer
    /// does, or on the monitor's thread (``NetlinkMonitor/taskExecutor``), where the hand-over
    /// wakes no other thread.
    public enum Consumer: String, Sendable {
        case pool
        case monitor
    }

    public let consumerPlacement: Consumer

    public init(judged: Judged = .host, consumer placement: Consumer = .pool) async throws {
        self.judged = judged
        consumerPlacement = placement
        topology = try await VethTopology()
        clientIndex = try await RawNetlink.linkIndex(named: VethTopology.clientLink, namespacePath: topology.client.path)
        listener = RawLinkListener(fd: try await RawNetlink.open(groups: RawNetlink.linkGroup, namespacePath: topology.client.path))
        control = try await RawNetlink.open(groups: 0, namespacePath: topology.client.path)
        monitor = NetlinkMonitor(configuration: .init(networkNamespacePath: topology.client.path))
        try await monitor.start()
        let (stamped, stamp) = AsyncStream<(Verdict, ContinuousClock.Instant)>.makeStream()
        // A host behind the default route: every snapshot asks the kernel for its route, as
        // syncd's feeds do.
        let destination: Destination = judged == .host ? .addresses([IPAddress("198.51.100.7")!]) : .internet
        consumer = Self.consume(ConnectivityMonitor.verdicts(from: monitor, for: destination, settle: .zero), into: stamp, on: placement == .monitor ? monitor.taskExecutor : nil)
        verdicts = stamped.makeAsyncIterator()
        raw = listener.events.makeAsyncIterator()
        _ = try await nextVerdict(\.isOnline)
    }

    /// The consumer stamps each verdict the moment it arrives: that is "published" for a client.
    /// Not isolated to the rig, so that the executor preference decides where it runs.
    private nonisolated static func consume(
        _ verdicts: AsyncStream<Verdict>,
        into stamp: AsyncStream<(Verdict, ContinuousClock.Instant)>.Continuation,
        on executor: (any TaskExecutor)?
    ) -> Task<Void, Never> {
        Task(executorPreference: executor) {
            for await verdict in verdicts {
                stamp.yield((verdict, ContinuousClock.now))
            }
            stamp.finish()
        }
    }

    /// Closes sockets and stops the monitor; the namespaces go with the topology.
    public func shutdown() async {
        consumer.cancel()
        await monitor.stop()
        listener.close()
        _ = close(control)
    }

    /// Takes the link down and times both observers. `record` false for warm-up rounds.
    public func measure(record: Bool = true) async throws -> Sample {
        let start = ContinuousClock.now
        try RawNetlink.setLink(fd: control, index: clientIndex, up: false, sequence: nextSequence())
        let rawAt = try await nextRaw(up: false)
        let verdictAt = try await nextVerdict { $0 == .offline(.noCarrier) }
        let sample = Sample(raw: rawAt - start, verdict: verdictAt - start)
        if record { samples.append(sample) }
        return sample
    }

    /// Brings the link back and waits until the monitor says online again.
    public func restore() async throws {
        try RawNetlink.setLink(fd: control, index: clientIndex, up: true, sequence: nextSequence())
        _ = try await nextRaw(up: true)
        try await topology.client.ip("route", "replace", "default", "via", VethTopology.serverAddress, "dev", VethTopology.clientLink)
        _ = try await nextVerdict(\.isOnline)
    }

    /// Percentiles of the recorded samples and the ratio the target is stated in.
    public func summary() -> String {
        let raw = DurationSummary(samples.map(\.raw))
        let verdict = DurationSummary(samples.map(\.verdict))
        let added = DurationSummary(samples.map(\.added))
        let ratio = Double(verdict.p99.wholeMicroseconds) / Double(max(1, raw.p99.wholeMicroseconds))
        let p50Ratio = Double(verdict.p50.wholeMicroseconds) / Double(max(1, raw.p50.wholeMicroseconds))
        return """
        link-latency summary (same events, nearest-rank; judged: \(judged.rawValue); consumer: \(consumerPlacement.rawValue)):
          raw netlink notification:  \(raw)
          offline verdict published: \(verdict)
          added by the monitor:      \(added)
          p50 ratio verdict/raw:     \(p50Ratio.formatted(.number.precision(.fractionLength(2))))
          p99 ratio verdict/raw:     \(ratio.formatted(.number.precision(.fractionLength(2)))) (target ≤ 1.50: \(ratio <= 1.5 ? "met" : "missed"))
        """
    }

    private func nextSequence() -> UInt32 {
        defer { sequence &+= 1 }
        return sequence
    }

    private func nextVerdict(_ wanted: (Verdict) -> Bool) async throws -> ContinuousClock.Instant {
        // An actor's stored iterator cannot be passed inout across an await: step a copy (the
        // iterator is a handle on the stream's shared storage) and store it back.
        var iterator = verdicts
        defer { verdicts = iterator }
        while let (verdict, at) = await iterator.next(isolation: #isolation) {
            if wanted(verdict) { return at }
        }
        throw RigError("verdict stream ended")
    }

    private func nextRaw(up: Bool) async throws -> ContinuousClock.Instant {
        var iterator = raw
        defer { raw = iterator }
        while let event = await iterator.next(isolation: #isolation) {
            if event.index == clientIndex && (event.flags & 0x1 != 0) == up { return event.receivedAt }
        }
        throw RigError("raw listener ended")
    }
}

/// A rig could not do what it was set up for.
public struct RigError: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}
