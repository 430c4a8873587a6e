/// How much of a feed's newest part a revalidation reads again (``SyncConfiguration/revalidate``).
public enum RevalidationWindow: Sendable, Hashable, CustomStringConvertible {
    /// The newest `count` stored items (at least 1).
    case items(Int)
    /// The whole feed, down to its end: for small feeds.
    case all

    /// `200 items` or `all`, as logs and status show it.
    public var description: String {
        switch self {
        case .items(let count): "\(count) items"
        case .all: "all"
        }
    }
}

/// What one revalidation walk read: the newest pages of a feed, from its head down, with which of
/// them are known to follow one another with nothing in between.
///
/// A store commits ``pages`` as newer pages (new items placed next to the stored ones each page
/// holds, changed ones replaced in place) and removes what
/// ``ReconcileRule/deletions(stored:walk:)`` finds gone, in one transaction.
public struct RevalidationResult: Sendable, Hashable {
    /// The pages read, in walk order, as a store commits them one after another as newer pages
    /// (a page read again to check a join is not among them). A page that holds no item stored
    /// before it starts with the last item of the page above (committed by then), which anchors
    /// it below that page rather than at the top; the head's page carries the newer cursor.
    public var pages: [FeedPage]
    /// The ids read, in walk order, split where two pages were not shown to follow one another:
    /// within one stretch, no item of the server lies between two ids that are next to each other.
    /// The first stretch starts at the feed's head.
    public var stretches: [[String]]
    /// The last stretch ends at the feed's end (its last page had no older cursor).
    public var reachedEnd: Bool
    /// The head page's newer cursor, which becomes the feed's.
    public var newerCursor: String?
    /// Requests the walk sent, pages read again to check a join included.
    public var requests: Int

    /// Every item read, newest first as read, each id once (as first read).
    public var items: [FeedItem] {
        var seen: Set<ExactID> = []
        return pages.flatMap(\.items).filter { seen.insert(ExactID($0.id)).inserted }
    }

    /// A walk's reading; `stretches` must hold ids of `pages` only.
    public init(pages: [FeedPage], stretches: [[String]], reachedEnd: Bool, newerCursor: String?, requests: Int) {
        self.pages = pages
        self.stretches = stretches
        self.reachedEnd = reachedEnd
        self.newerCursor = newerCursor
        self.requests = requests
    }
}

/// The rule that decides which stored items a revalidation removes: shared by every store.
///
/// A stored item is gone from the server when it lies, in the store's order, between two items
/// that one stretch of the walk read next to each other (or between the feed's head and the first
/// item the walk read, or between the last item read and the feed's end when the walk reached
/// it), and the walk read it nowhere. New items pushing others down never remove anything: they
/// only add ids to the stretches. An item that moved (a feed sorted by update time) is read
/// elsewhere, so it stays.
public enum ReconcileRule {
    /// The ids of `stored` that `walk` shows gone, newest first.
    ///
    /// - Parameter stored: the feed's stored ids, newest first, from the newest down at least to
    ///   the lowest one the walk read; all of them when the walk reached the feed's end.
    public static func deletions(stored: [String], walk: RevalidationResult) -> [String] {
        var index: [ExactID: Int] = [:]
        index.reserveCapacity(stored.count)
        for (position, id) in stored.enumerated() { index[ExactID(id)] = position }
        var seen: Set<ExactID> = []
        for stretch in walk.stretches { for id in stretch { seen.insert(ExactID(id)) } }
        var gone: Set<Int> = []
        for (number, stretch) in walk.stretches.enumerated() {
            // The head of the feed bounds the first stretch from above, the feed's end the last
            // one from below when the walk reached it.
            var anchors = number == 0 ? [-1] : []
            anchors += stretch.compactMap { index[ExactID($0)] }
            if walk.reachedEnd && number == walk.stretches.count - 1 { anchors.append(stored.count) }
            for (upper, lower) in zip(anchors, anchors.dropFirst()) where upper + 1 < lower {
                for position in (upper + 1)..<lower where !seen.contains(ExactID(stored[position])) {
                    gone.insert(position)
                }
            }
        }
        return gone.sorted().map { stored[$0] }
    }
}

