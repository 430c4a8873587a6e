#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Synchronization

/// A blocking AF_UNIX stream connection that can send any bytes and reads raw NUL-terminated
/// (Varlink) messages, for tests that must not go through the project's own Varlink code:
/// fuzzing a control socket, flooding a server past its queue bounds.
///
/// Every call blocks the calling thread: use it from ``onDedicatedThread(_:)``, never on the
/// cooperative pool. Each blocking system call (connecting, every send, every read) is bounded
/// by the `timeout` given to ``init(path:timeout:)`` (`SO_SNDTIMEO`/`SO_RCVTIMEO`); a send to a
/// full socket waits, within that bound, for the server to read. Bytes received past the last
/// message returned are kept for the next read, whichever of ``read()``, ``poll()``,
/// ``drain()`` and ``receive(count:timeout:)`` makes it; reads are serialized by a lock.
/// The descriptor is closed when the object is released.
public final class RawSocket: Sendable {
    private let fd: Int32
    /// Bytes received past the last message returned; only one thread reads at a time.
    private let pending = Mutex<[UInt8]>([])
    /// Whether a read has seen the connection's end (end of file or an error).
    private let ended = Mutex(false)

    /// What a read found.
    public enum Read: Equatable, Sendable, CustomStringConvertible {
        /// One NUL-terminated message, without its NUL. From ``poll()`` an empty message may
        /// also mean bytes arrived that do not end a message yet.
        case message([UInt8])
        /// The server closed the connection (orderly).
        case eof
        /// The connection was reset (the server closed with our bytes unread), or another error.
        case reset
        /// Nothing arrived in time (from ``poll()``: nothing is there yet).
        case timeout

        /// The case, and up to 300 bytes of a message as UTF-8.
        public var description: String {
            switch self {
            case .message(let bytes): "message \(String(decoding: bytes.prefix(300), as: UTF8.self))"
            case .eof: "end of file"
            case .reset: "connection reset"
            case .timeout: "timeout"
            }
        }
    }

    /// A system call that failed: which one, and its `errno`.
    public struct Failure: Error, CustomStringConvertible {
        /// The call (and for `connect`, the path).
        public var operation: String
        /// The `errno` it set (`EAGAIN` when a send timed out, `EPIPE` or `ECONNRESET` when the
        /// server has gone).
        public var code: Int32
        /// The operation and `strerror(code)`.
        public var description: String { "\(operation): \(String(cString: strerror(code)))" }
    }

