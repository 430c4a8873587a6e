import Foundation
import Hummingbird
import Logging
import NIOCore

/// Serves `GET /feeds/{name}`: a page of the feed, or what the request hook makes of it. With
/// `format=envelope` the page is a JSON envelope with a body cursor, with `format=atom` an Atom
/// document that links its next page (cursor feeds only); the `Link` header is the same.
struct FeedHandler: Sendable {
    let state: FeedServerState
    let hook: (any FeedRequestHook)?
    let options: ServingOptions

    func respond(feed name: String, request: Request, context: FeedRequestContext) async throws -> Response {
        guard let definition = await state.definition(name) else {
            return Self.json(.notFound, PageBody.error("no feed named '\(name)'"))
        }
        var parameters: [(key: String, value: String)] = []
        var lookup: [String: String] = [:]
        for (key, value) in request.uri.queryParameters {
            parameters.append((String(key), String(value)))
            lookup[String(key)] = String(value)
        }
        let query: PageQuery
        do throws(DemoFeedServerError) {
            query = try PageQuery(parameters: lookup, definition: definition)
            try hook?.validate(parameters: lookup)
        } catch {
            await state.record(
                feed: name, kind: .initial, query: request.uri.query ?? "", authorization: request.headers[.authorization],
                intervention: nil)
            return Self.json(.badRequest, PageBody.error(error.description))
        }
        let authorization = request.headers[.authorization]
        if let token = options.bearerToken, authorization != "Bearer \(token)" {
            await state.record(
                feed: name, kind: query.kind, query: request.uri.query ?? "", authorization: authorization, intervention: nil)
            var headers = HTTPFields()
            headers[.wwwAuthenticate] = "Bearer realm=\"demo-feed\""
            return Self.json(.unauthorized, PageBody.error("a valid bearer token is required"), headers: headers)
        }
        let intervention = await hook?.intervention(for: FeedRequest(feed: name, kind: query.kind, parameters: lookup))
        await state.record(
            feed: name, kind: query.kind, query: request.uri.query ?? "", authorization: authorization,
            intervention: intervention?.label)
        if let latency = options.latencyMilliseconds, latency.upperBound > 0 {
            try await Task.sleep(for: .milliseconds(Int.random(in: latency)))
        }
        if let intervention {
            context.logger.debug("the request hook intervenes", metadata: ["feed": "\(name)", "intervention": "\(intervention.label)"])
            if intervention.delay > .zero { try await Task.sleep(for: intervention.delay) }
            switch intervention.action {
            case .respond(let status, let fields, let body):
                var headers = HTTPFields()
                for (name, value) in fields {
                    if let field = HTTPFields.Element.Name(name) { headers[field] = value }
                }
                return Self.json(HTTPResponse.Status(code: status), body, headers: headers)
            case .abandon(let act):
                await act(context.channel)
                throw ConnectionAbandoned()
            case .servePage, .replacePageBody:
                break
            }
        }

        let format = lookup["format"] ?? "json"
        guard ["json", "envelope", "atom"].contains(format) else {
            return Self.json(.badRequest, PageBody.error("format must be json, envelope or atom"))
        }
        let page = await state.page(feed: name, query: query) ?? ([], false)
        var headers = HTTPFields()
        var next: (url: String, cursor: String)?
        if definition.pagination == .page {
            if let link = await pageLinkHeader(feed: name, query: query, request: request, context: context, parameters: parameters) {
                headers[Self.linkField] = link
            }
            if intervention == nil {
                // GitHub's conditional requests: a strong validator of the page's bytes.
                let etag = Self.etag(PageBody.render(page.items))
                headers[.eTag] = etag
                if let match = request.headers[.ifNoneMatch], match.split(separator: ",").contains(where: { $0.trimmingCharacters(in: .whitespaces) == etag }) {
                    return Response(status: .notModified, headers: [.eTag: etag])
                }
            }
        } else if let link = linkHeader(page: page, query: query, definition: definition, request: request, context: context, parameters: parameters) {
            headers[Self.linkField] = link.header
            next = link.next
        }
        if case .replacePageBody(let deliver)? = intervention?.action {
            switch deliver(PageBody.render(page.items)) {
            case .whole(let body):
                return Self.json(.ok, body, headers: headers)
            case .streamed(let body, let declaringLength):
                return Self.streamed(body, headers: headers, declareLength: declaringLength)
            case .partial(let body, let sending, let then):
                let channel = context.channel
                return Self.partial(body, sending: sending, headers: headers) { await then(channel) }
            }
        }
        var body: [UInt8] = switch format {
        case "envelope": PageBody.envelope(page.items, next: next?.cursor)
        case "atom": PageBody.atom(page.items, feed: name, next: next?.url)
        default: PageBody.render(page.items)
        }
        if options.gzip, Self.acceptsGzip(request) {
            body = Gzip.encode(body)
            headers[.contentEncoding] = "gzip"
        }
        headers[.vary] = "Accept-Encoding"
        if options.bodyDelayMilliseconds > 0 {
            return Self.delayed(body, by: .milliseconds(options.bodyDelayMilliseconds), headers: headers)
        }
        var response = Self.json(.ok, body, headers: headers)
        if format == "atom" { response.headers[.contentType] = "application/atom+xml; charset=utf-8" }
        return response
    }