/// A revalidation walk as a pure value: it reads the feed from its head down until the window is
/// covered and says which requests to send; its driver sends them and hands back the pages.
///
/// Two pages join into one stretch when the first one's older cursor names its last item (a
/// keyset cursor: the next page starts right after it whatever changed above), when joining
/// them could remove nothing, or when the first page read again after the second gives the same
/// ids, and the head read again at the end of the walk is unchanged (so no item was added above
/// while the pages were read: items only went away, which shows in the page read again).
/// Otherwise the walk splits there, and the stored items between the two pages stay.
@_spi(StateMachine) public struct RevalidationWalk: Sendable {
    /// A page to fetch.
    public enum Request: Sendable, Hashable {
        /// The feed's newest page.
        case head
        /// The page at an older cursor.
        case older(String)
    }

    /// What the driver does next.
    public enum Step: Sendable, Hashable {
        /// Fetch this page and hand it to ``received(_:)``.
        case fetch(Request)
        /// The walk is over: commit its reading.
        case finished(RevalidationResult)
        /// The walk met no stored item before its page bound: it tells nothing about the stored
        /// items (more new items than it may read), so a plain refresh should run instead.
        case abandoned
    }

    private struct ReadPage: Sendable {
        var request: Request
        var items: [FeedItem]
        var keysetOlder: Bool
        var olderCursor: String?

        var ids: [String] { items.map(\.id) }

        /// Whether `page`, this page read again, holds the same ids in the same order.
        func isSame(as page: FeedPage) -> Bool {
            page.items.count == items.count && zip(page.items, items).allSatisfy { $0.id.isExactly($1.id) }
        }
    }

    private enum Phase: Sendable {
        case walking
        /// Page `index - 1` is being read again to decide whether it joins page `index`.
        case rereading(Int)
        /// The head is being read again to confirm the joins made by reading pages again.
        case checkingHead
        case done
    }

    private let window: RevalidationWindow
    private let stored: [String]
    private let position: [ExactID: Int]
    private var pages: [ReadPage] = []
    /// For each boundary (between page `i` and `i + 1`): whether the pages join, and whether that
    /// rests on a page read again (which the head check confirms).
    private var joins: [(joined: Bool, byReread: Bool)] = []
    private var itemIDs: Set<ExactID> = []
    private var lowestAnchor = -1
    private var requests = 0
    private var cursorsSeen: Set<ExactID> = []
    private var phase = Phase.walking
    private var reachedEnd = false
    private var pageLimit = 3
    private var newerCursor: String?

    /// A walk over `window`, against the stored ids, newest first: at least the window's, and
    /// some below it (an item read below the window confirms its last ones).
    public init(window: RevalidationWindow, stored: [String]) {
        self.window = window
        self.stored = stored
        var position: [ExactID: Int] = [:]
        for (index, id) in stored.enumerated() { position[ExactID(id)] = index }
        self.position = position
    }

    /// The first request: the head.
    public mutating func start() -> Step {
        requests += 1
        return .fetch(.head)
    }

    /// Hands over the page fetched for the last ``Step/fetch(_:)``; returns what to do next.
    public mutating func received(_ page: FeedPage) -> Step {
        switch phase {
        case .walking:
            return read(page)
        case .rereading(let index):
            let same = pages[index - 1].isSame(as: page)
            joins.append((same, same))
            phase = .walking
            return afterBoundary()
        case .checkingHead:
            if !pages[0].isSame(as: page) {
                for index in joins.indices where joins[index].byReread { joins[index] = (false, false) }
            }
            return finish()
        case .done:
            return finish()
        }
    }

