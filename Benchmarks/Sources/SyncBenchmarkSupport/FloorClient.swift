import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// The floor a feed sync cannot beat: one keep-alive TCP connection on a raw socket that walks
/// every page by its `Link: rel="next"` header, reading each body and nothing more: no JSON
/// parse, no store, no status. What is left is the server's time, the kernel's and the wire's.
///
/// It asks for gzip as syncd does (the server then sends the same bytes to both), reads
/// `Content-Length` and chunked bodies, and runs on a thread of its own with blocking calls.
public enum FloorClient {
    public struct Walk: Sendable {
        public var pages: Int
        public var bodyBytes: Int
        public var seconds: Double
    }

    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    /// Walks the feed at `url` (http://127.0.0.1:PORT/PATH) from its first page to its last.
    public static func walk(_ url: URL) async throws -> Walk {
        try await withCheckedThrowingContinuation { continuation in
            Thread { continuation.resume(with: Result { try walkBlocking(url) }) }.start()
        }
    }

    static func walkBlocking(_ url: URL) throws -> Walk {
        guard let host = url.host, let port = url.port else { throw Failure(description: "need host and port in \(url)") }
        let start = ContinuousClock.now
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw Failure(description: "socket: \(errno)") }
        defer { close(fd) }
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        guard inet_pton(AF_INET, host, &address.sin_addr) == 1 else { throw Failure(description: "not an IPv4 address: \(host)") }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { throw Failure(description: "connect: \(errno)") }

        var reader = Reader(fd: fd)
        var target: String? = url.path + (url.query.map { "?" + $0 } ?? "")
        var pages = 0, bodyBytes = 0
        while let path = target {
            let request = "GET \(path) HTTP/1.1\r\nHost: \(host):\(port)\r\nAccept: application/json\r\nAccept-Encoding: gzip\r\n\r\n"
            try sendAll(fd, Array(request.utf8))
            let head = try reader.head()
            guard head.status == 200 else { throw Failure(description: "GET \(path): status \(head.status)") }
            bodyBytes += try reader.skipBody(contentLength: head.contentLength, chunked: head.chunked)
            pages += 1
            target = head.next.flatMap { URL(string: $0) }.map { $0.path + ($0.query.map { "?" + $0 } ?? "") }
        }
        return Walk(pages: pages, bodyBytes: bodyBytes, seconds: (ContinuousClock.now - start).seconds)
    }

    private static func sendAll(_ fd: Int32, _ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, 0) }
            guard sent > 0 else { throw Failure(description: "send: \(errno)") }
            offset += sent
        }
    }

    struct Head {
        var status = 0
        var contentLength: Int?
        var chunked = false
        var next: String?
    }

    /// Buffered reads from the socket.
    struct Reader {
        let fd: Int32
        var buffer = [UInt8](repeating: 0, count: 256 << 10)
        var start = 0
        var end = 0

        init(fd: Int32) { self.fd = fd }

        mutating func fill() throws {
            if start == end { start = 0; end = 0 }
            if end == buffer.count {
                buffer.replaceSubrange(0..<(end - start), with: buffer[start..<end])
                end -= start
                start = 0
            }
            let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress! + end, $0.count - end, 0) }
            guard count > 0 else { throw Failure(description: count == 0 ? "connection closed" : "recv: \(errno)") }
            end += count
        }

        mutating func line() throws -> String {
            while true {
                if let newline = buffer[start..<end].firstIndex(of: UInt8(ascii: "\n")) {
                    var stop = newline
                    if stop > start, buffer[stop - 1] == UInt8(ascii: "\r") { stop -= 1 }
                    let text = String(decoding: buffer[start..<stop], as: UTF8.self)
                    start = newline + 1
                    return text
                }
                try fill()
            }
        }

        mutating func head() throws -> Head {
            var head = Head()
            let status = try line()
            head.status = Int(status.split(separator: " ").dropFirst().first ?? "") ?? 0
            while true {
                let header = try line()
                if header.isEmpty { return head }
                guard let colon = header.firstIndex(of: ":") else { continue }
                let name = header[..<colon].lowercased()
                let value = header[header.index(after: colon)...].trimmingCharacters(in: .whitespaces)
                switch name {
                case "content-length": head.contentLength = Int(value)
                case "transfer-encoding": head.chunked = value.lowercased().contains("chunked")
                case "link":
                    for part in value.split(separator: ",") where part.contains("rel=\"next\"") {
                        if let open = part.firstIndex(of: "<"), let close = part.firstIndex(of: ">") {
                            head.next = String(part[part.index(after: open)..<close])
                        }
                    }
                default: break
                }
            }
        }

        mutating func skip(_ count: Int) throws {
            var left = count
            while left > 0 {
                if start == end { try fill() }
                let take = min(left, end - start)
                start += take
                left -= take
            }
        }

        mutating func skipBody(contentLength: Int?, chunked: Bool) throws -> Int {
            if let contentLength {
                try skip(contentLength)
                return contentLength
            }
            guard chunked else { throw Failure(description: "a body without length or chunking") }
            var total = 0
            while true {
                let size = Int(try line().split(separator: ";").first ?? "", radix: 16) ?? 0
                if size == 0 {
                    while try !line().isEmpty {}  // trailers, then the blank line
                    return total
                }
                try skip(size)
                total += size
                _ = try line()  // the CRLF after the chunk
            }
        }
    }
}