    /// RFC 8288 links: `next` pages older (omitted at the end), `prev` newer; both carry the
    /// request's other parameters so a client's filters survive paging.
    private func linkHeader(
        page: (items: [DemoFeedItem], hasOlder: Bool), query: PageQuery, definition: FeedDefinition,
        request: Request, context: FeedRequestContext, parameters: [(key: String, value: String)]
    ) -> (header: String, next: (url: String, cursor: String)?)? {
        guard let newest = page.items.first, let oldest = page.items.last else { return nil }
        let authority = request.head.authority ?? Self.authority(of: context.channel.localAddress)
        let cursorKeys = Set(["limit", "max_id", "min_id", "since_id"]).union(hook?.queryParameters ?? [])
        let kept = parameters.filter { !cursorKeys.contains($0.key) }
        func url(_ cursorKey: String, _ cursorValue: String) -> String {
            let pairs = kept + [("limit", String(query.limit)), (cursorKey, cursorValue)]
            let encoded = pairs.map { "\(percentEncode($0.0))=\(percentEncode($0.1))" }.joined(separator: "&")
            return "http://\(authority)\(request.uri.path)?\(encoded)"
        }
        var links: [String] = []
        var next: (url: String, cursor: String)?
        if page.hasOlder || !definition.omitNextAtEnd {
            next = (url("max_id", oldest.id), oldest.id)
            links.append("<\(next!.url)>; rel=\"next\"")
        }
        links.append("<\(url("min_id", newest.id))>; rel=\"prev\"")
        return (links.joined(separator: ", "), next)
    }

    /// GitHub's links: `next` and `last` unless on the last page, `first` and `prev` unless on
    /// page 1, each with the request's other parameters.
    private func pageLinkHeader(
        feed: String, query: PageQuery, request: Request, context: FeedRequestContext, parameters: [(key: String, value: String)]
    ) async -> String? {
        guard let number = query.page, let count = await state.itemCount(feed: feed) else { return nil }
        let last = max(1, (count + query.limit - 1) / query.limit)
        let authority = request.head.authority ?? Self.authority(of: context.channel.localAddress)
        let dropped = Set(["page", "per_page"]).union(hook?.queryParameters ?? [])
        let kept = parameters.filter { !dropped.contains($0.key) }
        func url(_ page: Int) -> String {
            let pairs = kept + [("per_page", String(query.limit)), ("page", String(page))]
            return "http://\(authority)\(request.uri.path)?" + pairs.map { "\(percentEncode($0.0))=\(percentEncode($0.1))" }.joined(separator: "&")
        }
        var links: [String] = []
        if number < last { links += ["<\(url(number + 1))>; rel=\"next\"", "<\(url(last))>; rel=\"last\""] }
        if number > 1 { links += ["<\(url(1))>; rel=\"first\"", "<\(url(number - 1))>; rel=\"prev\""] }
        return links.isEmpty ? nil : links.joined(separator: ", ")
    }

