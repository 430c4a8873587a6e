/// Renders page bodies and error bodies.
enum PageBody {
    /// A JSON array of the items, one per line, as a pretty-printing server would send it.
    static func render(_ items: [DemoFeedItem]) -> [UInt8] {
        guard !items.isEmpty else { return Array("[]".utf8) }
        var body = "[\n  "
        body += items.map(\.json).joined(separator: ",\n  ")
        body += "\n]\n"
        return Array(body.utf8)
    }

    /// The items in a JSON envelope, as cursor APIs send them: `{"data": [...], "next_cursor":
    /// "<id>"}`, the cursor the last item's id (sent back as `max_id`), `null` when there is no
    /// next page.
    static func envelope(_ items: [DemoFeedItem], next: String?) -> [UInt8] {
        var body = "{\"data\":[\n  " + items.map(\.json).joined(separator: ",\n  ") + "\n],\"next_cursor\":"
        body += next.map { "\"\($0)\"" } ?? "null"
        return Array((body + "}\n").utf8)
    }

    /// The items as an Atom feed document (RFC 4287), each an entry whose content is the item's
    /// JSON, with the page's `next` link (RFC 5005 paging) when there is one.
    static func atom(_ items: [DemoFeedItem], feed: String, next: String?) -> [UInt8] {
        func escaped(_ text: String) -> String {
            var result = ""
            result.reserveCapacity(text.utf8.count)
            for character in text {
                switch character {
                case "&": result += "&amp;"
                case "<": result += "&lt;"
                case ">": result += "&gt;"
                case "\"": result += "&quot;"
                default: result.append(character)
                }
            }
            return result
        }
        var body = "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<feed xmlns=\"http://www.w3.org/2005/Atom\">\n"
        body += "<id>tag:demo-feed.test,2026:\(escaped(feed))</id><title>\(escaped(feed))</title>"
        body += "<updated>\(items.first?.createdAt ?? "1970-01-01T00:00:00Z")</updated>\n"
        if let next { body += "<link rel=\"next\" href=\"\(escaped(next))\"/>\n" }
        for item in items {
            body += "<entry><id>tag:demo-feed.test,2026:\(escaped(feed))/\(escaped(item.id))</id><title>item \(escaped(item.id))</title>"
            body += "<updated>\(item.createdAt)</updated><content type=\"text\">\(escaped(item.json))</content></entry>\n"
        }
        return Array((body + "</feed>\n").utf8)
    }

    /// The JSON body of an error response.
    static func error(_ message: String) -> [UInt8] {
        Array("{\"error\":\(jsonString(message))}\n".utf8)
    }
}
