import Foundation
@_spi(StateMachine) import SyncCore
import Testing

/// The first-load error stays on screen while it is retried, and refreshes count new items.
@Suite struct PresentationRetryTests {
    /// Every state the machine passes through while a failed first load is retried
    /// automatically is the error view: never error → skeleton → error.
    @Test func firstLoadErrorDoesNotFlickerOnAutomaticRetries() {
        var h = Harness(configuration: .init(retry: .init(base: .seconds(1), multiplier: 2, cap: .seconds(8)), reconnectSpread: .zero))
        h.send(.start)
        h.fail(.initial, transient)
        var views: [Presentation.Main] = [h.presentation.main]
        for _ in 0..<3 {
            h.advance(10)
            #expect(h.state.initial.load == .loading)
            views.append(h.presentation.main)
            h.fail(.initial, transient)
            views.append(h.presentation.main)
        }
        for view in views {
            guard case .error(let error) = view else {
                Issue.record("the error view gave way to \(view)")
                continue
            }
            #expect(error.message == "service unavailable")
        }
        guard case .error(let retrying) = views[1] else { return }
        #expect(retrying.isRetrying)
        guard case .error(let waiting) = views[2] else { return }
        #expect(!waiting.isRetrying)
        #expect(waiting.nextRetryAt != nil)
        h.advance(20)
        h.succeed(.initial, page(["1"], older: nil, newer: "1"))
        #expect(h.presentation.main == .content(itemCount: 1))
    }

    /// A feed listed oldest first: its first page is the oldest, so the newer walk reads the rest
    /// forward at once, while each page leads to another; that backlog is not "new items".
    @Test func aFeedListedOldestFirstIsReadForwardAfterItsFirstPage() {
        // Revalidation is configured but never runs: this feed's head is its oldest page.
        var configuration = SyncConfiguration(reconnectSpread: .zero, revalidate: .items(10), revalidateInterval: .zero)
        configuration.listsOldestFirst = true
        var h = Harness(configuration: configuration, afterFirstLoad: page(["2", "1"], older: nil, newer: "p2"))
        #expect(h.state.endReached, "nothing is older than the first page")
        #expect(h.fetched.map(\.direction) == [.newer] && h.fetched.first?.cursor == "p2", "the next page at once: \(h.fetched)")
        h.succeed(.newer, page(["4", "3"], older: nil, newer: "p3"))
        #expect(h.fetched.first?.cursor == "p3")
        // The newest page: its own URL is the cursor again, and the walk ends.
        h.succeed(.newer, page(["5"], older: nil, newer: "p3"))
        #expect(h.fetched.isEmpty)
        #expect(h.log.items.map(\.id) == ["5", "4", "3", "2", "1"])
        #expect(h.presentation.newItems == 0, "the backlog read after the first page is not new to the user")
        // A refresh reads the newest page again and goes on while pages lead further.
        h.send(.refresh)
        #expect(h.fetched.first?.cursor == "p3")
        #expect(h.fetched.first?.revalidate == nil)
        h.succeed(.newer, page(["6", "5"], older: nil, newer: "p4"))
        h.succeed(.newer, page(["7"], older: nil, newer: "p4"))
        #expect(h.fetched.isEmpty)
        #expect(h.log.items.map(\.id) == ["7", "6", "5", "4", "3", "2", "1"])
        #expect(h.presentation.newItems == 2)
    }

    @Test func refreshesCountTheNewItemsUntilTheUserLooks() {
        var h = Harness(afterFirstLoad: page(["9", "8"], older: "8", newer: "9"))
        #expect(h.presentation.newItems == 0, "the first load is not 'new items'")
        h.send(.refresh)
        h.succeed(.newer, page(["11", "10"], older: nil, newer: "11"))
        // Pages keep coming while they bring items: the last one is empty.
        if h.inFlight[.newer] != nil { h.succeed(.newer, page([], older: nil, newer: nil)) }
        #expect(h.state.newItems == 2)
        #expect(h.presentation.newItems == 2)
        // An edit (a stored item with other bytes) and a refresh with nothing new add nothing.
        h.send(.refresh)
        var edited = item("11")
        edited.payload = Data(#"{"id":"11","title":"edited"}"#.utf8)
        h.succeed(.newer, FeedPage(items: [edited, item("10")], olderCursor: nil, newerCursor: "11"))
        if h.inFlight[.newer] != nil { h.succeed(.newer, page([], older: nil, newer: nil)) }
        #expect(h.log.items.first?.payload == edited.payload)
        #expect(h.presentation.newItems == 2, "not seen yet: the count stays; an edit is not new")
        h.send(.refresh)
        h.succeed(.newer, page(["12", "11"], older: nil, newer: "12"))
        if h.inFlight[.newer] != nil { h.succeed(.newer, page([], older: nil, newer: nil)) }
        #expect(h.presentation.newItems == 3, "new items of later refreshes add up until the user looks")
        h.send(.seen)
        #expect(h.state.newItems == 0)
        #expect(h.presentation.newItems == 0)
    }
}
