import Foundation
import SyncCore

/// The reading of a well-known API: a ``FeedDescriptor``, the query parameter of its page size,
/// and how its `Link` pages are numbered. A configuration names one and overrides what differs.
public enum FeedDialect: String, Sendable, Hashable, CaseIterable {
    /// Mastodon's timelines: a bare array, `Link` next/prev with `max_id`/`min_id`.
    case mastodon
    /// GitHub's REST lists: a bare array, `Link` with page numbers.
    case github
    /// GitLab's REST lists: as GitHub's.
    case gitlab
    /// Gitea's and Forgejo's REST lists: as GitHub's, with `limit`.
    case gitea
    /// Bluesky's (AT Protocol) feeds: `{"feed": [...], "cursor": …}`, each id at `/post/uri`.
    case bluesky
    /// Slack's Web API histories: `messages`, `response_metadata.next_cursor`, `has_more`.
    case slack
    /// Stripe's lists: `data`, `has_more`, `starting_after` and `ending_before`.
    case stripe
    /// Notion's lists: `results`, `next_cursor` sent back as `start_cursor`, `has_more`.
    case notion
    /// Jira Cloud's enhanced search: `issues`, `nextPageToken`, `isLast`.
    case jira
    /// JSON:API with the cursor pagination profile: `data`, `links.next`, `page[before]`.
    case jsonapi
    /// HAL (Spring Data REST and others): `_embedded.items`, `_links.next.href`.
    case hal
    /// JSON Feed 1.1: `items`, `next_url`.
    case jsonfeed
    /// Atom 1.0 (RFC 4287), paged or archived by RFC 5005 (`next`, `prev-archive`).
    case atom
    /// RSS 2.0, paged by `atom:link rel="next"` where the channel has one.
    case rss

    /// How its pages are read.
    public var descriptor: FeedDescriptor {
        func pointer(_ text: String) -> JSONPointer { (try? JSONPointer(text)) ?? .root }
        switch self {
        case .mastodon, .github, .gitlab, .gitea:
            return FeedDescriptor()
        case .bluesky:
            return FeedDescriptor(
                items: pointer("/feed"), id: pointer("/post/uri"), updated: pointer("/post/indexedAt"),
                older: .bodyCursor(pointer("/cursor"), parameter: "cursor"), newer: .head)
        case .slack:
            return FeedDescriptor(
                items: pointer("/messages"), id: pointer("/ts"), updated: pointer("/edited/ts"),
                older: .bodyCursor(pointer("/response_metadata/next_cursor"), parameter: "cursor"), newer: .head,
                end: PageEnd(hasMore: pointer("/has_more")))
        case .stripe:
            return FeedDescriptor(
                items: pointer("/data"), older: .lastItemID(parameter: "starting_after"), newer: .idParameter("ending_before"),
                end: PageEnd(hasMore: pointer("/has_more")))
        case .notion:
            return FeedDescriptor(
                items: pointer("/results"), updated: pointer("/last_edited_time"),
                older: .bodyCursor(pointer("/next_cursor"), parameter: "start_cursor"), newer: .head,
                end: PageEnd(hasMore: pointer("/has_more")))
        case .jira:
            return FeedDescriptor(
                items: pointer("/issues"), updated: pointer("/fields/updated"),
                older: .bodyCursor(pointer("/nextPageToken"), parameter: "nextPageToken"), newer: .head,
                end: PageEnd(isLast: pointer("/isLast")))
        case .jsonapi:
            return FeedDescriptor(items: pointer("/data"), older: .bodyURL(pointer("/links/next")), newer: .idParameter("page[before]"))
        case .hal:
            return FeedDescriptor(items: pointer("/_embedded/items"), older: .bodyURL(pointer("/_links/next/href")), newer: .head)
        case .jsonfeed:
            return FeedDescriptor(items: pointer("/items"), updated: pointer("/date_modified"), older: .bodyURL(pointer("/next_url")), newer: .head)
        case .atom, .rss:
            // Entries are read as JSON objects of their common fields (docs/feeds.md); the
            // document's own links say where older entries are.
            return FeedDescriptor(newer: .head)
        }
    }

    /// The query parameter that sets how many items a page holds.
    public var pageSizeParameter: String {
        switch self {
        case .mastodon, .bluesky, .slack, .stripe, .gitea: "limit"
        case .github, .gitlab: "per_page"
        case .notion: "page_size"
        case .jira: "maxResults"
        case .jsonapi: "page[size]"
        case .hal: "size"
        case .jsonfeed, .atom, .rss: "limit"
        }
    }

    /// How its `Link` pages are addressed; `nil` where it pages otherwise.
    public var pagination: FeedPagination? {
        switch self {
        case .mastodon: .cursor
        case .github, .gitlab, .gitea: .page
        default: nil
        }
    }
}