    /// Connects to the socket at `path`; throws ``Failure`` when it cannot (no such socket,
    /// refused, the path too long for `sun_path`, or the listen backlog full past `timeout`).
    ///
    /// `timeout` bounds each blocking call: connecting, every send and every read. By default it
    /// is the hang guard, since where a test reads it expects a reply or the connection's end,
    /// and `.timeout` only tells a server that never sent either.
    public init(path: String, timeout: Duration = hangGuard) throws {
        fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw Failure(operation: "socket", code: errno) }
        var limit = timeval(tv_sec: Int(timeout.components.seconds), tv_usec: Int(timeout.components.attoseconds / 1_000_000_000_000))
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        // Also bounds connect(2) on AF_UNIX when the listen backlog is full.
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else {
            close(fd)
            throw Failure(operation: "connect \(path)", code: ENAMETOOLONG)
        }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard result == 0 else {
            let code = errno
            close(fd)
            throw Failure(operation: "connect \(path)", code: code)
        }
    }

    deinit { close(fd) }

    /// Whether a read (any of them) has seen the connection end: end of file, a reset or
    /// another error. A timeout is not an end.
    public var endedByPeer: Bool { ended.withLock { $0 } }

    /// Sends all of `bytes`, blocking while the socket is full (the server not reading), each
    /// wait bounded by the connection's timeout. Never raises SIGPIPE; throws ``Failure`` when
    /// the server has gone or a wait timed out (some of the bytes may have been sent then).
    public func send(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if sent < 0 {
                if errno == EINTR { continue }
                throw Failure(operation: "send", code: errno)
            }
            offset += sent
        }
    }

    /// Sends what of `bytes` the socket takes without waiting; returns how many it took (0 when
    /// it is full). Throws ``Failure`` when the server has gone.
    public func sendWithoutWaiting(_ bytes: ArraySlice<UInt8>) throws -> Int {
        var offset = bytes.startIndex
        while offset < bytes.endIndex {
            let sent = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT)) }
            if sent < 0 {
                if errno == EINTR { continue }
                if errno == EAGAIN || errno == EWOULDBLOCK { break }
                throw Failure(operation: "send", code: errno)
            }
            offset += sent
        }
        return offset - bytes.startIndex
    }

    /// Sets the socket's send buffer (`SO_SNDBUF`; the kernel doubles it and keeps a minimum),
    /// so that what the server has not read is held mostly in the server's hands, not the
    /// kernel's.
    public func limitSendBuffer(to bytes: Int32) {
        var size = bytes
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, socklen_t(MemoryLayout<Int32>.size))
    }

    /// Sends `text` as UTF-8 followed by the NUL that ends a Varlink message, as ``send(_:)``.
    public func sendMessage(_ text: String) throws { try send(Array(text.utf8) + [0]) }

    /// Shuts down the sending side: the server reads end of file but may still answer.
    public func shutdownWrite() { shutdown(fd, Int32(SHUT_WR)) }

    /// The next message, or how the connection ended; `.timeout` when nothing came within the
    /// connection's timeout.
    public func read() -> Read {
        pending.withLock { buffer in
            while true {
                if let message = Self.takeMessage(from: &buffer) { return .message(message) }
                switch receiveChunk(into: &buffer, flags: 0) {
                case .data, .interrupted: continue
                case .wouldBlock: return .timeout
                case .end(let end): return end
                }
            }
        }
    }

    /// How the connection stands right now, without waiting: a buffered or arrived message, its
    /// end, `.message([])` when bytes arrived without a NUL yet, or `.timeout` when nothing is
    /// there.
    public func poll() -> Read {
        pending.withLock { buffer in
            if let message = Self.takeMessage(from: &buffer) { return .message(message) }
            while true {
                switch receiveChunk(into: &buffer, flags: Int32(MSG_DONTWAIT)) {
                case .data: return .message([])  // data without a NUL yet: something arrived
                case .interrupted: continue
                case .wouldBlock: return .timeout
                case .end(let end): return end
                }
            }
        }
    }

    /// Reads until the connection ends or a read times out; returns the messages seen on the way
    /// and how it ended (`.eof`, `.reset` or `.timeout`).
    public func drain() -> (messages: [[UInt8]], end: Read) {
        var messages: [[UInt8]] = []
        while true {
            let next = read()
            guard case .message(let bytes) = next else { return (messages, next) }
            messages.append(bytes)
        }
    }

    /// Reads up to `count` messages, decoded as UTF-8 without their NULs; stops early when the
    /// connection ends (see ``endedByPeer``) or once `timeout` of real time has passed, and
    /// returns what it has then.
    public func receive(count: Int, timeout: Duration) -> [String] {
        let deadline = ContinuousClock.now + timeout
        return pending.withLock { buffer in
            var messages: [String] = []
            while messages.count < count {
                if let message = Self.takeMessage(from: &buffer) {
                    messages.append(String(decoding: message, as: UTF8.self))
                    continue
                }
                let left = deadline - ContinuousClock.now
                guard left > .zero else { break }
                var pollFD = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                let ready = Glibc.poll(&pollFD, 1, Int32(clamping: Int64((left / .milliseconds(1)).rounded(.up))))
                if ready < 0 && errno != EINTR { break }
                guard ready > 0 else { continue }
                if case .end = receiveChunk(into: &buffer, flags: Int32(MSG_DONTWAIT)) { break }
            }
            return messages
        }
    }

    private enum Chunk {
        case data, interrupted, wouldBlock
        case end(Read)
    }

    /// One `recv` appended to `buffer`; records the connection's end.
    private func receiveChunk(into buffer: inout [UInt8], flags: Int32) -> Chunk {
        var chunk = [UInt8](repeating: 0, count: 65_536)
        let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, flags) }
        if count > 0 {
            buffer += chunk[..<count]
            return .data
        }
        if count < 0 {
            switch errno {
            case EINTR: return .interrupted
            case EAGAIN, EWOULDBLOCK: return .wouldBlock
            default: break
            }
        }
        ended.withLock { $0 = true }
        return .end(count == 0 ? .eof : .reset)
    }

    /// The first NUL-terminated message in `buffer`, removed with its NUL.
    private static func takeMessage(from buffer: inout [UInt8]) -> [UInt8]? {
        guard let nul = buffer.firstIndex(of: 0) else { return nil }
        let message = Array(buffer[..<nul])
        buffer.removeSubrange(...nul)
        return message
    }
}

/// A Varlink reply as raw JSON (Foundation's `JSONSerialization`): enough to check error names
/// and parameters without trusting the project's own decoder.
public struct RawReply: CustomStringConvertible {
    /// The reply's top-level object.
    public var object: [String: Any]
    /// The reply's bytes as UTF-8.
    public var text: String

    /// Parses one message (without its NUL); `nil` unless it is a JSON object.
    public init?(_ bytes: [UInt8]) {
        text = String(decoding: bytes, as: UTF8.self)
        guard let object = (try? JSONSerialization.jsonObject(with: Data(bytes))) as? [String: Any] else { return nil }
        self.object = object
    }

    /// The `error` member: the error's qualified name, `nil` in a successful reply.
    public var error: String? { object["error"] as? String }
    /// The `parameters` member, empty when missing.
    public var parameters: [String: Any] { object["parameters"] as? [String: Any] ?? [:] }
    /// The `continues` member, `false` when missing.
    public var continues: Bool { object["continues"] as? Bool ?? false }
    /// The reply's text.
    public var description: String { text }
}
