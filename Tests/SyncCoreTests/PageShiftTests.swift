import Foundation
@_spi(StateMachine) import SyncCore
import Testing

/// Page-numbered feeds (GitHub) and page shifts: where new items go, gaps, and backfill that
/// goes on through pages that add nothing.
@Suite struct PageShiftTests {
    let date = Date(timeIntervalSinceReferenceDate: 100)

    /// A page of a page-numbered feed: its `next` link is also its continuation.
    func paged(_ ids: [String], next: String?, newer: String? = nil) -> FeedPage {
        FeedPage(items: ids.map(item), olderCursor: next, newerCursor: newer, continuation: next)
    }

    @Test func newItemsOnAnOlderPageGoAboveTheStoredItemsAfterThem() {
        var log = FeedLog()
        log.commit(page(["10", "9", "8"], older: "p2", newer: "p1"), direction: .initial, at: date)
        // Three items arrived: page 2 now starts with two of them, then stored ones, then older.
        let outcome = log.commit(page(["12", "11", "10", "9", "8", "7"], older: "p3", newer: nil), direction: .older, at: date)
        #expect(outcome.inserted == 3 && outcome.overlapped)
        #expect(log.items.map(\.id) == ["12", "11", "10", "9", "8", "7"])
        // New items between stored ones keep their place too.
        log.commit(page(["9", "8.5", "8"], older: "p3", newer: nil), direction: .older, at: date)
        #expect(log.items.map(\.id) == ["12", "11", "10", "9", "8.5", "8", "7"])
    }

