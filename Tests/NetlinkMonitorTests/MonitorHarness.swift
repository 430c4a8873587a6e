import ConnectivityPolicy
import Foundation
import NetlinkMonitor
import Synchronization
import Testing
import TestSupport

/// A running monitor inside the client side of a fresh veth topology, with the verdicts it
/// publishes for a destination recorded as they arrive.
final class MonitorHarness: Sendable {
    let topology: VethTopology
    let monitor: NetlinkMonitor
    let destination: Destination
    private let recorded = Recorder()
    private let consumer: Task<Void, Never>

    /// - Parameter onMonitorThread: consume the verdicts in a task that prefers the monitor's
    ///   executor (``NetlinkMonitor/taskExecutor``) instead of the global one.
    init(destination: Destination = .internet, configure: Bool = true, receiveBufferSize: Int = 8 << 20, settle: Duration = .zero, onMonitorThread: Bool = false) async throws {
        topology = try await VethTopology(configure: configure)
        monitor = NetlinkMonitor(configuration: .init(networkNamespacePath: topology.client.path, receiveBufferSize: receiveBufferSize))
        try await monitor.start()
        self.destination = destination
        let stream = ConnectivityMonitor.verdicts(from: monitor, for: destination, settle: settle)
        let recorded = self.recorded
        consumer = Task(executorPreference: onMonitorThread ? monitor.taskExecutor : nil) {
            for await verdict in stream {
                let thread = ProcessThreads.currentID
                recorded.values.withLock { $0.append(verdict) }
                recorded.threads.withLock { $0.append(thread) }
            }
        }
    }

    deinit {
        consumer.cancel()
    }

    /// As root, a harness whose first verdict has settled online through the client link: where
    /// most tests start, before they change the topology.
    static func settledOnline(
        destination: Destination = .internet, receiveBufferSize: Int = 8 << 20, onMonitorThread: Bool = false,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> MonitorHarness {
        try Privileges.requireRoot()
        let h = try await MonitorHarness(destination: destination, receiveBufferSize: receiveBufferSize, onMonitorThread: onMonitorThread)
        try await h.expectSettled("initial", sourceLocation: sourceLocation) { $0.isOnline(via: VethTopology.clientLink) }
        return h
    }

    var verdicts: [Verdict] { recorded.values.withLock { $0 } }
    /// The thread that received each verdict.
    var consumerThreads: [Int32?] { recorded.threads.withLock { $0 } }
    var latest: Verdict? { verdicts.last }

    /// Stops the monitor and waits (bounded) until its thread is gone.
    ///
    /// For a test likely to be the last of a run: a monitor merely released ends its thread a
    /// moment later, and a process that exits meanwhile aborts in libnl (its exit handlers have
    /// unregistered the cache types the thread is still freeing).
    func stopMonitor() async throws {
        let tid = monitor.threadID
        let monitor = self.monitor
        try await boundedValue(of: Task { await monitor.stop() }, "the monitor stops")
        if let tid { #expect(try await ProcessThreads.waitUntilGone(tid), "the monitor's thread ended") }
    }

    /// Runs `ip` in the client namespace.
    func client(_ arguments: String...) async throws {
        try await topology.client.ip(arguments)
    }

    /// Runs `ip` in the server namespace.
    func server(_ arguments: String...) async throws {
        try await topology.server.ip(arguments)
    }

    /// Waits (bounded) until the latest published verdict satisfies `predicate` and the
    /// monitor's snapshot equals a fresh kernel dump; records a test issue otherwise.
    func expectSettled(
        _ description: String,
        timeout: Duration = hangGuard,
        sourceLocation: SourceLocation = #_sourceLocation,
        _ predicate: (Verdict) -> Bool
    ) async throws {
        let deadline = ContinuousClock.now + timeout
        var dump: NetworkSnapshot
        // The last look always comes after the deadline, so a test process that was busy
        // elsewhere for a while is judged on a fresh dump, not on one taken before the wait.
        while true {
            dump = try await NetlinkMonitor.dumpSnapshot(networkNamespacePath: topology.client.path, lookingUp: destination.kernelLookups)
            if let latest, predicate(latest), monitor.snapshot == dump,
               predicate(ConnectivityPolicy.evaluate(dump, for: destination)) {
                return
            }
            if ContinuousClock.now >= deadline { break }
            try await Task.sleep(for: .milliseconds(20))
        }
        let diff = SnapshotDiff(monitor: monitor.snapshot, kernel: dump)
        Issue.record(
            "\(description): latest verdict \(latest.map(String.init(describing:)) ?? "none"), kernel dump says \(ConnectivityPolicy.evaluate(dump, for: destination)); snapshot vs kernel: \(diff)",
            sourceLocation: sourceLocation
        )
    }
}

extension MonitorHarness {
    /// Waits for `predicate` (``expectSettled(_:timeout:sourceLocation:_:)``), then holds the
    /// verdict against `ip route get` for `host`, an oracle with its own netlink code and parser.
    /// With `model`, also checks what the snapshot model alone says (main table, no rules): the
    /// answer syncd gave before it asked the kernel, where that differs.
    func expectKernelAgrees(
        _ description: String,
        about host: IPAddress,
        model expectedModel: Verdict? = nil,
        sourceLocation: SourceLocation = #_sourceLocation,
        _ predicate: (Verdict) -> Bool
    ) async throws {
        try await expectSettled(description, sourceLocation: sourceLocation, predicate)
        let oracle = try await IPRouteGet.ask(host, in: topology.client)
        let dump = try await NetlinkMonitor.dumpSnapshot(networkNamespacePath: topology.client.path, lookingUp: [host])
        let verdict = latest ?? .offline(.noCarrier)
        #expect(oracle.agrees(with: verdict, for: host, in: dump), "\(description): syncd says \(verdict), ip route get says \(oracle)", sourceLocation: sourceLocation)
        if let expectedModel {
            #expect(ConnectivityPolicy.evaluateModel(dump, for: .addresses([host])) == expectedModel, "\(description): model", sourceLocation: sourceLocation)
        }
    }
}

final class Recorder: Sendable {
    let values = Mutex<[Verdict]>([])
    let threads = Mutex<[Int32?]>([])
}

extension Verdict {
    func isOffline(_ reason: OfflineReason) -> Bool { self == .offline(reason) }
    func isOnline(via link: String, family: AddressFamily = .ipv4) -> Bool {
        if case .online(let path) = self { return path.link == link && path.family == family }
        return false
    }
}
