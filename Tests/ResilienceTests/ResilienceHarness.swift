import ConnectivityPolicy
import Foundation
import NetlinkMonitor
import Synchronization
import Testing
import TestSupport

/// One change applied to the veth topology during a randomized or flapping run.
enum Operation: Sendable, CustomStringConvertible {
    /// Admin state of the client's own link (`veth-c`), set in-process with RTM_NEWLINK.
    case clientLink(up: Bool)
    /// Admin state of the peer (`veth-s`): the client link's carrier follows it.
    case peerLink(up: Bool)
    /// One `ip -batch` line run in the client namespace (addresses and routes).
    case ip(String)

    var description: String {
        switch self {
        case .clientLink(let up): "client link \(up ? "up" : "down")"
        case .peerLink(let up): "peer link \(up ? "up" : "down")"
        case .ip(let line): "ip \(line)"
        }
    }
}

/// What a consumer received, in order, readable from any task while it goes on.
final class ReceivedLog<Element: Sendable>: Sendable {
    private let values = Mutex<[Element]>([])
    func append(_ value: Element) { values.withLock { $0.append(value) } }
    var all: [Element] { values.withLock { $0 } }
    var latest: Element? { values.withLock { $0.last } }
}

/// The verdicts a consumer received, one log per watched destination.
typealias VerdictLog = ReceivedLog<Verdict>

/// Two namespaces joined by a veth pair, the client side watched by a running monitor, plus
/// in-process control sockets for fast link changes on either side.
///
/// Built here rather than with `VethTopology` for one reason: the two ends get different
/// interface indexes. The kernel's linkwatch treats a carrier change as urgent only when a
/// device's ifindex differs from its iflink (the peer's index); with equal indexes (both 2 in
/// fresh namespaces) a peer-caused carrier change reaches the client up to a second late and a
/// flap faster than that never shows at all. Every namespace, socket and the monitor go away
/// when the harness is released.
final class ResilienceHarness: Sendable {
    static let link = "veth-c"
    static let peerLink = "veth-s"
    static let clientIndex: Int32 = 17
    static let peerIndex: Int32 = 19
    static let gateway4 = "10.77.0.2"
    static let gateway6 = "fd00:77::2"

    let client: NetworkNamespace
    let server: NetworkNamespace
    let monitor: NetlinkMonitor
    private let clientControl: Int32
    private let peerControl: Int32

    init() async throws {
        client = try await NetworkNamespace(prefix: "src")
        server = try await NetworkNamespace(prefix: "srs")
        try await client.ip("link", "add", Self.link, "index", "\(Self.clientIndex)", "type", "veth",
                      "peer", "name", Self.peerLink, "index", "\(Self.peerIndex)", "netns", server.name)
        try await server.ipBatch([
            "address add \(Self.gateway4)/24 dev \(Self.peerLink)",
            // The peer answers for an IPv6 gateway as well, so IPv6 routes via it can be added.
            "address add \(Self.gateway6)/64 dev \(Self.peerLink) nodad",
            "link set \(Self.peerLink) up",
        ])
        try await client.ipBatch([
            "address add 10.77.0.1/24 dev \(Self.link)",
            "link set \(Self.link) up",
            "route add default via \(Self.gateway4) dev \(Self.link)",
        ])
        clientControl = try await RawNetlink.open(groups: 0, namespacePath: client.path)
        peerControl = try await RawNetlink.open(groups: 0, namespacePath: server.path)
        monitor = NetlinkMonitor(configuration: .init(networkNamespacePath: client.path))
        try await monitor.start()
    }

    deinit {
        close(clientControl)
        close(peerControl)
    }

    /// Applies `operations` in order; consecutive `ip` lines go to one `ip -force -batch`
    /// (failures such as deleting a missing route are part of the game and are ignored).
    func apply(_ operations: [Operation], sequence: inout UInt32) async throws {
        var pending: [String] = []
        func flush() async throws {
            guard !pending.isEmpty else { return }
            try await client.ipBatch(pending, force: true)
            pending = []
        }
        for operation in operations {
            switch operation {
            case .ip(let line):
                pending.append(line)
            case .clientLink(let up):
                try await flush()
                try RawNetlink.setLink(fd: clientControl, index: Self.clientIndex, up: up, sequence: sequence)
                sequence &+= 1
            case .peerLink(let up):
                try await flush()
                try RawNetlink.setLink(fd: peerControl, index: Self.peerIndex, up: up, sequence: sequence)
                sequence &+= 1
            }
        }
        try await flush()
    }

    /// A fresh dump of the client namespace's tables, with the kernel's routes to `addresses`
    /// (the ones the monitor tracks, so the two compare equal; by default those an internet
    /// verdict tracks).
    func kernel(lookingUp addresses: [IPAddress] = Destination.internetProbes) async throws -> NetworkSnapshot {
        try await NetlinkMonitor.dumpSnapshot(networkNamespacePath: client.path, lookingUp: addresses)
    }

    /// Waits (bounded) until the monitor's snapshot equals a fresh dump and `agrees` holds for
    /// that dump. Returns `nil` on success, or the last dump seen on timeout.
    func waitForAgreement(timeout: Duration = hangGuard, lookingUp addresses: [IPAddress] = Destination.internetProbes, _ agrees: (NetworkSnapshot) -> Bool = { _ in true }) async throws -> NetworkSnapshot? {
        let deadline = ContinuousClock.now + timeout
        // As in the monitor tests: the last comparison is made after the deadline, on a fresh dump.
        while true {
            let dump = try await kernel(lookingUp: addresses)
            if monitor.snapshot == dump && agrees(dump) { return nil }
            if ContinuousClock.now >= deadline { return dump }
            try await Task.sleep(for: .milliseconds(5))
        }
    }
}
