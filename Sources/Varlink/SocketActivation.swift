#if canImport(Glibc)
import Glibc
#endif
import Foundation

/// systemd socket activation (`sd_listen_fds(3)`), without linking libsystemd.
public enum SocketActivation {
    /// The first descriptor systemd passes (`SD_LISTEN_FDS_START`).
    public static let firstDescriptor: Int32 = 3

    /// The passed descriptors, each with its `FileDescriptorName=`, when systemd started this
    /// process through a socket unit; empty otherwise.
    public static func listenDescriptors(environment: [String: String] = ProcessInfo.processInfo.environment) -> [(fd: Int32, name: String)] {
        guard let pidText = environment["LISTEN_PID"], let pid = Int32(pidText), pid == getpid(),
              let countText = environment["LISTEN_FDS"], let count = Int32(countText), count > 0
        else { return [] }
        let names = environment["LISTEN_FDNAMES"].map { $0.split(separator: ":", omittingEmptySubsequences: false).map(String.init) } ?? []
        return (0..<count).map { offset in
            let fd = firstDescriptor + offset
            let name = Int(offset) < names.count ? names[Int(offset)] : "unknown"
            return (fd, name)
        }
    }

    /// The first passed listening AF_UNIX stream socket, preferring one named `name`.
    public static func unixListener(named name: String? = nil, environment: [String: String] = ProcessInfo.processInfo.environment) -> Int32? {
        let candidates = listenDescriptors(environment: environment).filter { UnixSocket.isListeningUnixStream($0.fd) }
        if let name, let match = candidates.first(where: { $0.name == name }) { return match.fd }
        return candidates.first?.fd
    }
}
