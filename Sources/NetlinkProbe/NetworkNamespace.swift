import Foundation
import Synchronization

/// A network namespace made for one test or probe, removed when released.
///
/// Names carry the process id and a counter so parallel tests and leftover namespaces from a
/// killed run never collide.
public final class NetworkNamespace: Sendable {
    private static let counter = Atomic<Int>(0)

    public let name: String
    /// The bind-mount path that `setns(2)` and libnl-based monitors can open.
    public var path: String { "/var/run/netns/\(name)" }

    /// Creates the namespace with `ip netns add` and brings its loopback up.
    ///
    /// Every command runs off the cooperative pool (see ``onDedicatedThread(_:)``).
    public init(prefix: String = "sd") async throws {
        guard geteuid() == 0 else { throw ProbeError("creating a network namespace needs root", EPERM) }
        let n = NetworkNamespace.counter.add(1, ordering: .relaxed).newValue
        name = "\(prefix)\(getpid())-\(n)"
        try await runCommand(["ip", "netns", "add", name])
        try await ip("link", "set", "lo", "up")
    }

    /// Runs `ip` inside the namespace.
    @discardableResult
    public func ip(_ arguments: String...) async throws -> String {
        try await ip(arguments)
    }

    /// Runs `ip` inside the namespace.
    @discardableResult
    public func ip(_ arguments: [String]) async throws -> String {
        try await runCommand(["ip", "-n", name] + arguments)
    }

    /// Runs `ip -batch -` inside the namespace with the given lines (fast for thousands of
    /// operations). With `force`, failing lines are skipped and the rest still run.
    public func ipBatch(_ lines: [String], force: Bool = false) async throws {
        try await runCommand(["ip", "-n", name] + (force ? ["-force"] : []) + ["-batch", "-"], input: lines.joined(separator: "\n") + "\n", allowFailure: force)
    }

    /// Runs any command inside the namespace.
    @discardableResult
    public func exec(_ arguments: [String], allowFailure: Bool = false) async throws -> String {
        try await runCommand(["ip", "netns", "exec", name] + arguments, allowFailure: allowFailure)
    }

    deinit {
        // What `ip netns del` does, without starting a process wherever the last reference
        // happens to be dropped: detach the bind mount, then remove its file. The namespace
        // itself goes away once nothing (a socket, a process) holds it any more.
        _ = umount2(path, Int32(MNT_DETACH))
        _ = unlink(path)
    }
}

/// Two namespaces joined by a veth pair: a client side (`client`, link `veth-c`) and a server
/// side (`server`, link `veth-s`), addressed 10.77.0.1/24 and 10.77.0.2/24.
///
/// The client side gets a default route through the server side, so "online" holds until a test
/// takes a piece away.
public final class VethTopology: Sendable {
    public let client: NetworkNamespace
    public let server: NetworkNamespace
    public static let clientLink = "veth-c"
    public static let serverLink = "veth-s"
    public static let clientAddress = "10.77.0.1"
    public static let serverAddress = "10.77.0.2"

    public init(configure: Bool = true) async throws {
        client = try await NetworkNamespace(prefix: "sdc")
        server = try await NetworkNamespace(prefix: "sds")
        try await client.ip("link", "add", Self.clientLink, "type", "veth", "peer", "name", Self.serverLink, "netns", server.name)
        if configure {
            try await server.ip("addr", "add", "\(Self.serverAddress)/24", "dev", Self.serverLink)
            try await server.ip("link", "set", Self.serverLink, "up")
            try await client.ip("addr", "add", "\(Self.clientAddress)/24", "dev", Self.clientLink)
            try await client.ip("link", "set", Self.clientLink, "up")
            try await client.ip("route", "add", "default", "via", Self.serverAddress, "dev", Self.clientLink)
        }
    }
}