    private mutating func read(_ page: FeedPage) -> Step {
        let request: Request = pages.isEmpty ? .head : .older(pages[pages.count - 1].olderCursor ?? "")
        if pages.isEmpty {
            newerCursor = page.newerCursor
            let perPage = max(1, page.items.count)
            pageLimit = switch window {
            case .items(let count): (max(1, count) / perPage + 1) * 2 + 2
            case .all: (stored.count / perPage + 1) * 2 + 10
            }
        }
        for item in page.items { itemIDs.insert(ExactID(item.id)) }
        pages.append(ReadPage(request: request, items: page.items, keysetOlder: page.olderContinuesAfterLastItem, olderCursor: page.olderCursor))
        if pages.count > 1 {
            let index = pages.count - 1
            if pages[index - 1].keysetOlder || !wouldRemoveAcross(index) {
                joins.append((true, false))
            } else {
                phase = .rereading(index)
                requests += 1
                return .fetch(pages[index - 1].request)
            }
        }
        return afterBoundary()
    }

    /// Whether joining page `index` to the stretch before it could remove a stored item: one
    /// stored between the stretch's lowest item read and the page's first stored one (or anything
    /// below, when the page holds none) that the walk has not read.
    private func wouldRemoveAcross(_ index: Int) -> Bool {
        var start = index - 1
        while start > 0, joins[start - 1].joined { start -= 1 }
        let above = pages[start...(index - 1)].flatMap(\.ids).compactMap { position[ExactID($0)] }.max() ?? (start == 0 ? -1 : nil)
        guard let above else { return false }
        // A page of items not stored, in the run of new ones the head starts with: nothing stored
        // lies above such a page, so none can have slipped past its upper edge.
        guard let below = pages[index].ids.compactMap({ position[ExactID($0)] }).min() else { return above >= 0 }
        guard above + 1 < below else { return false }
        return (above + 1..<below).contains { !itemIDs.contains(ExactID(stored[$0])) }
    }

    /// After a page joined or not: the next page, or the end of the walk.
    private mutating func afterBoundary() -> Step {
        let page = pages[pages.count - 1]
        lowestAnchor = max(lowestAnchor, page.ids.compactMap { position[ExactID($0)] }.max() ?? -1)
        guard let cursor = page.olderCursor else {
            reachedEnd = true
            return finishWalk()
        }
        let covered: Bool = switch window {
        case .items(let count): !stored.isEmpty && lowestAnchor >= min(max(1, count), stored.count - 1)
        case .all: false
        }
        if covered || pages.count >= pageLimit || !cursorsSeen.insert(ExactID(cursor)).inserted {
            return finishWalk()
        }
        requests += 1
        return .fetch(.older(cursor))
    }

    private mutating func finishWalk() -> Step {
        if lowestAnchor < 0 && !reachedEnd {
            phase = .done
            return .abandoned
        }
        if joins.contains(where: \.byReread) {
            phase = .checkingHead
            requests += 1
            return .fetch(.head)
        }
        return finish()
    }

    private mutating func finish() -> Step {
        if lowestAnchor < 0 && !reachedEnd { return .abandoned }
        phase = .done
        var stretches: [[String]] = [pages[0].ids]
        for (index, join) in joins.enumerated() {
            if join.joined {
                stretches[stretches.count - 1] += pages[index + 1].ids
            } else {
                stretches.append(pages[index + 1].ids)
            }
        }
        var known = Set(position.keys)
        var commits: [FeedPage] = []
        for (index, items) in pages.map(\.items).enumerated() {
            var page = items
            if index > 0, let above = pages[index - 1].items.last, !items.isEmpty, !items.contains(where: { known.contains(ExactID($0.id)) }) {
                page.insert(above, at: 0)
            }
            for item in items { known.insert(ExactID(item.id)) }
            commits.append(FeedPage(items: page, olderCursor: nil, newerCursor: index == 0 ? newerCursor : nil))
        }
        return .finished(RevalidationResult(
            pages: commits, stretches: stretches, reachedEnd: reachedEnd, newerCursor: newerCursor, requests: requests))
    }
}
