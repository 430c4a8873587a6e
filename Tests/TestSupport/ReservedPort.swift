import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A TCP port on 127.0.0.1 held by a bound socket for as long as this object lives: not listening
/// (connections are refused) or listening with a backlog of 0 (the first connection queues, later
/// SYNs are dropped, as by a silent firewall).
///
/// Closing a server and reusing its port races with parallel tests, whose servers may take the
/// freed port in between; a held port cannot be taken.
public final class ReservedPort: Sendable {
    public let fd: Int32
    public let port: Int

    public init(listening: Bool = false) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) } }
        if listening { listen(fd, 0) }
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
        self.fd = fd
        port = Int(UInt16(bigEndian: address.sin_port))
    }

    deinit { close(fd) }
}
