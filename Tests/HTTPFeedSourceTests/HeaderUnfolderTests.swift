@testable import HTTPFeedSource
import NIOCore
import Testing

/// The obs-fold stage on its own: what it does to a header section, byte for byte, and where it
/// finds the section's end.
struct HeaderUnfolderTests {
    @Test("obs-folds become one space; nothing else changes", arguments: [
        ("HTTP/1.1 200 OK\r\nLink: <a>; rel=\"next\",\r\n\t<b>; rel=\"prev\"\r\n\r\n",
         "HTTP/1.1 200 OK\r\nLink: <a>; rel=\"next\", <b>; rel=\"prev\"\r\n\r\n"),
        // Trailing whitespace above and leading whitespace below go; one space joins them.
        ("HTTP/1.1 200 OK\r\nX: a  \r\n   b\r\n \t c\r\nY: d\r\n\r\n", "HTTP/1.1 200 OK\r\nX: a b c\r\nY: d\r\n\r\n"),
        // Bare line feeds, as llhttp also accepts them.
        ("HTTP/1.1 200 OK\nX: a\n b\n\n", "HTTP/1.1 200 OK\nX: a b\n\n"),
        // No fold: unchanged.
        ("HTTP/1.1 204 No Content\r\nA: 1\r\nB: 2\r\n\r\n", "HTTP/1.1 204 No Content\r\nA: 1\r\nB: 2\r\n\r\n"),
        // The status line is never continued: the parser decides what whitespace there means.
        ("HTTP/1.1 200 OK\r\n X: a\r\n\r\n", "HTTP/1.1 200 OK\r\n X: a\r\n\r\n"),
    ])
    func unfolds(_ input: String, _ expected: String) {
        #expect(String(decoding: HeaderUnfolder.unfold(Array(input.utf8)), as: UTF8.self) == expected)
    }

    @Test("the header section ends at the first blank line, CRLF or bare LF; not before it is complete")
    func headerEnd() {
        func end(_ text: String) -> Int? { HeaderUnfolder.headerEnd(in: ByteBuffer(string: text).readableBytesView) }
        #expect(end("HTTP/1.1 200 OK\r\nA: 1\r\n\r\nbody") == 25)
        #expect(end("HTTP/1.1 200 OK\nA: 1\n\nbody") == 22)
        #expect(end("HTTP/1.1 200 OK\r\nA: 1\r\n \r\n") == nil, "a line of whitespace is not blank")
        #expect(end("HTTP/1.1 200 OK\r\nA: 1\r\n") == nil)
    }
}
