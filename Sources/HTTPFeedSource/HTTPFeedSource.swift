import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import NIOSSL
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
    /// The feed this source reads, as validated at creation.
    public let configuration: HTTPFeedConfiguration
    private let client: HTTPFeedClient
    private let parser: JSONPageParser
    private let cursors: PageCursors
    /// The body values the descriptor reads besides the items.
    private let bodyValues: [JSONPointer]
    /// Where the items were found, when the descriptor leaves it to the first page to tell.
    private let detectedItems = DetectedItems()
    private let unpagedWarning = Once()
    /// What the last syndication document was, for ``probe()``.
    private let syndication = LastValue<String>()
    private let logger: Logger
    private let cache = ValidatorCache()
    private let received = ReceivedBytes()
    /// The feed's TLS settings (its CA, client certificate); `nil` uses the client's defaults.
    private let tls: TLSConfiguration?
    /// The connection a backfill walks older pages on; `nil` on a shared `HTTPClient`, whose
    /// configuration (a proxy, its own TLS) only AsyncHTTPClient knows.
    private let walk: PageWalk?
    /// Set once the server folded a header line: its responses are read unfolded from then on.
    private let foldsHeaders = SharedFlag()

    /// The event loop its backfill's responses are read on, where `olderCursorKnown` is called;
    /// `nil` on a shared `HTTPClient` (no walk of its own).
    public var executor: (any SerialExecutor)? { walk?.executor }

    /// Requests waiting on the walk's connection behind the one on it: for tests that need a
    /// page queued before the one ahead of it is answered.
    package func walkRequestsWaiting() async -> Int { await walk?.waiting() ?? 0 }

    /// 304 answers so far: refreshes that found nothing new without a body.
    public var notModifiedCount: Int { cache.notModifiedCount }

    /// Bytes of page bodies received so far (after content decoding), whether or not they parsed.
    public var receivedBodyBytes: Int { received.total.load(ordering: .relaxed) }

    /// Bytes of responses received so far, on any connection and with any status, as near to
    /// their size on the wire as the client can tell: status line, header fields and the body
    /// before content decoding (its declared length when compressed). Chunk framing and TLS
    /// records are not counted.
    public var bytesReceived: Int64 { received.wire.load(ordering: .relaxed) }

    /// - Throws: ``FeedError`` when the configuration cannot work (bad URL, empty id field).
    public init(configuration: HTTPFeedConfiguration, client: HTTPFeedClient, logger: Logger = Logger(label: "syncd.http-feed")) throws(FeedError) {
        try configuration.validate()
        self.configuration = configuration
        self.client = client
        self.parser = JSONPageParser(id: configuration.descriptor.id, updated: configuration.descriptor.updated, deleted: configuration.descriptor.deleted)
        self.cursors = PageCursors(descriptor: configuration.descriptor, feedURL: configuration.url)
        self.bodyValues = configuration.descriptor.bodyValues
        self.logger = logger
        let tls = try configuration.tls.map { tls throws(FeedError) in try tls.configuration() }
        self.tls = tls
        walk = client.makeWalk(
            for: configuration.url, tls: tls, maxBodyBytes: configuration.maxBodyBytes, requestTimeout: configuration.requestTimeout)
    }

    /// Whether the descriptor says the feed lists its items oldest first (``FeedOrder/oldestFirst``).
    public var listsOldestFirst: Bool { configuration.descriptor.order == .oldestFirst }

    /// A page of a feed listed oldest first, fetched from `url`: its items newest first, nothing
    /// older, and the page after it (or, at the newest, `url` itself, read again) as the newer
    /// cursor. Never conditional: the next link can appear while the body stays the same.
    private func forwardPage(_ url: URL) async throws -> FeedPage {
        let response = try await fetch(url)
        let next = cursors.older(response.answer)
        return FeedPage(
            items: response.items.reversed(), olderCursor: nil, newerCursor: next ?? url.absoluteString, deletedIDs: response.deletedIDs)
    }

    /// The configured URL's page; its `next` link is the older cursor, and the newer one follows ``FeedPagination``.
    public func fetchInitial() async throws -> FeedPage {
        if listsOldestFirst { return try await forwardPage(configuration.url) }
        // A page feed's refresh asks for this URL again: its validators make that a 304.
        let response = try await fetch(configuration.url, remember: true)
        let next = cursors.older(response.answer)
        warnIfUnpaged(response, next: next)
        let keyset = namesLastItem(next, of: response.items)
        if isPaged(response) {
            return FeedPage(
                items: response.items, olderCursor: next, newerCursor: configuration.url.absoluteString, continuation: next,
                olderContinuesAfterLastItem: keyset, deletedIDs: response.deletedIDs)
        }
        guard case .automatic = configuration.descriptor.newer else {
            // An empty feed has no newest id to ask above: its first page is asked again.
            return FeedPage(
                items: response.items, olderCursor: next,
                newerCursor: cursors.newer(response.answer) ?? configuration.url.absoluteString, olderContinuesAfterLastItem: keyset,
                deletedIDs: response.deletedIDs)
        }
        let newer = LinkHeader.previous(in: response.links)?.absoluteString
            ?? response.items.first.map { Self.url(configuration.url, minID: $0.id) }
            ?? Self.emptyFeedCursor(configuration)
        return FeedPage(items: response.items, olderCursor: next, newerCursor: newer, olderContinuesAfterLastItem: keyset, deletedIDs: response.deletedIDs)
    }

    /// Whether the older cursor `next` names the last of `items` in a keyset parameter
    /// (`max_id=`, `starting_after=`, `before=`, or the descriptor's last-item-id parameter): its
    /// page starts right after that item whatever changed above it. Page numbers, offsets and
    /// opaque cursors do not, and a value that merely equals the id in another parameter (a page
    /// number, a page size) does not count.
    func namesLastItem(_ next: String?, of items: [FeedItem]) -> Bool {
        guard let next, let last = items.last?.id, !last.isEmpty,
              let query = URLComponents(string: next)?.queryItems else { return false }
        var names: Set<String> = ["max_id", "until_id", "before", "before_id", "starting_after", "after", "after_id", "older_than"]
        if case .lastItemID(let parameter) = configuration.descriptor.older { names.insert(parameter.lowercased()) }
        return query.contains { names.contains($0.name.lowercased()) && ($0.value.map { $0.isExactly(last) } ?? false) }
    }

    /// Reads the configured URL's page as a sync would and tells what it found, storing nothing.
    ///
    /// - Throws: ``FeedError`` as a first load would, saying what to set when the body does not fit.
    public func probe() async throws -> FeedProbe {
        let page = try await fetchInitial()
        return FeedProbe(
            itemsAt: configuration.descriptor.items ?? detectedItems.pointer ?? .root, document: syndication.value, itemCount: page.items.count,
            firstIDs: page.items.prefix(5).map(\.id), olderCursor: page.olderCursor, newerCursor: page.newerCursor)
    }

    /// The page at `cursor` (a `next` link URL); the newer cursor is left where it was.
    public func fetchOlder(cursor: String) async throws -> FeedPage {
        try await older(cursor, olderCursorKnown: nil)
    }

    /// The page at `cursor`, telling its `next` link as soon as the response's headers are in.
    public func fetchOlder(cursor: String, olderCursorKnown: @escaping @Sendable (String?) -> Void) async throws -> FeedPage {
        try await older(cursor, olderCursorKnown: olderCursorKnown)
    }

    private func older(_ cursor: String, olderCursorKnown: (@Sendable (String?) -> Void)?) async throws -> FeedPage {
        // Nothing is older than a forward feed's first page, which ends it at once: a coordinator
        // never asks. Answered as an empty last page, before any request (so no cursor to tell).
        if listsOldestFirst { return FeedPage(items: [], olderCursor: nil, newerCursor: nil) }
        // Told as the headers are read when a `Link` feed's header has a `next`; otherwise once
        // the body is read (a body cursor, or Atom and RSS, whose documents link the next page),
        // where ``executor`` promises. A callback of some kind keeps the request on the walk's
        // connection.
        let fromHeader = configuration.descriptor.older == .linkHeader
        let told = Once()
        let onLinks = olderCursorKnown.map { known in
            { @Sendable (links: [WebLink]) in
                if fromHeader, let next = LinkHeader.first("next", in: links), told.first() { known(next.absoluteString) }
            }
        }
        let response = try await fetch(try cursorURL(cursor), onLinks: onLinks)
        // The older page's prev link points back into items already stored; the newer cursor
        // stays where the newest page left it.
        let next = cursors.older(response.answer)
        if let olderCursorKnown, told.first() {
            if let walk { try? await walk.tellNow(next, to: olderCursorKnown) } else { olderCursorKnown(next) }
        }
        return FeedPage(
            items: response.items, olderCursor: next, newerCursor: nil,
            olderContinuesAfterLastItem: namesLastItem(next, of: response.items), deletedIDs: response.deletedIDs)
    }

    /// The page at `cursor`, sent conditionally when it is a refresh, so a 304 is an empty page: caught up.
    public func fetchNewer(cursor: String) async throws -> FeedPage {
        let url = try cursorURL(cursor)
        if listsOldestFirst { return try await forwardPage(url) }
        let response = try await fetch(url, conditional: isRefresh(url))
        if response.notModified {
            // The same answer as last time, whose items are stored: caught up, cursors kept.
            return FeedPage(items: [], olderCursor: nil, newerCursor: nil)
        }
        let next = cursors.older(response.answer)
        if isPaged(response) {
            // Page 1 again, or a page inside a gap: the newer cursor stays page 1.
            return FeedPage(items: response.items, olderCursor: next, newerCursor: nil, continuation: next, deletedIDs: response.deletedIDs)
        }
        guard case .automatic = configuration.descriptor.newer else {
            return FeedPage(items: response.items, olderCursor: next, newerCursor: cursors.newer(response.answer), deletedIDs: response.deletedIDs)
        }
        let newer = LinkHeader.previous(in: response.links)?.absoluteString
            ?? response.items.first.map { Self.url(url, minID: $0.id) }
        return FeedPage(items: response.items, olderCursor: next, newerCursor: newer, deletedIDs: response.deletedIDs)
    }

    /// A first page holding the page size asked for, without a `Link` to the next, is most often
    /// an API that pages some other way (offsets, page numbers, a cursor in the body): read as a `Link` feed, it would end
    /// after one page without a word. Said once, with what to set.
    private func warnIfUnpaged(_ response: Response, next: String?) {
        guard case .linkHeader = configuration.descriptor.older, next == nil, !response.items.isEmpty else { return }
        let sizes = ["limit", "per_page", "page_size", "pagesize", "size", "count", "maxresults"]
        let asked = URLComponents(url: configuration.url, resolvingAgainstBaseURL: false)?.queryItems?
            .first { sizes.contains($0.name.lowercased()) }.flatMap { $0.value.flatMap(Int.init) }
        guard response.items.count == asked, unpagedWarning.first() else { return }
        logger.warning(
            "the feed's first page is full (\(response.items.count) items) and has no Link rel=\"next\": if the API pages by offset, page number or a cursor, set older (docs/feeds.md), or the older items are never read",
            metadata: ["url": "\(configuration.url.redactedForLog)"])
    }

    /// Whether `url` is a refresh that is asked again as it is, so a 304 means "nothing new":
    /// page 1 of a page feed, or a cursor feed's newer link. A page inside a gap is not: its
    /// 304 would not say where the gap goes on.
    private func isRefresh(_ url: URL) -> Bool {
        if url.absoluteString == configuration.url.absoluteString { return true }
        switch configuration.descriptor.newer {
        case .head: return false
        case .idParameter, .bodyURL: return true
        case .automatic: break
        }
        switch configuration.pagination {
        case .page: return false
        case .cursor: return true
        case .automatic:
            let names = URLComponents(url: url, resolvingAgainstBaseURL: false)?.queryItems?.map { $0.name.lowercased() } ?? []
            return !names.contains("page")
        }
    }

    /// Whether this response is read as a page-numbered one.
    private func isPaged(_ response: Response) -> Bool {
        // A syndication document links older pages or archives only: newer entries are on its head.
        if response.syndicated, case .automatic = configuration.descriptor.newer { return true }
        switch configuration.descriptor.newer {
        case .head: return true
        case .idParameter, .bodyURL: return false
        case .automatic: break
        }
        switch configuration.pagination {
        case .page: return true
        case .cursor: return false
        case .automatic:
            // A cursor feed that links no `prev` never said it answers `min_id`: one that ignores
            // it (opaque cursors) would answer the head again, and the items between lost. Its
            // newer items are read from the head down to the stored ones instead.
            return Self.looksPaged(response.links) || (!response.items.isEmpty && LinkHeader.previous(in: response.links) == nil)
        }
    }

    /// Links with a `page` parameter, or with `first`/`last` relations, are GitHub's style;
    /// Mastodon's carry neither. An item cursor in them does not count: GitHub repeats unknown
    /// parameters, so a `min_id` sent to it (before its feed had a second page to show its
    /// style) comes back in its page links.
    static func looksPaged(_ links: [WebLink]) -> Bool {
        links.contains { link in
            let names = URLComponents(url: link.target, resolvingAgainstBaseURL: false)?.queryItems?.map { $0.name.lowercased() } ?? []
            return names.contains("page") || link.relations.contains("first") || link.relations.contains("last")
        }
    }

    // MARK: Request

    private struct Response: Sendable {
        /// What the cursors are made from.
        var answer: PageCursors.Answer
        /// 304: the same as the last answer to this URL, whose items are stored.
        var notModified = false
        /// An Atom or RSS document: read from its head down, as its archives link it.
        var syndicated = false
        /// Ids the page marks deleted; their tombstones stay in `answer` (cursors count them).
        var deletedIDs: [String] = []
        /// The page's items, tombstones left out.
        var items: [FeedItem] {
            guard !deletedIDs.isEmpty else { return answer.items }
            let gone = Set(deletedIDs.map(ExactID.init))
            return answer.items.filter { !gone.contains(ExactID($0.id)) }
        }
        var links: [WebLink] { answer.links }
    }

    private struct RawResponse: Sendable {
        var body: Data
        /// The `Link` headers, resolved against the URL the answer came from (after redirects).
        var links: [WebLink]
        var url: URL
        var validators: Validators?
        var notModified = false
        /// The descriptor's cursor header, when it has one and the answer carried it.
        var cursorHeader: String?
        /// The body's `Content-Encoding`, when not `identity`.
        var contentEncoding: String?
    }

    /// Redirects followed for one request, as browsers and curl bound them.
    public static let maxRedirects = 5

    /// - Parameters:
    ///   - conditional: send the validators of the last answer to `url`, if any (a 304 then
    ///     comes back as an empty ``Response/notModified`` response).
    ///   - remember: keep this answer's validators for a later conditional request.
    ///   - onLinks: told the links of a success as soon as its headers are in, before its body.
    private func fetch(
        _ url: URL, conditional: Bool = false, remember: Bool = false, onLinks: (@Sendable ([WebLink]) -> Void)? = nil
    ) async throws -> Response {
        try Task.checkCancellation()
        let label = RequestLabel(url: url)
        let started = ContinuousClock.now
        let validators = conditional ? cache.validators(for: url) : nil
        let raw: RawResponse
        do {
            raw = try await answer(url, label: label, validators: validators, onLinks: onLinks)
        } catch let error as FeedError {
            log(label, started, outcome: error.message)
            throw error
        } catch {
            if Task.isCancelled { throw CancellationError() }
            var feedError = FeedErrorClassifier.classify(error, request: label.description)
            if feedError.kind == .tls, feedError.message.contains(FeedErrorClassifier.untrusted),
               let issuer = await TLSProbe.issuer(of: url) {
                feedError = FeedError(.tls, "\(label): \(FeedErrorClassifier.untrusted) (issuer \(issuer)): set ca_file to the CA that issued it")
            }
            if case .tooLarge = feedError.kind {
                let message = "\(label): the body exceeds the limit of \(configuration.maxBodyBytes) bytes"
                log(label, started, outcome: message)
                throw FeedError(.tooLarge, message)
            }
            log(label, started, outcome: feedError.message)
            throw feedError
        }
        if raw.notModified {
            let count = cache.countNotModified()
            log(label, started, outcome: "304 Not Modified: nothing new (\(count) so far)")
            return Response(answer: PageCursors.Answer(url: url, items: [], values: [:], links: []), notModified: true)
        }
        received.total.add(raw.body.count, ordering: .relaxed)
        if let refusal = refusal(of: raw, label: label) {
            log(label, started, outcome: refusal.message)
            throw refusal
        }
        let page: ParsedPage
        var links = raw.links
        var syndicated = false
        do {
            // Asked only of a body that opens with markup: the syndication parser copies the body to look.
            if opensWithMarkup(raw.body), SyndicationParser.looksLikeSyndication(raw.body) {
                // Atom or RSS: its entries as JSON objects, its own links (RFC 5005) beside the header's.
                let document = try SyndicationParser.parse(raw.body, url: raw.url)
                page = ParsedPage(items: document.items, values: [:], itemsAt: .root, deletedIDs: document.deletedIDs)
                links += document.links
                syndicated = true
                syndication.set(document.format == .atom ? "an Atom document's entries" : "an RSS channel's items")
            } else {
                page = try parser.read(raw.body, items: configuration.descriptor.items ?? detectedItems.pointer, values: bodyValues)
            }
        } catch {
            let message = "\(label): \(error.message)"
            log(label, started, outcome: message)
            throw FeedError(.malformed, message)
        }
        let items = page.items
        if configuration.descriptor.items == nil, !page.itemsAt.isRoot, detectedItems.remember(page.itemsAt) {
            logger.notice("the feed's pages hold their items at \"\(page.itemsAt)\" (found in the first page; set items to choose)", metadata: [
                "url": "\(configuration.url.redactedForLog)",
            ])
        }
        // Validators are kept only for URLs that are asked again as they are (a refresh), and
        // only once the body parsed: a 304 then stands for a page whose items are stored.
        if conditional || remember, let validators = raw.validators { cache.store(validators, for: url) }
        log(label, started, outcome: "\(items.count) items" + (page.deletedIDs.isEmpty ? "" : ", \(page.deletedIDs.count) marked deleted"))
        return Response(
            answer: PageCursors.Answer(url: raw.url, items: items, values: page.values, links: links, cursorHeader: raw.cursorHeader),
            syndicated: syndicated, deletedIDs: page.deletedIDs)
    }

    /// The server's answer to `url`: over the walk or the pool, or, once the server was seen to
    /// fold a header line over two (obs-fold, which NIO's parser refuses), on a connection of its
    /// own that unfolds it (``UnfoldedExchange``), as RFC 9112 §5.2 asks of a user agent.
    private func answer(
        _ url: URL, label: RequestLabel, validators: Validators?, onLinks: (@Sendable ([WebLink]) -> Void)?
    ) async throws -> RawResponse {
        guard let walk, walk.serves(url) else { return try await walkedOrPooled(url, label: label, validators: validators, onLinks: onLinks) }
        if !foldsHeaders.value.load(ordering: .relaxed) {
            do {
                return try await walkedOrPooled(url, label: label, validators: validators, onLinks: onLinks)
            } catch let error as HTTPParserError where error == .invalidHeaderToken {
                // Asked again below, unfolded; from now on every request of this source is.
                if !foldsHeaders.value.exchange(true, ordering: .relaxed) {
                    logger.notice("the server folds header lines over two (obs-fold, RFC 9112 §5.2): its responses are read unfolded, one per connection", metadata: [
                        "url": "\(configuration.url.redactedForLog)",
                    ])
                }
            }
        }
        return try await withRequestTimeout(label) { [self] in
            try await unfolded(url, label: label, validators: validators, onLinks: onLinks, walk: walk)
        }
    }

    /// The answer over the walk's connection when the walk takes the request, else through the pool.
    private func walkedOrPooled(
        _ url: URL, label: RequestLabel, validators: Validators?, onLinks: (@Sendable ([WebLink]) -> Void)?
    ) async throws -> RawResponse {
        if let answer = try await walked(url, label: label, validators: validators, onLinks: onLinks) { return answer }
        return try await withRequestTimeout(label) { [self] in
            try await exchange(url, label: label, validators: validators, onLinks: onLinks)
        }
    }

    /// One request through ``UnfoldedExchange``, answered as ``exchange(_:label:validators:onLinks:)``
    /// answers, except that a redirect is not followed (it fails, naming its target).
    private func unfolded(
        _ url: URL, label: RequestLabel, validators: Validators?, onLinks: (@Sendable ([WebLink]) -> Void)?, walk: PageWalk
    ) async throws -> RawResponse {
        let response = try await UnfoldedExchange.fetch(
            url, headers: try requestHeaders(url, validators: validators), label: label, settings: walk.settings, loop: client.http.eventLoopGroup.any())
        let (status, headers) = (response.head.status, response.head.headers)
        countWire(WireSize.response(status: status, headers: headers, bodyBytesRead: response.bodyBytesRead))
        if status.code == 304, validators != nil {
            return RawResponse(body: Data(), links: [], url: url, validators: validators, notModified: true)
        }
        if (300..<400).contains(status.code) {
            let target = headers.first(name: "location").flatMap { URL(string: $0, relativeTo: url)?.absoluteURL.redactedForLog } ?? "no location"
            throw FeedError(.other, "\(label): a redirect (\(status.code), to \(target)) from a server that folds header lines is not followed: set url to where it leads")
        }
        guard (200..<300).contains(status.code) else { throw Self.statusError(status, headers, label: label) }
        if let error = Self.declaredTooLarge(headers, limit: configuration.maxBodyBytes, label: label) { throw error }
        let links = LinkHeader.parse(headers["link"], base: url)
        if let onLinks { walk.tell(links, to: onLinks) }
        let found = Validators(etag: headers.first(name: "etag"), lastModified: headers.first(name: "last-modified"))
        return RawResponse(
            body: Self.data(response.body), links: links, url: url, validators: found.isEmpty ? nil : found,
            cursorHeader: cursorHeader(in: headers), contentEncoding: Self.contentEncoding(headers))
    }

    /// A backfill's page over the walk's connection, whose handler sends the next one; `nil`
    /// when it is not one (or is a redirect, which the pool then asks for and follows).
    ///
    /// The walk times the request itself, from when it goes out: a page asked for while the one
    /// before still arrives waits on the connection, and that wait must not use up its time.
    private func walked(
        _ url: URL, label: RequestLabel, validators: Validators?, onLinks: (@Sendable ([WebLink]) -> Void)?
    ) async throws -> RawResponse? {
        guard onLinks != nil, validators == nil, let walk, walk.serves(url) else { return nil }
        let headers = try requestHeaders(url, validators: nil)
        let received = self.received
        let answer = try await walk.fetch(url, headers: headers, label: label, onLinks: onLinks) { bytes in
            received.wire.add(Int64(bytes), ordering: .relaxed)
        }
        guard case .page(let body, let links, let headers) = answer else { return nil }
        return RawResponse(
            body: Self.data(body), links: links, url: url, validators: nil, cursorHeader: cursorHeader(in: headers),
            contentEncoding: Self.contentEncoding(headers))
    }

    /// One request and the redirects it is allowed to follow.
    ///
    /// Followed: 302, 303 and 307 to the same origin, or from http to https on the same host.
    /// Not followed: 301 and 308 (the feed moved: the operator updates its url, the error names
    /// the new one) and redirects to another origin (which would see the request, and must never
    /// see the token).
    private func exchange(
        _ start: URL, label: RequestLabel, validators: Validators?, onLinks: (@Sendable ([WebLink]) -> Void)?
    ) async throws -> RawResponse {
        var url = start
        var followed = 0
        while true {
            var request = HTTPClientRequest(url: url.absoluteString)
            request.method = .GET
            request.headers = try requestHeaders(url, validators: validators)
            if let tls { request.tlsConfiguration = tls }
            let deadline = NIODeadline.now() + TimeAmount(configuration.requestTimeout)
            let response = try await client.http.execute(request, deadline: deadline)
            let code = Int(response.status.code)
            countWire(WireSize.head(status: response.status, headers: response.headers))
            if code == 304, validators != nil {
                return RawResponse(body: Data(), links: [], url: url, validators: validators, notModified: true)
            }
            if [301, 302, 303, 307, 308].contains(code) {
                let target = redirectTarget(response, from: url, label: label)
                guard case .success(let next) = target else {
                    if case .failure(let error) = target { throw error }
                    preconditionFailure()
                }
                followed += 1
                guard followed <= Self.maxRedirects else {
                    throw FeedError(.other, "\(label): more than \(Self.maxRedirects) redirects (the last to \(next.redactedForLog))")
                }
                // Read what little a redirect carries, so its connection can be reused.
                if let body = try? await response.body.collect(upTo: 64 << 10) {
                    countWire(WireSize.body(headers: response.headers, bytesRead: body.readableBytes))
                }
                url = next
                continue
            }
            guard (200..<300).contains(code) else {
                // Read (a little of it), so what it cost on the wire is counted and its
                // connection can be reused.
                if let body = try? await response.body.collect(upTo: 64 << 10) {
                    countWire(WireSize.body(headers: response.headers, bytesRead: body.readableBytes))
                }
                throw Self.statusError(response.status, response.headers, label: label)
            }
            if let error = Self.declaredTooLarge(response.headers, limit: configuration.maxBodyBytes, label: label) { throw error }
            let links = LinkHeader.parse(response.headers["link"], base: url)
            if let onLinks {
                // Told where the walk tells it, as ``executor`` promises.
                if let walk { walk.tell(links, to: onLinks) } else { onLinks(links) }
            }
            let buffer = try await response.body.collect(upTo: configuration.maxBodyBytes)
            countWire(WireSize.body(headers: response.headers, bytesRead: buffer.readableBytes))
            let found = Validators(etag: response.headers.first(name: "etag"), lastModified: response.headers.first(name: "last-modified"))
            return RawResponse(
                body: Self.data(buffer), links: links, url: url,
                validators: found.isEmpty ? nil : found, cursorHeader: cursorHeader(in: response.headers),
                contentEncoding: Self.contentEncoding(response.headers))
        }
    }

    /// The body's content coding, lowercased, unless it is none or `identity`.
    private static func contentEncoding(_ headers: HTTPHeaders) -> String? {
        let codings = headers["content-encoding"].flatMap { $0.split(separator: ",") }
            .map { $0.trimmingCharacters(in: .whitespaces).lowercased() }.filter { !$0.isEmpty && $0 != "identity" }
        return codings.isEmpty ? nil : codings.joined(separator: ", ")
    }

    /// Why a successful answer is not the feed's page, when it plainly is not: a body in an
    /// encoding that was not asked for or not decoded, or an HTML page (a login page in the
    /// feed's place needs someone to act, and is not retried).
    private func refusal(of raw: RawResponse, label: RequestLabel) -> FeedError? {
        let redirected = raw.url.absoluteString == label.url.absoluteString ? "" : " (redirected to \(raw.url.redactedForLog))"
        if let coding = raw.contentEncoding, !["gzip", "x-gzip", "deflate"].contains(coding) {
            return FeedError(.malformed, "\(label)\(redirected): the server sent a body encoded as \(coding), which was not asked for (syncd asks for gzip or deflate)")
        }
        if raw.body.starts(with: [0x1F, 0x8B]) {
            return FeedError(.malformed, "\(label)\(redirected): the body is still gzip-compressed: the HTTPClient shared with HTTPFeedClient(sharing:) "
                + "does not decompress; give it decompression: .enabled(limit:), or leave the sharing client's options.decompression off")
        }
        guard let page = HTMLPage(raw.body) else { return nil }
        if page.isLogin || Self.looksLikeLogin(raw.url) {
            return FeedError(.malformed, "\(label)\(redirected): the server answered with a login page, not the feed: "
                + "the request is not authorized; check token or token_file (not retried until then)", needsAction: true)
        }
        return FeedError(.malformed, "\(label)\(redirected): the server answered with an HTML page\(page.title.map { " (\"\($0)\")" } ?? ""), not the feed's JSON")
    }

    /// A path that names a sign-in: where single sign-on sends a request without credentials.
    private static func looksLikeLogin(_ url: URL) -> Bool {
        let path = url.path.lowercased()
        return ["login", "signin", "sign_in", "sign-in", "sso", "oauth", "authorize"].contains { path.contains($0) }
    }

    /// The value of the descriptor's cursor header in `headers`, if it has one.
    private func cursorHeader(in headers: HTTPHeaders) -> String? {
        guard case .headerCursor(let name, _) = configuration.descriptor.older else { return nil }
        return headers.first(name: name)
    }

    private func countWire(_ bytes: Int) {
        received.wire.add(Int64(bytes), ordering: .relaxed)
    }

    /// The bytes of `buffer`, copied at once: `Data`'s initializer from a sequence would first
    /// look for a contiguous representation through a dynamic cast, for every page.
    private static func data(_ buffer: ByteBuffer) -> Data {
        buffer.withUnsafeReadableBytes { Data($0) }
    }

    /// The headers of a GET of `url`.
    private func requestHeaders(_ url: URL, validators: Validators?) throws -> HTTPHeaders {
        var headers = HTTPHeaders()
        // JSON first; Atom and RSS are read too.
        headers.add(name: "Accept", value: "application/json, application/feed+json;q=0.9, application/atom+xml;q=0.8, application/rss+xml;q=0.8, application/xml;q=0.5")
        headers.add(name: "User-Agent", value: configuration.userAgent)
        if client.options.decompression {
            headers.add(name: "Accept-Encoding", value: "gzip, deflate")
        }
        // Link targets and redirects come from the server; the token goes only where the
        // operator pointed it.
        if let authorization = configuration.authorization, mayAuthorize(url) {
            headers.add(name: "Authorization", value: try authorization.headerValue())
        }
        if let validators {
            if let etag = validators.etag { headers.add(name: "If-None-Match", value: etag) }
            if let lastModified = validators.lastModified { headers.add(name: "If-Modified-Since", value: lastModified) }
        }
        return headers
    }

    /// Where a redirect may be followed to, or why not.
    private func redirectTarget(_ response: HTTPClientResponse, from url: URL, label: RequestLabel) -> Result<URL, FeedError> {
        let code = Int(response.status.code)
        let status = "HTTP \(code) \(response.status.reasonPhrase)"
        guard let location = response.headers.first(name: "location"),
              let target = URL(string: location, relativeTo: url)?.absoluteURL,
              let scheme = target.scheme?.lowercased(), scheme == "http" || scheme == "https", target.host != nil
        else {
            return .failure(FeedError(.httpStatus(code), "\(label): \(status) without a usable Location"))
        }
        if code == 301 || code == 308 {
            return .failure(FeedError(.httpStatus(code), "\(label): \(status): the feed moved to \(target.redactedForLog); "
                + "update its url in the configuration (a permanent move is not followed)"))
        }
        guard target.origin == url.origin || Self.isUpgrade(from: url, to: target) else {
            return .failure(FeedError(.httpStatus(code), "\(label): \(status) to another origin, \(target.redactedForLog): "
                + "not followed (only the same origin, or https on the same host)"))
        }
        return .success(target)
    }

    /// http to https on the same host: the only change of origin that is followed.
    static func isUpgrade(from url: URL, to target: URL) -> Bool {
        url.scheme?.lowercased() == "http" && target.scheme?.lowercased() == "https"
            && url.host?.lowercased() == target.host?.lowercased()
    }

    /// The configured origin, or its https upgrade on the same host (reached by a redirect).
    private func mayAuthorize(_ url: URL) -> Bool {
        url.origin == configuration.url.origin || Self.isUpgrade(from: configuration.url, to: url)
    }

    /// Bounds the whole exchange, body included: AsyncHTTPClient's deadline stops at the
    /// response head, and a server that sends headers and then stalls must still time out.
    ///
    /// The timer is a NIO scheduled task rather than a racing `Task.sleep`: cancelling it takes
    /// it off the event loop, whereas a cancelled sleep still wakes the process at its deadline,
    /// once for every request ever made, long after the answer came.
    private func withRequestTimeout(
        _ label: RequestLabel, _ operation: @escaping @Sendable () async throws -> RawResponse
    ) async throws -> RawResponse {
        let timeout = configuration.requestTimeout
        // Started in place: the request goes out before this task's caller runs on, instead of
        // waiting in the event loop's queue behind whatever that caller does next.
        let work = Task.immediate { try await operation() }
        let expired = SharedFlag()
        // On the loop this task runs on, when it runs on one: a timer armed and cancelled on
        // another loop wakes that loop twice per request (`eventfd` writes, BENCHMARKS.md).
        let timer = client.http.eventLoopGroup.any().scheduleTask(in: TimeAmount(timeout)) {
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
            throw Self.timeoutError(label, after: timeout)
        }
        return try result.get()
    }

    /// The error for a request whose response had not ended `timeout` after it went out: the
    /// same from the pool's deadline as from the walk's.
    static func timeoutError(_ label: RequestLabel, after timeout: Duration) -> FeedError {
        FeedError(.timeout, "\(label): no complete response within \(timeout)")
    }

    /// The error for a response whose `Content-Length` is over `limit`, known before its body
    /// is read; an encoded body's length says nothing of its size once decoded.
    static func declaredTooLarge(_ headers: HTTPHeaders, limit: Int, label: RequestLabel) -> FeedError? {
        let encoded = headers["content-encoding"].contains { $0.lowercased() != "identity" }
        guard !encoded, let length = headers.first(name: "content-length").flatMap(Int.init), length > limit else { return nil }
        return FeedError(.tooLarge, "\(label): the body is \(length) bytes, more than the limit of \(limit)")
    }

    static func statusError(_ status: HTTPResponseStatus, _ headers: HTTPHeaders, label: RequestLabel) -> FeedError {
        let retryAfter = headers.first(name: "retry-after").flatMap {
            RetryAfter.parse($0, responseDate: headers.first(name: "date"))
        }
        var message = "\(label): HTTP \(status.code) \(status.reasonPhrase)"
        if let retryAfter { message += " (retry after \(retryAfter))" }
        return FeedError(.httpStatus(Int(status.code)), message, retryAfter: retryAfter)
    }

    private func log(_ label: RequestLabel, _ started: ContinuousClock.Instant, outcome: String) {
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

/// The validators of a response, sent back as If-None-Match / If-Modified-Since.
struct Validators: Sendable, Hashable {
    var etag: String?
    var lastModified: String?
    var isEmpty: Bool { etag == nil && lastModified == nil }
}

/// Bytes received by a source, shared by its copies (a source is a value type).
private final class ReceivedBytes: Sendable {
    /// Page bodies after content decoding.
    let total = Atomic<Int>(0)
    /// Whole responses as near to their size on the wire as known (``WireSize``).
    let wire = Atomic<Int64>(0)
}

/// Validators of the last answers to refresh URLs, and the count of 304s. In memory: after a
/// restart the first refresh is unconditional.
private final class ValidatorCache: Sendable {
    private struct State {
        var validators: [String: Validators] = [:]
        var notModified = 0
    }
    private let state = Mutex(State())
    /// A cursor feed's refresh URL changes as items arrive; old ones are dropped past this.
    private static let limit = 16

    func validators(for url: URL) -> Validators? {
        state.withLock { $0.validators[url.absoluteString] }
    }

    func store(_ validators: Validators, for url: URL) {
        state.withLock { state in
            if state.validators.count >= Self.limit { state.validators = [:] }
            state.validators[url.absoluteString] = validators
        }
    }

    func countNotModified() -> Int {
        state.withLock { state in
            state.notModified += 1
            return state.notModified
        }
    }

    var notModifiedCount: Int { state.withLock { $0.notModified } }
}

/// What one page of a feed showed (``HTTPFeedSource/probe()``).
public struct FeedProbe: Sendable, Hashable {
    /// Where its items were, in a JSON body.
    public var itemsAt: JSONPointer
    /// What the body was when it was not JSON: "an Atom document's entries", "an RSS channel's items".
    public var document: String?
    /// How many the page held.
    public var itemCount: Int
    /// The first ids, newest first, at most five.
    public var firstIDs: [String]
    /// The page just older, as a sync would ask for it; `nil` when this page is the last.
    public var olderCursor: String?
    /// Where newer items would be asked for.
    public var newerCursor: String?
}

/// An HTML document where a feed page was expected: what a message can say of it.
struct HTMLPage {
    /// Its `<title>`, cut to 80 characters and stripped of control characters, if it has one.
    var title: String?
    /// It holds a password field: a sign-in form.
    var isLogin: Bool

    /// `nil` unless `body` starts (after blanks and a byte order mark) like an HTML document.
    init?(_ body: Data) {
        // Every page passes here: only a body that opens with markup is decoded to look closer.
        guard opensWithMarkup(body) else { return nil }
        let head = String(decoding: body.prefix(64 << 10), as: UTF8.self)
        let start = head.drop { $0.isWhitespace || $0 == "\u{FEFF}" }.prefix(256).lowercased()
        guard start.hasPrefix("<!doctype html") || start.hasPrefix("<html") || (start.hasPrefix("<") && start.contains("<html")) else { return nil }
        let lower = head.lowercased()
        isLogin = lower.contains("type=\"password\"") || lower.contains("type='password'") || lower.contains("type=password")
        if let open = head.range(of: "<title", options: .caseInsensitive),
           let close = head.range(of: "</title>", options: .caseInsensitive, range: open.upperBound..<head.endIndex),
           let tagEnd = head.range(of: ">", range: open.upperBound..<close.lowerBound) {
            let text = head[tagEnd.upperBound..<close.lowerBound].unicodeScalars.filter { !CharacterSet.controlCharacters.contains($0) }
            let trimmed = String(String.UnicodeScalarView(text)).trimmingCharacters(in: .whitespacesAndNewlines)
            title = trimmed.isEmpty ? nil : String(trimmed.prefix(80))
        }
    }
}

/// Where a feed's items were found in its first page, when no pointer was configured; shared by
/// a source's copies.
private final class DetectedItems: Sendable {
    private let found = Mutex<JSONPointer?>(nil)

    var pointer: JSONPointer? { found.withLock { $0 } }

    /// Keeps `pointer`; whether it was the first time (the finding is then told once).
    func remember(_ pointer: JSONPointer) -> Bool {
        found.withLock { found in
            defer { found = pointer }
            return found == nil
        }
    }
}

/// The latest of some value; shared by a source's copies.
private final class LastValue<Value: Sendable>: Sendable {
    private let latest = Mutex<Value?>(nil)

    func set(_ value: Value) { latest.withLock { $0 = value } }
    var value: Value? { latest.withLock { $0 } }
}

/// True the first time only; shared by a source's copies.
private final class Once: Sendable {
    private let done = Atomic<Bool>(false)

    func first() -> Bool { !done.exchange(true, ordering: .relaxed) }
}

/// A flag set once from one task and read from others: a request timer that fired, a server seen to fold headers.
private final class SharedFlag: Sendable {
    let value = Atomic<Bool>(false)
}

/// "GET <url>" for messages and logs, with credentials redacted; built only when a message is,
/// because redacting parses the URL again and a request that succeeds quietly needs none.
struct RequestLabel: CustomStringConvertible, Sendable {
    let url: URL

    var description: String { "GET \(url.redactedForLog)" }
}
