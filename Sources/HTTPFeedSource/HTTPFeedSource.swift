import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import SyncCore
import Synchronization

/// A feed read over HTTP with RFC 8288 `Link` header pagination, as Mastodon and GitHub page.
///
/// Cursors are the URLs from the `Link` header: `rel="next"` pages older (its absence is the end
/// of the feed). How newer items are reached depends on ``FeedPagination``:
/// - cursor feeds: `rel="prev"` (or `previous`) pages newer with Mastodon's `min_id` (the items
///   immediately newer, so nothing is skipped). When the server sends no `prev` link on a
///   non-empty page, the newer cursor is built from the request URL with `min_id` set to the
///   page's newest id; for a feed that is empty at its first load, from
///   ``HTTPFeedConfiguration/emptyFeedMinID``.
/// - page feeds: the newer cursor is the configured URL (page 1), and every page carries its
///   `next` link as ``FeedPage/continuation``, so a refresh that gets more than a page of new
///   items walks down into the gap until it meets stored items.
///
/// Items are the elements of the JSON array body, stored byte for byte.
public struct HTTPFeedSource: FeedSource {
    public let configuration: HTTPFeedConfiguration
    private let client: HTTPFeedClient
    private let parser: JSONPageParser
    private let logger: Logger

    /// - Throws: ``FeedError`` when the configuration cannot work (bad URL, empty id field).
    public init(configuration: HTTPFeedConfiguration, client: HTTPFeedClient, logger: Logger = Logger(label: "syncd.http-feed")) throws(FeedError) {
        try configuration.validate()
        self.configuration = configuration
        self.client = client
        self.parser = JSONPageParser(idField: configuration.idField)
        self.logger = logger
    }

    public func fetchInitial() async throws -> FeedPage {
        let response = try await fetch(configuration.url)
        let next = LinkHeader.first("next", in: response.links)?.absoluteString
        if isPaged(response) {
            return FeedPage(items: response.items, olderCursor: next, newerCursor: configuration.url.absoluteString, continuation: next)
        }
        let newer = LinkHeader.previous(in: response.links)?.absoluteString
            ?? response.items.first.map { Self.url(configuration.url, minID: $0.id) }
            ?? Self.emptyFeedCursor(configuration)
        return FeedPage(items: response.items, olderCursor: next, newerCursor: newer)
    }

    public func fetchOlder(cursor: String) async throws -> FeedPage {
        let response = try await fetch(try cursorURL(cursor))
        // The older page's prev link points back into items already stored; the newer cursor
        // stays where the newest page left it.
        return FeedPage(
            items: response.items,
            olderCursor: LinkHeader.first("next", in: response.links)?.absoluteString,
            newerCursor: nil)
    }

    public func fetchNewer(cursor: String) async throws -> FeedPage {
        let url = try cursorURL(cursor)
        let response = try await fetch(url)
        let next = LinkHeader.first("next", in: response.links)?.absoluteString
        if isPaged(response) {
            // Page 1 again, or a page inside a gap: the newer cursor stays page 1.
            return FeedPage(items: response.items, olderCursor: next, newerCursor: nil, continuation: next)
        }
        let newer = LinkHeader.previous(in: response.links)?.absoluteString
            ?? response.items.first.map { Self.url(url, minID: $0.id) }
        return FeedPage(items: response.items, olderCursor: next, newerCursor: newer)
    }

    /// Whether this response is read as a page-numbered one.
    private func isPaged(_ response: Response) -> Bool {
        switch configuration.pagination {
        case .page: return true
        case .cursor: return false
        case .automatic: return Self.looksPaged(response.links)
        }
    }

    /// Links with a `page` parameter and no item cursor, or with `first`/`last` relations, are
    /// GitHub's style; Mastodon's links carry `max_id`/`min_id`.
    static func looksPaged(_ links: [WebLink]) -> Bool {
        links.contains { link in
            let names = URLComponents(url: link.target, resolvingAgainstBaseURL: false)?.queryItems?.map { $0.name.lowercased() } ?? []
            if names.contains(where: { ["max_id", "min_id", "since_id"].contains($0) }) { return false }
            return names.contains("page") || link.relations.contains("first") || link.relations.contains("last")
        }
    }

    // MARK: Request

    private struct Response: Sendable {
        var items: [FeedItem]
        var links: [WebLink]
    }

    private struct RawResponse: Sendable {
        var body: [UInt8]
        var linkHeaders: [String]
    }

