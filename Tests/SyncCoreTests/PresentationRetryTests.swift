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

    @Test func refreshesCountTheNewItemsUntilTheUserLooks() {
        var h = Harness()
        h.send(.start)
        h.succeed(.initial, page(["9", "8"], older: "8", newer: "9"))
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
