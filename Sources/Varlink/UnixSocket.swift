#if canImport(Glibc)
import Glibc
#endif
import Foundation

/// A failed socket system call, with errno turned into text for the operator.
public struct VarlinkSocketError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The system call or step that failed, e.g. `bind`.
    public var operation: String
    /// The socket path involved, when there is one.
    public var path: String?
    /// The `errno` of the failure.
    public var errno: Int32

    /// The operation, path and `strerror` text.
    public var description: String {
        let reason = String(cString: strerror(errno))
        if let path { return "\(operation) \(path): \(reason)" }
        return "\(operation): \(reason)"
    }
}

/// Raw AF_UNIX helpers. Accepting is done here, not by NIO, because the peer's supplementary
/// groups (`SO_PEERGROUPS`) have a variable length that NIO's fixed-size option API cannot read.
enum UnixSocket {
    /// The longest path `sockaddr_un` can hold (without its terminating NUL).
    static let maxPathLength = MemoryLayout.size(ofValue: sockaddr_un().sun_path) - 1

    static func withAddress<R>(_ path: String, _ body: (UnsafePointer<sockaddr>, socklen_t) -> R) throws(VarlinkSocketError) -> R {
        let bytes = Array(path.utf8)
        guard !bytes.isEmpty, bytes.count <= maxPathLength else {
            throw VarlinkSocketError(operation: "socket path too long or empty", path: path, errno: ENAMETOOLONG)
        }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        return withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                body($0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
    }

    static func makeStreamSocket() throws(VarlinkSocketError) -> Int32 {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw VarlinkSocketError(operation: "socket", errno: errno) }
        return fd
    }

    /// Binds and listens on `path`, replacing a stale socket file but never a live one.
    static func listen(path: String, mode: mode_t, backlog: Int32) throws(VarlinkSocketError) -> Int32 {
        try removeStaleSocket(at: path)
        let fd = try makeStreamSocket()
        let bound = try withAddress(path) { bind(fd, $0, $1) }
        guard bound == 0 else {
            let code = errno
            close(fd)
            throw VarlinkSocketError(operation: "bind", path: path, errno: code)
        }
        guard chmod(path, mode) == 0, Glibc.listen(fd, backlog) == 0 else {
            let code = errno
            close(fd)
            unlink(path)
            throw VarlinkSocketError(operation: "listen", path: path, errno: code)
        }
        return fd
    }

    /// A socket file left by a crashed instance refuses connections; one that accepts belongs to
    /// a running instance and must not be stolen.
    private static func removeStaleSocket(at path: String) throws(VarlinkSocketError) {
        var info = stat()
        guard lstat(path, &info) == 0 else { return }
        guard info.st_mode & S_IFMT == S_IFSOCK else {
            throw VarlinkSocketError(operation: "refusing to replace non-socket", path: path, errno: EEXIST)
        }
        let probe = try makeStreamSocket()
        defer { close(probe) }
        let result = try withAddress(path) { Glibc.connect(probe, $0, $1) }
        if result == 0 {
            throw VarlinkSocketError(operation: "another service is listening on", path: path, errno: EADDRINUSE)
        }
        unlink(path)
    }

    /// Connects to `path` (blocking), for probes and simple clients.
    static func connect(path: String) throws(VarlinkSocketError) -> Int32 {
        let fd = try makeStreamSocket()
        let result = try withAddress(path) { Glibc.connect(fd, $0, $1) }
        guard result == 0 else {
            let code = errno
            close(fd)
            throw VarlinkSocketError(operation: "connect", path: path, errno: code)
        }
        return fd
    }

    /// Reads the peer's pid, uid, gid and supplementary groups.
    static func peerCredentials(of fd: Int32) throws(VarlinkSocketError) -> VarlinkPeer {
        // `struct ucred` is { pid_t, uid_t, gid_t }, three 32-bit fields; Glibc's module map hides
        // it (it needs _GNU_SOURCE), so read it as three words.
        var credentials = [UInt32](repeating: 0, count: 3)
        var length = socklen_t(MemoryLayout<UInt32>.size * 3)
        let result = credentials.withUnsafeMutableBytes { getsockopt(fd, SOL_SOCKET, SO_PEERCRED, $0.baseAddress, &length) }
        guard result == 0 else {
            throw VarlinkSocketError(operation: "getsockopt(SO_PEERCRED)", errno: errno)
        }
        return VarlinkPeer(pid: Int32(bitPattern: credentials[0]), uid: credentials[1], gid: credentials[2], groups: peerGroups(of: fd))
    }

    /// `SO_PEERGROUPS` (Linux 4.13+); an older kernel yields no supplementary groups, which
    /// only ever denies more, never grants more.
    private static func peerGroups(of fd: Int32) -> [UInt32] {
        var capacity = 64
        while capacity <= 65_536 {
            var groups = [gid_t](repeating: 0, count: capacity)
            var length = socklen_t(capacity * MemoryLayout<gid_t>.size)
            let result = groups.withUnsafeMutableBytes { getsockopt(fd, SOL_SOCKET, 59 /* SO_PEERGROUPS */, $0.baseAddress, &length) }
            if result == 0 {
                return Array(groups.prefix(Int(length) / MemoryLayout<gid_t>.size))
            }
            guard errno == ERANGE else { return [] }
            capacity = max(capacity * 2, Int(length) / MemoryLayout<gid_t>.size)
        }
        return []
    }

    /// Whether `fd` is a listening AF_UNIX stream socket (to validate an inherited descriptor).
    static func isListeningUnixStream(_ fd: Int32) -> Bool {
        var accepting: Int32 = 0
        var type: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        guard getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &accepting, &length) == 0, accepting != 0 else { return false }
        length = socklen_t(MemoryLayout<Int32>.size)
        guard getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &length) == 0, type == Int32(SOCK_STREAM.rawValue) else { return false }
        var address = sockaddr_storage()
        var addressLength = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let named = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &addressLength) }
        }
        return named == 0 && Int32(address.ss_family) == AF_UNIX
    }
}