    private func fetch(_ url: URL) async throws -> Response {
        try Task.checkCancellation()
        let label = "GET \(url.redactedForLog)"
        var request = HTTPClientRequest(url: url.absoluteString)
        request.method = .GET
        request.headers.add(name: "Accept", value: "application/json")
        request.headers.add(name: "User-Agent", value: configuration.userAgent)
        if client.options.decompression {
            request.headers.add(name: "Accept-Encoding", value: "gzip, deflate")
        }
        // Link targets come from the server; the token goes only where the operator pointed it.
        if let authorization = configuration.authorization, url.origin == configuration.url.origin {
            request.headers.add(name: "Authorization", value: try authorization.headerValue())
        }
        let started = ContinuousClock.now
        let raw: RawResponse
        do {
            raw = try await withRequestTimeout(label) { [client, configuration, request] in
                let deadline = NIODeadline.now() + .nanoseconds(Int64(configuration.requestTimeout.totalNanoseconds))
                let response = try await client.http.execute(request, deadline: deadline)
                guard (200..<300).contains(response.status.code) else {
                    throw Self.statusError(response, label: label)
                }
                let encoded = response.headers["content-encoding"].contains { $0.lowercased() != "identity" }
                if !encoded, let length = response.headers.first(name: "content-length").flatMap(Int.init),
                    length > configuration.maxBodyBytes {
                    throw FeedError(.tooLarge, "\(label): the body is \(length) bytes, more than the limit of \(configuration.maxBodyBytes)")
                }
                let buffer = try await response.body.collect(upTo: configuration.maxBodyBytes)
                return RawResponse(body: Array(buffer.readableBytesView), linkHeaders: response.headers["link"])
            }
        } catch let error as FeedError {
            log(label, started, outcome: error.message)
            throw error
        } catch {
            if Task.isCancelled { throw CancellationError() }
            let feedError = FeedErrorClassifier.classify(error, request: label)
            if case .tooLarge = feedError.kind {
                let message = "\(label): the body exceeds the limit of \(configuration.maxBodyBytes) bytes"
                log(label, started, outcome: message)
                throw FeedError(.tooLarge, message)
            }
            log(label, started, outcome: feedError.message)
            throw feedError
        }
        let items: [FeedItem]
        do {
            items = try parser.parse(raw.body)
        } catch {
            let message = "\(label): \(error.message)"
            log(label, started, outcome: message)
            throw FeedError(.malformed, message)
        }
        log(label, started, outcome: "\(items.count) items")
        return Response(items: items, links: LinkHeader.parse(raw.linkHeaders, base: url))
    }

    /// Bounds the whole exchange, body included: AsyncHTTPClient's deadline stops at the
    /// response head, and a server that sends headers and then stalls must still time out.
    ///
    /// The timer is a NIO scheduled task rather than a racing `Task.sleep`: cancelling it takes
    /// it off the event loop, whereas a cancelled sleep still wakes the process at its deadline,
    /// once for every request ever made, long after the answer came.
    private func withRequestTimeout(
        _ label: String, _ operation: @escaping @Sendable () async throws -> RawResponse
    ) async throws -> RawResponse {
        let timeout = configuration.requestTimeout
        let work = Task { try await operation() }
        let expired = ExpiryFlag()
        let timer = client.http.eventLoopGroup.next().scheduleTask(in: .nanoseconds(Int64(timeout.totalNanoseconds))) {
            expired.value.store(true, ordering: .sequentiallyConsistent)
            work.cancel()
        }
        defer { timer.cancel() }
        let result = await withTaskCancellationHandler {
            await work.result
        } onCancel: {
            work.cancel()
        }
        // A body cut short by the cancellation may even parse: the deadline decides, not the result.
        if expired.value.load(ordering: .sequentiallyConsistent) {
            throw FeedError(.timeout, "\(label): no complete response within \(timeout)")
        }
        return try result.get()
    }

    private static func statusError(_ response: HTTPClientResponse, label: String) -> FeedError {
        let retryAfter = response.headers.first(name: "retry-after").flatMap {
            RetryAfter.parse($0, responseDate: response.headers.first(name: "date"))
        }
        var message = "\(label): HTTP \(response.status.code) \(response.status.reasonPhrase)"
        if let retryAfter { message += " (retry after \(retryAfter))" }
        return FeedError(.httpStatus(Int(response.status.code)), message, retryAfter: retryAfter)
    }

    private func log(_ label: String, _ started: ContinuousClock.Instant, outcome: String) {
        logger.debug("\(label): \(outcome)", metadata: ["elapsed": "\(ContinuousClock.now - started)"])
    }

    // MARK: Cursors

    private func cursorURL(_ cursor: String) throws(FeedError) -> URL {
        guard let url = URL(string: cursor), let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https",
            url.host != nil
        else {
            throw FeedError(.other, "the cursor is not an http(s) URL; was it written by another kind of feed source?")
        }
        return url
    }

    /// `url` with `min_id` set and the other cursor parameters removed.
    static func url(_ url: URL, minID: String) -> String {
        guard var components = URLComponents(url: url, resolvingAgainstBaseURL: true) else { return url.absoluteString }
        var items = (components.queryItems ?? []).filter { !["max_id", "min_id", "since_id"].contains($0.name) }
        items.append(URLQueryItem(name: "min_id", value: minID))
        components.queryItems = items
        return components.url?.absoluteString ?? url.absoluteString
    }

    static func emptyFeedCursor(_ configuration: HTTPFeedConfiguration) -> String {
        guard let minID = configuration.emptyFeedMinID else { return configuration.url.absoluteString }
        return url(configuration.url, minID: minID)
    }
}

/// Set by a request's timer when it fires.
private final class ExpiryFlag: Sendable {
    let value = Atomic<Bool>(false)
}
