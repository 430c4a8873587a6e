import Foundation
import SyncCore

/// How a feed's pages are addressed.
public enum FeedPagination: String, Sendable, Hashable, CaseIterable {
    /// Chosen from each response: page numbers when its links carry `page=` or the relations
    /// `first`/`last` (GitHub), cursors otherwise (Mastodon).
    case automatic
    /// Cursors relative to items (`max_id`/`min_id`, Link `next`/`prev`): a newer page starts
    /// just above a given item, so refresh never skips one.
    case cursor
    /// Page numbers (`page=2`, Link `first`/`prev`/`next`/`last`, no `prev` on page 1): a newer
    /// page can only be page 1, so refresh walks down from it until it meets a stored item.
    case page

    /// The choice for a configured URL when none is given: GitHub's API pages by number.
    public static func detect(for url: URL) -> FeedPagination {
        if url.host?.lowercased() == "api.github.com" { return .page }
        let names = URLComponents(url: url, resolvingAgainstBaseURL: false)?.queryItems?.map { $0.name.lowercased() } ?? []
        if names.contains("page") || names.contains("per_page") { return .page }
        return .automatic
    }
}

/// One HTTP feed: where it is and how to read it.
public struct HTTPFeedConfiguration: Sendable, Hashable, CustomStringConvertible, CustomReflectable {
    /// The URL of the newest page, e.g. `https://mastodon.example/api/v1/timelines/home?limit=40`.
    public var url: URL
    /// How the API's pages are read: where the items and their ids are, how older and newer
    /// pages are reached.
    public var descriptor: FeedDescriptor
    /// The member of each item holding its id (a string, or an integer kept as its digits):
    /// ``descriptor``'s id when that is a member of the item itself.
    public var idField: String {
        get { descriptor.id.tokens.count == 1 ? descriptor.id.tokens[0] : descriptor.id.description }
        set { descriptor.id = JSONPointer(tokens: [newValue]) }
    }
    /// How requests authenticate; the token is sent only to the origin of ``url``.
    public var authorization: FeedAuthorization?
    /// Limit on a whole request: connecting, waiting for headers and reading the body.
    public var requestTimeout: Duration
    /// Largest body accepted (after decompression); larger pages fail as `.tooLarge`.
    public var maxBodyBytes: Int
    /// `min_id` used to follow a feed that was empty at its first load, from its beginning, so
    /// the first items to appear are not skipped. `nil` re-reads ``url`` instead (servers whose
    /// ids are not numeric), which can miss items if more than a page arrive between polls.
    public var emptyFeedMinID: String?
    /// Sent as `User-Agent`.
    public var userAgent: String
    /// How pages are addressed (cursors or page numbers).
    public var pagination: FeedPagination
    /// A private CA and a client certificate; `nil` trusts the system store and sends none.
    public var tls: FeedTLS?

    /// A feed at `url`, read as `descriptor` says, with its id at the member `idField` when
    /// given; `pagination` `nil` picks one from the URL (``FeedPagination/detect(for:)``). Not
    /// checked here: see ``validate()``.
    public init(
        url: URL,
        idField: String? = nil,
        descriptor: FeedDescriptor = FeedDescriptor(),
        authorization: FeedAuthorization? = nil,
        requestTimeout: Duration = .seconds(30),
        maxBodyBytes: Int = 8 << 20,
        emptyFeedMinID: String? = "0",
        userAgent: String = "syncd",
        pagination: FeedPagination? = nil,
        tls: FeedTLS? = nil
    ) {
        self.url = url
        self.descriptor = descriptor
        if let idField { self.descriptor.id = JSONPointer(tokens: [idField]) }
        self.authorization = authorization
        self.requestTimeout = requestTimeout
        self.maxBodyBytes = maxBodyBytes
        self.emptyFeedMinID = emptyFeedMinID
        self.userAgent = userAgent
        self.pagination = pagination ?? FeedPagination.detect(for: url)
        self.tls = tls
    }

    /// Rejects configurations that cannot work, with the reason.
    public func validate() throws(FeedError) {
        guard let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https", url.host != nil else {
            throw FeedError(.other, "feed URL \(url.redactedForLog) must be an absolute http or https URL")
        }
        guard descriptor.id.tokens.first?.isEmpty == false else { throw FeedError(.other, "the id must be a member of the item, not \"\(descriptor.id)\"") }
        try descriptor.validate()
        guard requestTimeout > .zero else { throw FeedError(.other, "the request timeout must be positive") }
        guard maxBodyBytes > 0 else { throw FeedError(.other, "the body size limit must be positive") }
    }

    /// For logs: the URL redacted and the token hidden.
    public var description: String {
        "HTTPFeedConfiguration(url: \(url.redactedForLog), descriptor: \(descriptor), "
            + "authorization: \(authorization.map(String.init(describing:)) ?? "none"), "
            + "requestTimeout: \(requestTimeout), maxBodyBytes: \(maxBodyBytes), pagination: \(pagination.rawValue))"
    }

    /// What `dump` and debuggers show: the URL redacted, the token hidden.
    public var customMirror: Mirror {
        Mirror(self, children: [
            "url": url.redactedForLog,
            "descriptor": descriptor,
            "authorization": authorization.map(String.init(describing:)) ?? "none",
            "requestTimeout": requestTimeout,
            "maxBodyBytes": maxBodyBytes,
            "emptyFeedMinID": emptyFeedMinID as Any,
            "userAgent": userAgent,
            "pagination": pagination.rawValue,
            "tls": tls.map { String(describing: $0) } ?? "default",
        ])
    }
}

extension URL {
    /// The URL with the values of credential-looking query parameters replaced, for logs and
    /// error messages (some APIs take `access_token=` in the query).
    package var redactedForLog: String {
        guard var components = URLComponents(url: self, resolvingAgainstBaseURL: false) else { return "<unparseable URL>" }
        components.user = nil
        components.password = nil
        let sensitive = ["token", "key", "secret", "password", "auth", "sig", "credential"]
        components.queryItems = components.queryItems?.map { item in
            let name = item.name.lowercased()
            return sensitive.contains(where: name.contains) ? URLQueryItem(name: item.name, value: "REDACTED") : item
        }
        return components.string ?? "<unparseable URL>"
    }

    /// scheme, host and port, which decide whether credentials may be sent.
    var origin: String {
        let scheme = self.scheme?.lowercased() ?? ""
        let port = self.port ?? (scheme == "https" ? 443 : 80)
        return "\(scheme)://\(host?.lowercased() ?? ""):\(port)"
    }
}
