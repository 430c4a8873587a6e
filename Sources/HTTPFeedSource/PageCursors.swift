import Foundation
import SyncCore

/// Where a page's older and newer neighbours are, by a ``FeedDescriptor``: pure, from what one
/// response gave (its URL, items, body values, `Link` and cursor header).
struct PageCursors {
    let descriptor: FeedDescriptor
    /// The configured URL: the feed's newest page.
    let feedURL: URL

    /// What one response gave.
    struct Answer {
        /// The URL that was asked for (after redirects).
        var url: URL
        var items: [FeedItem]
        var values: [JSONPointer: JSONScalar]
        var links: [WebLink]
        /// The value of the descriptor's cursor header, if it has one and the response carried it.
        var cursorHeader: String?
    }

    /// The URL of the page just older than `answer`'s; `nil` when it was the last.
    func older(_ answer: Answer) -> String? {
        if isLast(answer) { return nil }
        switch descriptor.older {
        case .linkHeader:
            // RFC 5005: a paged feed's `next`, or an archived feed's `prev-archive`.
            return (LinkHeader.first("next", in: answer.links) ?? LinkHeader.first("prev-archive", in: answer.links))?.absoluteString
        case .bodyURL(let pointer):
            guard let text = answer.values[pointer]?.text else { return nil }
            return URL(string: text, relativeTo: answer.url)?.absoluteURL.absoluteString
        case .bodyCursor(let pointer, let parameter):
            guard let cursor = answer.values[pointer]?.text else { return nil }
            return olderURL(answer.url, setting: parameter, to: cursor)
        case .headerCursor(_, let parameter):
            guard let cursor = answer.cursorHeader, !cursor.isEmpty else { return nil }
            return olderURL(answer.url, setting: parameter, to: cursor)
        case .lastItemID(let parameter):
            guard let last = answer.items.last else { return nil }
            return olderURL(answer.url, setting: parameter, to: last.id)
        case .offset(let parameter):
            guard !answer.items.isEmpty else { return nil }
            let next = (Self.value(of: parameter, in: answer.url).flatMap { Int($0) } ?? 0) + answer.items.count
            if let total = descriptor.end.total, let count = answer.values[total]?.text.flatMap({ Int($0) }), next >= count { return nil }
            return olderURL(answer.url, setting: parameter, to: String(next))
        case .pageNumber(let parameter, let first):
            guard !answer.items.isEmpty else { return nil }
            let current = Self.value(of: parameter, in: answer.url).flatMap { Int($0) } ?? first
            return olderURL(answer.url, setting: parameter, to: String(current + 1))
        }
    }

    /// The URL of the items just newer than `answer`'s newest, for the ways that name one;
    /// `nil` when there is none to give (the newer cursor already kept stays).
    func newer(_ answer: Answer) -> String? {
        switch descriptor.newer {
        case .automatic, .head:
            return nil
        case .idParameter(let parameter):
            guard let newest = answer.items.first else { return nil }
            return Self.url(feedURL, setting: parameter, to: newest.id, removing: olderParameters)
        case .bodyURL(let pointer):
            guard let text = answer.values[pointer]?.text else { return nil }
            return URL(string: text, relativeTo: answer.url)?.absoluteURL.absoluteString
        }
    }

    /// Whether the body says this page is the last.
    private func isLast(_ answer: Answer) -> Bool {
        if let pointer = descriptor.end.hasMore, answer.values[pointer] == .bool(false) { return true }
        if let pointer = descriptor.end.isLast, answer.values[pointer] == .bool(true) { return true }
        return false
    }

    /// The parameters the older pages set: a newer URL drops them, so that it starts at the feed's top.
    private var olderParameters: [String] {
        switch descriptor.older {
        case .bodyCursor(_, let parameter), .headerCursor(_, let parameter), .lastItemID(let parameter),
             .offset(let parameter), .pageNumber(let parameter, _):
            return [parameter]
        case .linkHeader, .bodyURL:
            return []
        }
    }

    /// `url` with `parameter` set to `value`, without the newer parameter (an older page
    /// continues downwards from the one it came from, even when that was a newer page).
    private func olderURL(_ url: URL, setting parameter: String, to value: String) -> String {
        var removing: [String] = []
        if case .idParameter(let newer) = descriptor.newer { removing.append(newer) }
        return Self.url(url, setting: parameter, to: value, removing: removing)
    }

    /// `url` with the query parameter `parameter` set to `value` (replacing any), and without
    /// the parameters `removing`.
    static func url(_ url: URL, setting parameter: String, to value: String, removing: [String] = []) -> String {
        guard var components = URLComponents(url: url, resolvingAgainstBaseURL: true) else { return url.absoluteString }
        var items = (components.queryItems ?? []).filter { $0.name != parameter && !removing.contains($0.name) }
        items.append(URLQueryItem(name: parameter, value: value))
        components.queryItems = items
        // URLQueryItem leaves '+' as it is, which servers read as a space: a cursor's '+' must arrive as itself.
        components.percentEncodedQuery = components.percentEncodedQuery?.replacingOccurrences(of: "+", with: "%2B")
        return components.url?.absoluteString ?? url.absoluteString
    }

    /// The value of the query parameter `name` in `url`, if present.
    static func value(of name: String, in url: URL) -> String? {
        URLComponents(url: url, resolvingAgainstBaseURL: true)?.queryItems?.last { $0.name == name }?.value
    }
}
