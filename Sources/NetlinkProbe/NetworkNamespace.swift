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

    public init(prefix: String = "sd") throws {
        guard geteuid() == 0 else { throw ProbeError("creating a network namespace needs root", EPERM) }
        let n = NetworkNamespace.counter.add(1, ordering: .relaxed).newValue
        name = "\(prefix)\(getpid())-\(n)"
        try runCommand(["ip", "netns", "add", name])
        try ip("link", "set", "lo", "up")
    }

    /// Runs `ip` inside the namespace.
    @discardableResult
    public func ip(_ arguments: String...) throws -> String {
        try runCommand(["ip", "-n", name] + arguments)
    }

    /// Runs `ip -batch -` inside the namespace with the given lines (fast for thousands of operations).
    public func ipBatch(_ lines: [String], force: Bool = false) throws {
        try runCommand(["ip", "-n", name] + (force ? ["-force"] : []) + ["-batch", "-"], input: lines.joined(separator: "\n") + "\n")
    }

    /// Runs any command inside the namespace.
    @discardableResult
    public func exec(_ arguments: [String], allowFailure: Bool = false) throws -> String {
        try runCommand(["ip", "netns", "exec", name] + arguments, allowFailure: allowFailure)
    }

    deinit {
        _ = try? runCommand(["ip", "netns", "del", name], allowFailure: true)
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

    public init(configure: Bool = true) throws {
        client = try NetworkNamespace(prefix: "sdc")
        server = try NetworkNamespace(prefix: "sds")
        try client.ip("link", "add", Self.clientLink, "type", "veth", "peer", "name", Self.serverLink, "netns", server.name)
        if configure {
            try server.ip("addr", "add", "\(Self.serverAddress)/24", "dev", Self.serverLink)
            try server.ip("link", "set", Self.serverLink, "up")
            try client.ip("addr", "add", "\(Self.clientAddress)/24", "dev", Self.clientLink)
            try client.ip("link", "set", Self.clientLink, "up")
            try client.ip("route", "add", "default", "via", Self.serverAddress, "dev", Self.clientLink)
        }
    }
}
