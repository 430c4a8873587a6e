import Foundation

/// One row of a feed's content list.
public struct ControlRow: Sendable, Hashable, Codable {
    /// The item's id.
    public var id: String
    /// One line of text for the row.
    public var summary: String

    /// A row for item `id`.
    public init(id: String, summary: String) {
        self.id = id
        self.summary = summary
    }
}

/// The footer below the content.
public enum ControlOlderFooter: Sendable, Hashable {
    /// Loading older items.
    case spinner
    /// Loading older items failed; the client shows the message where the spinner was, with a retry hint.
    case error(String)
    /// The oldest item has been reached.
    case end
}

/// A transient notice above the content.
public enum ControlNewerNotice: Sendable, Hashable {
    /// New items arrived at the top.
    case newItems(count: Int)
    /// Loading newer items failed; the content stays.
    case error(String)
}

/// What a client shows for one feed: exactly one main view plus overlays.
public struct ControlPresentation: Sendable, Hashable {
    /// The one main view.
    public enum Main: Sendable, Hashable {
        /// Placeholder rows while the first load runs.
        case skeleton(rows: Int)
        /// The newest rows.
        case content([ControlRow])
        /// Loaded, and there is nothing.
        case empty
        /// The first load failed; nothing to show but the reason and a retry.
        case error(String)
    }

    /// The main view: skeleton, content, empty or error.
    public var main: Main
    /// Shown over the main view while the feed's host cannot be reached.
    public var offlineBanner: ControlOfflineBanner?
    /// Below the content, where older items load; `nil` when there is nothing to show.
    public var olderFooter: ControlOlderFooter?
    /// Above the content: new items or a failed refresh.
    public var newerNotice: ControlNewerNotice?

    /// A presentation.
    public init(main: Main, offlineBanner: ControlOfflineBanner? = nil, olderFooter: ControlOlderFooter? = nil, newerNotice: ControlNewerNotice? = nil) {
        self.main = main
        self.offlineBanner = offlineBanner
        self.olderFooter = olderFooter
        self.newerNotice = newerNotice
    }
}

extension ControlPresentation: Codable {
    private enum CodingKeys: String, CodingKey {
        case main, skeletonRows, rows, errorMessage, offlineBanner, olderFooter, newerNotice
    }

    private enum MainKind: String, Codable { case skeleton, content, empty, error }

    private struct Footer: Codable {
        enum Kind: String, Codable { case spinner, error, end }
        var kind: Kind
        var message: String?
    }

    private struct Notice: Codable {
        enum Kind: String, Codable { case newItems = "new_items", error }
        var kind: Kind
        var message: String
        var count: Int?
    }

    /// Decodes the wire form (`main` with its kind, the overlays when present).
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        switch try container.decode(MainKind.self, forKey: .main) {
        case .skeleton: main = .skeleton(rows: try container.decodeIfPresent(Int.self, forKey: .skeletonRows) ?? 0)
        case .content: main = .content(try container.decodeIfPresent([ControlRow].self, forKey: .rows) ?? [])
        case .empty: main = .empty
        case .error: main = .error(try container.decodeIfPresent(String.self, forKey: .errorMessage) ?? "")
        }
        offlineBanner = try container.decodeIfPresent(ControlOfflineBanner.self, forKey: .offlineBanner)
        olderFooter = try container.decodeIfPresent(Footer.self, forKey: .olderFooter).map { footer in
            switch footer.kind {
            case .spinner: .spinner
            case .error: .error(footer.message ?? "")
            case .end: .end
            }
        }
        newerNotice = try container.decodeIfPresent(Notice.self, forKey: .newerNotice).map { notice in
            switch notice.kind {
            case .newItems: .newItems(count: notice.count ?? 0)
            case .error: .error(notice.message)
            }
        }
    }

    /// Encodes the wire form the interface describes.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        switch main {
        case .skeleton(let rows):
            try container.encode(MainKind.skeleton, forKey: .main)
            try container.encode(rows, forKey: .skeletonRows)
        case .content(let rows):
            try container.encode(MainKind.content, forKey: .main)
            try container.encode(rows, forKey: .rows)
        case .empty:
            try container.encode(MainKind.empty, forKey: .main)
        case .error(let message):
            try container.encode(MainKind.error, forKey: .main)
            try container.encode(message, forKey: .errorMessage)
        }
        try container.encodeIfPresent(offlineBanner, forKey: .offlineBanner)
        switch olderFooter {
        case nil: break
        case .spinner?: try container.encode(Footer(kind: .spinner), forKey: .olderFooter)
        case .error(let message)?: try container.encode(Footer(kind: .error, message: message), forKey: .olderFooter)
        case .end?: try container.encode(Footer(kind: .end), forKey: .olderFooter)
        }
        switch newerNotice {
        case nil: break
        case .newItems(let count)?:
            let message = count == 1 ? "1 new item" : "\(count) new items"
            try container.encode(Notice(kind: .newItems, message: message, count: count), forKey: .newerNotice)
        case .error(let message)?:
            try container.encode(Notice(kind: .error, message: message), forKey: .newerNotice)
        }
    }
}