    /// Against a plain byte comparison, on pairs that differ only late, in length, or not at all.
    @Test func exactComparisonIsByteEquality() {
        let ids = ["", "a", "0000099901", "0000099902", "00000999010", "caf\u{E9}", "cafe\u{301}", "👩‍💻", String(repeating: "x", count: 300)]
        for a in ids {
            for b in ids {
                let bytesEqual = Array(a.utf8) == Array(b.utf8)
                #expect(a.isExactly(b) == bytesEqual, "\(Array(a.utf8)) vs \(Array(b.utf8))")
                #expect((ExactID(a) == ExactID(b)) == bytesEqual)
                if bytesEqual { #expect(ExactID(a).hashValue == ExactID(b).hashValue) }
            }
        }
        // A string built from a substring (its own storage) against the original.
        let long = "prefix-0000099901-suffix"
        let middle = String(long.dropFirst(7).dropLast(7))
        #expect(middle.isExactly("0000099901"))
    }

    @Test func idsCompareAsBytesNotAsCanonicallyEquivalentText() {
        let nfc = "caf\u{E9}", nfd = "cafe\u{301}"
        #expect(nfc == nfd, "Swift's String == is canonical equivalence: the reason for ExactID")
        #expect(ExactID(nfc) != ExactID(nfd))
        var log = FeedLog()
        let outcome = log.commit(page([nfc, nfd], older: nil, newer: "n"), direction: .initial, at: date)
        #expect(outcome.inserted == 2)
        #expect(log.items.map { Array($0.id.utf8) } == [Array(nfc.utf8), Array(nfd.utf8)])
        #expect(item(nfc) != item(nfd))
    }

    @Test func aRefreshWithMoreThanAPageOfNewItemsOpensAGapThatClosesWhereItMeetsTheStoredItems() {
        var log = FeedLog()
        log.commit(paged(["5", "4"], next: "p2", newer: "p1"), direction: .initial, at: date)
        // 6 new items at 2 per page: page 1 shares nothing with the store.
        var outcome = log.commit(paged(["11", "10"], next: "p2"), direction: .newer, at: date)
        #expect(!outcome.overlapped && log.feed.gap == FeedGap(cursor: "p2", pages: 1, items: 2))
        #expect(log.feed.newerCursor == "p1", "a page feed's newer cursor stays page 1")
        outcome = log.commit(paged(["9", "8"], next: "p3"), direction: .newer, at: date)
        #expect(log.feed.gap == FeedGap(cursor: "p3", pages: 2, items: 4))
        #expect(log.items.map(\.id) == ["11", "10", "9", "8", "5", "4"])
        outcome = log.commit(paged(["7", "6", "5"], next: "p4"), direction: .newer, at: date)
        #expect(outcome.overlapped && log.feed.gap == nil)
        #expect(log.items.map(\.id) == ["11", "10", "9", "8", "7", "6", "5", "4"])
        #expect(log.feed.olderCursor == "p2", "gap pages never move the older cursor")
    }

    @Test func aGapPageShiftedByNewArrivalsDoesNotCloseTheGap() {
        var log = FeedLog()
        log.commit(paged(["5", "4"], next: "p2", newer: "p1"), direction: .initial, at: date)
        log.commit(paged(["11", "10"], next: "p2"), direction: .newer, at: date)
        // Two more arrived: page 2 is now what page 1 was. It meets the gap's own items only.
        log.commit(paged(["11", "10"], next: "p3"), direction: .newer, at: date)
        #expect(log.feed.gap?.cursor == "p3")
        log.commit(paged(["9", "8"], next: "p4"), direction: .newer, at: date)
        log.commit(paged(["7", "6"], next: "p5"), direction: .newer, at: date)
        log.commit(paged(["5", "4"], next: "p6"), direction: .newer, at: date)
        #expect(log.feed.gap == nil)
        #expect(log.items.map(\.id) == ["11", "10", "9", "8", "7", "6", "5", "4"])
    }

    @Test func cursorFeedsNeverOpenAGap() {
        var log = FeedLog()
        log.commit(page(["5", "4"], older: "4", newer: "5"), direction: .initial, at: date)
        log.commit(page(["7", "6"], older: "6", newer: "7"), direction: .newer, at: date)
        #expect(log.feed.gap == nil)
    }

    // MARK: The machine

    @Test func backfillGoesOnThroughPagesThatAddNothingAndEmptyPagesWithANext() {
        var h = Harness(configuration: .init(reconnectSpread: .zero, backfillDepth: 100), afterFirstLoad: page(["9", "8"], older: "p2", newer: "p1"))
        #expect(h.fetched.map(\.cursor) == ["p2"])
        // A page shift: page 2 holds only items stored already, and next moved on.
        h.succeed(.older, page(["9", "8"], older: "p3", newer: nil))
        #expect(h.fetched.map(\.cursor) == ["p3"])
        h.succeed(.older, page([], older: "p4", newer: nil))
        #expect(h.fetched.map(\.cursor) == ["p4"], "an empty page with a next is followed")
        h.succeed(.older, page(["7"], older: nil, newer: nil))
        #expect(h.fetched.isEmpty && h.state.endReached)
        #expect(h.state.older.load == .loaded)
    }

    @Test func aCycleOfNextLinksThatAddNothingStopsBackfillVisibly() {
        var h = Harness(configuration: .init(reconnectSpread: .zero, backfillDepth: 100), afterFirstLoad: page(["9", "8"], older: "a", newer: "p1"))
        h.succeed(.older, page(["8"], older: "b", newer: nil))
        #expect(h.fetched.map(\.cursor) == ["b"])
        h.succeed(.older, page(["9"], older: "a", newer: nil))
        #expect(h.fetched.isEmpty, "a, b, a: a cycle")
        #expect(!h.state.endReached)
        let failure = h.state.older.load.failure
        #expect(failure?.error.message.contains("backfill stopped") == true)
        #expect(h.presentation.olderFooter == .error(message: failure?.error.message ?? "", nextRetryAt: nil))
    }

    @Test func aRefreshWalksTheGapUntilItClosesAndShowsAGapItCouldNotClose() {
        var h = Harness(configuration: .init(reconnectSpread: .zero, gapPageLimit: 3), afterFirstLoad: paged(["5", "4"], next: "p2", newer: "p1"))
        h.send(.refresh)
        #expect(h.fetched.map(\.cursor) == ["p1"])
        h.succeed(.newer, paged(["17", "16"], next: "p2"))
        #expect(h.fetched.map(\.cursor) == ["p2"], "the gap is loaded next")
        h.succeed(.newer, paged(["15", "14"], next: "p3"))
        #expect(h.fetched.map(\.cursor) == ["p3"])
        h.succeed(.newer, paged(["13", "12"], next: "p4"))
        #expect(h.fetched.isEmpty, "three pages: the limit of one refresh")
        #expect(h.state.gap == FeedGap(cursor: "p4", pages: 3, items: 6))
        #expect(h.state.newer.load.failure?.error.message.contains("gap not closed") == true)
        #expect(h.presentation.newerNotice != nil, "visible, never silent")
        // The next refresh goes on from the gap, not from page 1.
        h.send(.refresh)
        #expect(h.fetched.map(\.cursor) == ["p4"])
        h.succeed(.newer, paged(["11", "10", "9"], next: "p5"))
        h.succeed(.newer, paged(["8", "7", "6", "5"], next: "p6"))
        #expect(h.fetched.isEmpty && h.state.gap == nil)
        #expect(h.state.newer.load == .loaded)
        #expect(h.log.items.map(\.id) == (4...17).reversed().map(String.init))
    }

    @Test func aGapWalkResumedAfterReconnectGetsAFullBound() {
        var h = Harness(configuration: .init(reconnectSpread: .zero, gapPageLimit: 2), afterFirstLoad: paged(["5", "4"], next: "p2", newer: "p1"))
        h.send(.refresh)
        h.succeed(.newer, paged(["13", "12"], next: "p2"))
        #expect(h.fetched.map(\.cursor) == ["p2"])
        h.send(.offline(.noCarrier))
        h.send(.online())
        #expect(h.fetched.map(\.cursor) == ["p2"], "reconnect goes on with the gap")
        h.succeed(.newer, paged(["11", "10"], next: "p3"))
        #expect(h.fetched.map(\.cursor) == ["p3"], "a new walk: its own two pages")
        h.succeed(.newer, paged(["9", "8"], next: "p4"))
        #expect(h.fetched.isEmpty && h.state.newer.load.failure != nil)
    }

    @Test func aPageFeedRefreshThatMeetsStoredItemsStopsAfterOnePage() {
        var h = Harness(configuration: .init(reconnectSpread: .zero), afterFirstLoad: paged(["5", "4"], next: "p2", newer: "p1"))
        h.send(.refresh)
        h.succeed(.newer, paged(["6", "5"], next: "p2"))
        #expect(h.fetched.isEmpty)
        #expect(h.log.items.map(\.id) == ["6", "5", "4"])
    }
}
