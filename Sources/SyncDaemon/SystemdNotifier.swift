import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// The sd_notify(3) protocol: datagrams to `$NOTIFY_SOCKET`. A no-op outside systemd.
///
/// Written against the protocol rather than libsystemd: it is one `sendto` of `KEY=VALUE` lines,
/// and keeping libsystemd out leaves the daemon with one C dependency (libnl).
public struct SystemdNotifier: Sendable {
    private let socketPath: String?

    /// Reads `NOTIFY_SOCKET` from the environment.
    public init(environment: [String: String] = ProcessInfo.processInfo.environment) {
        socketPath = environment["NOTIFY_SOCKET"].flatMap { $0.isEmpty ? nil : $0 }
    }

    /// Sends `READY=1`, `STATUS=…` and the like. Failures are returned, never fatal.
    ///
    /// Never waits: a reader that stopped reading (a stuck manager, a test's socket) lets only a
    /// few datagrams queue (`net.unix.max_dgram_qlen`, 10 by default), and a blocking send then
    /// held the calling thread for good, and with it every task of the executor it serves (the
    /// control socket stopped answering). A notification that does not fit is dropped, and the
    /// call returns false.
    @discardableResult
    public func notify(_ assignments: String...) -> Bool {
        guard let socketPath else { return false }
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        var pathBytes = Array(socketPath.utf8)
        // "@name" is an abstract socket: the name starts with a NUL byte.
        if pathBytes.first == UInt8(ascii: "@") { pathBytes[0] = 0 }
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard pathBytes.count < capacity else { return false }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: pathBytes)
        }
        let length = socklen_t(MemoryLayout<sa_family_t>.size + pathBytes.count)
        let message = Array(assignments.joined(separator: "\n").utf8)
        let sent = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { sockaddrPointer in
                sendto(fd, message, message.count, Int32(MSG_NOSIGNAL) | Int32(MSG_DONTWAIT), sockaddrPointer, length)
            }
        }
        return sent == message.count
    }

    /// Half of `WATCHDOG_USEC` when the watchdog is enabled for this process, as sd_watchdog_enabled(3) advises.
    public static func watchdogInterval(environment: [String: String] = ProcessInfo.processInfo.environment) -> Duration? {
        guard let text = environment["WATCHDOG_USEC"], let usec = UInt64(text), usec > 0 else { return nil }
        if let pid = environment["WATCHDOG_PID"], pid != String(getpid()) { return nil }
        return .microseconds(Int64(usec / 2))
    }
}
