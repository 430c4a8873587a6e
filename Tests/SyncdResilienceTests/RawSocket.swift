#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Synchronization
import TestSupport

/// A blocking AF_UNIX stream connection that can say anything, for fuzzing the control socket.
/// Every call blocks (bounded by `SO_RCVTIMEO`/`SO_SNDTIMEO`): use it from ``onDedicatedThread(_:)``.
final class RawSocket: Sendable {
    let fd: Int32
    /// Bytes received past the last message returned; only one thread reads at a time.
    private let pending = Mutex<[UInt8]>([])

    enum Read: Equatable, CustomStringConvertible {
        /// One NUL-terminated message, without its NUL.
        case message([UInt8])
        /// The server closed the connection (orderly).
        case eof
        /// The connection was reset (the server closed with our bytes unread).
        case reset
        /// Nothing arrived in time.
        case timeout

        var description: String {
            switch self {
            case .message(let bytes): "message \(String(decoding: bytes.prefix(300), as: UTF8.self))"
            case .eof: "end of file"
            case .reset: "connection reset"
            case .timeout: "timeout"
            }
        }
    }

    struct Failure: Error, CustomStringConvertible {
        var operation: String
        var code: Int32
        var description: String { "\(operation): \(String(cString: strerror(code)))" }
    }

    /// Connects to `path`. `timeout` bounds each blocking call: connecting, every send and
    /// every read. By default it is the hang guard, since where a test reads it expects a reply
    /// or the connection's end, and `.timeout` only tells a server that never sent either.
    init(path: String, timeout: Duration = hangGuard) throws {
        fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw Failure(operation: "socket", code: errno) }
        var limit = timeval(tv_sec: Int(timeout.components.seconds), tv_usec: Int(timeout.components.attoseconds / 1_000_000_000_000))
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        // Also bounds connect(2) on AF_UNIX when the listen backlog is full.
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
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

    /// Sends everything (never raising SIGPIPE); throws when the server has gone.
    func send(_ bytes: [UInt8]) throws {
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

    /// Sends a string followed by the NUL that ends a Varlink message.
    func sendMessage(_ text: String) throws { try send(Array(text.utf8) + [0]) }

    /// No more bytes from this side; the server may still answer.
    func shutdownWrite() { shutdown(fd, Int32(SHUT_WR)) }

    /// The next message, or how the connection ended.
    func read() -> Read {
        pending.withLock { buffer in read(into: &buffer) }
    }

    private func read(into buffer: inout [UInt8]) -> Read {
        while true {
            if let nul = buffer.firstIndex(of: 0) {
                let message = Array(buffer[..<nul])
                buffer.removeSubrange(...nul)
                return .message(message)
            }
            var chunk = [UInt8](repeating: 0, count: 65_536)
            let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count > 0 {
                buffer += chunk[..<count]
            } else if count == 0 {
                return .eof
            } else {
                switch errno {
                case EINTR: continue
                case EAGAIN, EWOULDBLOCK: return .timeout
                default: return .reset
                }
            }
        }
    }

    /// How the connection stands right now, without waiting: a message, its end, or `.timeout`
    /// when nothing is there yet.
    func poll() -> Read {
        pending.withLock { buffer in
            if let nul = buffer.firstIndex(of: 0) {
                let message = Array(buffer[..<nul])
                buffer.removeSubrange(...nul)
                return .message(message)
            }
            var chunk = [UInt8](repeating: 0, count: 4096)
            let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
            if count > 0 {
                buffer += chunk[..<count]
                return .message([])  // data without a NUL yet: something arrived
            }
            if count == 0 { return .eof }
            return errno == EAGAIN || errno == EWOULDBLOCK ? .timeout : .reset
        }
    }

    /// Reads until the connection ends; returns the messages seen on the way and how it ended.
    func drain() -> (messages: [[UInt8]], end: Read) {
        var messages: [[UInt8]] = []
        while true {
            let next = read()
            guard case .message(let bytes) = next else { return (messages, next) }
            messages.append(bytes)
        }
    }
}

/// A Varlink reply as raw JSON: enough to check error names without trusting our own decoder.
struct RawReply: CustomStringConvertible {
    var object: [String: Any]
    var text: String

    init?(_ bytes: [UInt8]) {
        text = String(decoding: bytes, as: UTF8.self)
        guard let object = (try? JSONSerialization.jsonObject(with: Data(bytes))) as? [String: Any] else { return nil }
        self.object = object
    }

    var error: String? { object["error"] as? String }
    var parameters: [String: Any] { object["parameters"] as? [String: Any] ?? [:] }
    var continues: Bool { object["continues"] as? Bool ?? false }
    var description: String { text }
}
