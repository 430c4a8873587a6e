import CNetlink
import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A link message as a plain netlink socket saw it, stamped when `recv` returned.
public struct RawLinkEvent: Sendable {
    public var index: Int32
    public var flags: UInt32
    public var receivedAt: ContinuousClock.Instant
}

/// Reads RTM_NEWLINK messages from a raw socket on its own thread: no parsing beyond the
/// header, no cache, so its timestamps are the floor any monitor can reach.
public final class RawLinkListener: Sendable {
    private let fd: Int32
    private let stopping = StopFlag()
    public let events: AsyncStream<RawLinkEvent>

    /// Takes ownership of `fd` (from ``RawNetlink/open(groups:namespacePath:)``).
    public init(fd: Int32) {
        self.fd = fd
        let (events, continuation) = AsyncStream<RawLinkEvent>.makeStream()
        self.events = events
        // A receive timeout lets the thread notice `close()`: closing a netlink socket does not wake `recv`.
        var timeout = timeval(tv_sec: 0, tv_usec: 100_000)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let stopping = self.stopping
        Thread {
            defer { Glibc.close(fd) }
            var buffer = [UInt8](repeating: 0, count: 64 * 1024)
            while true {
                let count = recv(fd, &buffer, buffer.count, 0)
                let now = ContinuousClock.now
                if stopping.flag.load(ordering: .relaxed) { break }
                if count < 0 && (errno == EINTR || errno == EAGAIN) { continue }
                if count <= 0 { break }
                var offset = 0
                while offset + 32 <= count {
                    let length = Int(buffer.load32(at: offset))
                    let type = UInt16(truncatingIfNeeded: buffer.load32(at: offset + 4))
                    if type == UInt16(RTM_NEWLINK) {
                        continuation.yield(RawLinkEvent(index: Int32(bitPattern: buffer.load32(at: offset + 20)), flags: buffer.load32(at: offset + 24), receivedAt: now))
                    }
                    guard length >= 16 else { break }
                    offset += (length + 3) & ~3
                }
            }
            continuation.finish()
        }.start()
    }

    /// Stops the thread, which then closes the socket.
    public func close() {
        stopping.flag.store(true, ordering: .relaxed)
    }
}

final class StopFlag: Sendable {
    let flag = Atomic<Bool>(false)
}

extension [UInt8] {
    func load32(at offset: Int) -> UInt32 {
        self[offset..<offset + 4].withUnsafeBytes { UInt32(littleEndian: $0.loadUnaligned(as: UInt32.self)) }
    }
}