    /// A strong ETag: FNV-1a of the body, in hex.
    static func etag(_ body: [UInt8]) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in body {
            hash ^= UInt64(byte)
            hash &*= 0x100_0000_01b3
        }
        return "\"" + String(hash, radix: 16) + "\""
    }

    /// HTTPTypes has no constant for RFC 8288's header.
    static let linkField = HTTPFields.Element.Name("Link")!

    static func acceptsGzip(_ request: Request) -> Bool {
        guard let value = request.headers[.acceptEncoding] else { return false }
        return value.split(separator: ",").contains { coding in
            let parts = coding.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces) }
            guard parts.first?.lowercased() == "gzip" else { return false }
            return !parts.dropFirst().contains { $0.replacingOccurrences(of: " ", with: "") == "q=0" }
        }
    }

    static func json(_ status: HTTPResponse.Status, _ body: [UInt8], headers: HTTPFields = [:]) -> Response {
        var headers = headers
        headers[.contentType] = "application/json; charset=utf-8"
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: body)))
    }

    /// Sends the body in 64 KiB writes, with or without a Content-Length.
    static func streamed(_ body: [UInt8], headers: HTTPFields, declareLength: Bool) -> Response {
        var headers = headers
        headers[.contentType] = "application/json; charset=utf-8"
        return Response(status: .ok, headers: headers, body: .init(contentLength: declareLength ? body.count : nil) { writer in
            var offset = 0
            while offset < body.count {
                let end = min(body.count, offset + 65_536)
                try await writer.write(ByteBuffer(bytes: body[offset..<end]))
                offset = end
            }
            try await writer.finish(nil)
        })
    }

    /// Sends the headers at once and the body `delay` later.
    static func delayed(_ body: [UInt8], by delay: Duration, headers: HTTPFields) -> Response {
        var headers = headers
        headers[.contentType] = "application/json; charset=utf-8"
        return Response(status: .ok, headers: headers, body: .init(contentLength: body.count) { writer in
            try await Task.sleep(for: delay)
            try await writer.write(ByteBuffer(bytes: body))
            try await writer.finish(nil)
        })
    }

    /// Promises the whole body, sends its first `sending` bytes, then hands the connection to `breakIt`.
    static func partial(_ body: [UInt8], sending: Int, headers: HTTPFields, breakIt: @escaping @Sendable () async -> Void) -> Response {
        var headers = headers
        headers[.contentType] = "application/json; charset=utf-8"
        return Response(status: .ok, headers: headers, body: .init(contentLength: body.count) { writer in
            try await writer.write(ByteBuffer(bytes: body.prefix(sending)))
            await breakIt()
            throw ConnectionAbandoned()
        })
    }

    /// `host:port` of a socket address, bracketing IPv6.
    static func authority(of address: SocketAddress?) -> String {
        guard let address, let ip = address.ipAddress, let port = address.port else { return "localhost" }
        if case .v6 = address { return "[\(ip)]:\(port)" }
        return "\(ip):\(port)"
    }
}

/// Percent-encodes everything but RFC 3986 unreserved characters.
func percentEncode(_ value: String) -> String {
    var out = ""
    for byte in value.utf8 {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
            out.unicodeScalars.append(Unicode.Scalar(byte))
        default:
            let hex = String(byte, radix: 16, uppercase: true)
            out += "%" + (hex.count == 1 ? "0" + hex : hex)
        }
    }
    return out
}

/// Settings the handlers need from the server configuration.
struct ServingOptions: Sendable {
    var gzip: Bool
    var latencyMilliseconds: ClosedRange<Int>?
    var bodyDelayMilliseconds: Int
    var bearerToken: String?
}

/// Thrown after the request hook has taken the connection over (``FeedIntervention/Action/abandon(_:)``,
/// ``PageDelivery/partial(_:sending:then:)``), so Hummingbird gives up on the response instead of
/// writing one.
struct ConnectionAbandoned: Error {}
