/// Renders page bodies: real pages and the broken bodies that faults send.
enum PageBody {
    /// A JSON array of the items, one per line, as a pretty-printing server would send it.
    static func render(_ items: [DemoFeedItem]) -> [UInt8] {
        guard !items.isEmpty else { return Array("[]".utf8) }
        var body = "[\n  "
        body += items.map(\.json).joined(separator: ",\n  ")
        body += "\n]\n"
        return Array(body.utf8)
    }

    /// What a misconfigured proxy sends with a 200: not JSON at all.
    static let malformed: [UInt8] = Array("<html><body><h1>502 Bad Gateway</h1></body></html>\n".utf8)

    /// A real page cut in half: framed correctly (the Content-Length matches), invalid as JSON,
    /// as a proxy that lost the end of an upstream response would send it.
    static func truncated(_ items: [DemoFeedItem]) -> [UInt8] {
        let full = render(items)
        return Array(full.prefix(max(1, full.count / 2)))
    }

    /// A real page padded with trailing whitespace (still valid JSON) up to `bytes`.
    static func oversized(_ items: [DemoFeedItem], bytes: Int) -> [UInt8] {
        var body = render(items)
        if body.count < bytes { body += [UInt8](repeating: 0x20, count: bytes - body.count) }
        return body
    }

    /// The JSON body of an error response.
    static func error(_ message: String) -> [UInt8] {
        Array("{\"error\":\(jsonString(message))}\n".utf8)
    }
}
