import Foundation
import NIOHTTP1

/// An HTTP/1.1 response's size on the wire, as near as what a client reads of it tells: the
/// status line and header fields as sent (`name: value` and CRLF each, the blank line), and the
/// body as transferred. A compressed body counts its declared `Content-Length` when the server
/// gave one, else its decoded bytes, which only overstates it. Chunk framing and TLS records are
/// not counted.
enum WireSize {
    /// The size of a response with `status` and `headers` of which `bodyBytesRead` body bytes
    /// were read after content decoding.
    static func response(status: HTTPResponseStatus, headers: HTTPHeaders, bodyBytesRead: Int) -> Int {
        head(status: status, headers: headers) + body(headers: headers, bytesRead: bodyBytesRead)
    }

    /// `HTTP/1.1 200 OK` and CRLF, each field and its CRLF, and the blank line.
    static func head(status: HTTPResponseStatus, headers: HTTPHeaders) -> Int {
        var size = "HTTP/1.1 ".utf8.count + 3 + 1 + status.reasonPhrase.utf8.count + 2
        for (name, value) in headers { size += name.utf8.count + 2 + value.utf8.count + 2 }
        return size + 2
    }

    /// The body's transferred size: its declared length when it was content-encoded.
    static func body(headers: HTTPHeaders, bytesRead: Int) -> Int {
        guard let encoding = headers.first(name: "content-encoding"), encoding.lowercased() != "identity",
              let declared = headers.first(name: "content-length").flatMap({ Int($0.trimmingCharacters(in: .whitespaces)) }),
              declared >= 0
        else { return bytesRead }
        return declared
    }
}
