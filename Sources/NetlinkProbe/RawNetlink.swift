import CNetlink
import Foundation
import NetlinkMonitor

#if canImport(Glibc)
import Glibc
#endif

/// Plain rtnetlink sockets with no library in between: the baseline that the monitor's latency
/// is held against, and a way to change a link from inside the process so the change is timed
/// from the system call rather than from spawning `ip`.
public enum RawNetlink {
    /// `RTMGRP_LINK`.
    public static let linkGroup: UInt32 = 1

    /// Opens an `AF_NETLINK`/`NETLINK_ROUTE` socket subscribed to `groups`, inside the namespace
    /// at `namespacePath` (or the caller's own).
    public static func open(groups: UInt32, namespacePath: String? = nil) async throws -> Int32 {
        try await onFreshThread(namespacePath: namespacePath) {
            let fd = socket(AF_NETLINK, Int32(SOCK_RAW.rawValue) | Int32(SOCK_CLOEXEC.rawValue), NETLINK_ROUTE)
            guard fd >= 0 else { throw ProbeError("socket(AF_NETLINK)", errno) }
            var address = sockaddr_nl()
            address.nl_family = sa_family_t(AF_NETLINK)
            address.nl_groups = groups
            let bound = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_nl>.size)) }
            }
            guard bound == 0 else {
                let code = errno
                close(fd)
                throw ProbeError("bind(AF_NETLINK)", code)
            }
            return fd
        }
    }

    /// Sets or clears `IFF_UP` on a link with one RTM_NEWLINK request and waits for the kernel's ack.
    public static func setLink(fd: Int32, index: Int32, up: Bool, sequence: UInt32) throws {
        var message = [UInt8](repeating: 0, count: 32)
        func put32(_ value: UInt32, at offset: Int) { withUnsafeBytes(of: value.littleEndian) { message.replaceSubrange(offset..<offset + 4, with: $0) } }
        func put16(_ value: UInt16, at offset: Int) { withUnsafeBytes(of: value.littleEndian) { message.replaceSubrange(offset..<offset + 2, with: $0) } }
        put32(32, at: 0)                                   // nlmsg_len
        put16(UInt16(RTM_NEWLINK), at: 4)                  // nlmsg_type
        put16(UInt16(NLM_F_REQUEST | NLM_F_ACK), at: 6)    // nlmsg_flags
        put32(sequence, at: 8)                             // nlmsg_seq
        message[16] = UInt8(AF_UNSPEC)                     // ifi_family
        put32(UInt32(bitPattern: index), at: 20)           // ifi_index
        put32(up ? 1 : 0, at: 24)                          // ifi_flags (IFF_UP)
        put32(1, at: 28)                                   // ifi_change: only IFF_UP
        guard send(fd, message, message.count, 0) == message.count else { throw ProbeError("send RTM_NEWLINK", errno) }
        var reply = [UInt8](repeating: 0, count: 4096)
        let received = recv(fd, &reply, reply.count, 0)
        guard received >= 20 else { throw ProbeError("recv ack", errno) }
        let code = reply[16..<20].withUnsafeBytes { Int32(littleEndian: $0.loadUnaligned(as: Int32.self)) }
        if code != 0 { throw ProbeError("RTM_NEWLINK", -code) }
    }

    /// The interface index of `name` inside a namespace.
    public static func linkIndex(named name: String, namespacePath: String? = nil) async throws -> Int32 {
        let snapshot = try await NetlinkMonitor.dumpSnapshot(networkNamespacePath: namespacePath)
        guard let link = snapshot.link(named: name) else { throw ProbeError("no link named \(name)", ENODEV) }
        return link.index
    }

    /// Runs `body` on a new thread that first enters the namespace (sockets keep it for life).
    static func onFreshThread<T: Sendable>(namespacePath: String?, _ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
            Thread {
                do {
                    if let namespacePath {
                        let nsFD = Glibc.open(namespacePath, O_RDONLY | O_CLOEXEC)
                        guard nsFD >= 0 else { throw ProbeError("open \(namespacePath)", errno) }
                        defer { close(nsFD) }
                        guard setns(nsFD, syncd_clone_newnet()) == 0 else { throw ProbeError("setns", errno) }
                    }
                    continuation.resume(returning: try body())
                } catch {
                    continuation.resume(throwing: error)
                }
            }.start()
        }
    }
}

/// A failed system call in a probe.
public struct ProbeError: Error, CustomStringConvertible {
    public var operation: String
    public var code: Int32
    init(_ operation: String, _ code: Int32) {
        self.operation = operation
        self.code = code
    }
    public var description: String { "\(operation): \(String(cString: strerror(code)))" }
}
