import Foundation
@_spi(StateMachine) import SyncCore
import Testing

@Suite struct PresentationTests {
    let date = Date(timeIntervalSinceReferenceDate: 5000)
    let banner = OfflineBanner(since: Date(timeIntervalSinceReferenceDate: 4000), problem: .offline(.noCarrier))

    func loaded(items: Int = 3, end: Bool = false) -> FeedState {
        FeedState(feed: "f", initial: .init(load: .loaded), hasLoaded: true, endReached: end, itemCount: items)
    }

    @Test func idleOrLoadingFirstLoadIsASkeleton() {
        #expect(Presentation(state: FeedState(feed: "f")).main == .skeleton(rows: 8))
        let loading = FeedState(feed: "f", initial: .init(load: .loading))
        #expect(Presentation(state: loading, skeletonRows: 3).main == .skeleton(rows: 3))
        let p = Presentation(state: loading)
        #expect(p.olderFooter == nil && p.newerNotice == nil && p.offlineBanner == nil && !p.isRefreshing)
    }

    @Test func pausedFirstLoadIsASkeletonUnderTheOfflineBanner() {
        let state = FeedState(feed: "f", initial: .init(load: .idle, paused: true), offline: banner)
        let p = Presentation(state: state)
        #expect(p.main == .skeleton(rows: 8))
        #expect(p.offlineBanner == banner)
    }

    @Test func failedFirstLoadIsAFullScreenError() {
        let failure = LoadFailure(error: transient, attempt: 2, nextRetryAt: date)
        let p = Presentation(state: FeedState(feed: "f", initial: .init(load: .failed(failure))))
        #expect(p.main == .error(.init(message: "service unavailable", isPermanent: false, nextRetryAt: date, attempt: 2)))
        let permanent = Presentation(state: FeedState(feed: "f", initial: .init(load: .failed(LoadFailure(error: notFound, attempt: 1, nextRetryAt: nil)))))
        #expect(permanent.main == .error(.init(message: "not found", isPermanent: true, nextRetryAt: nil, attempt: 1)))
    }

    @Test func loadedFeedShowsContentOrEmpty() {
        #expect(Presentation(state: loaded()).main == .content(itemCount: 3))
        let empty = Presentation(state: loaded(items: 0, end: true))
        #expect(empty.main == .empty)
        #expect(empty.olderFooter == nil, "nothing below an empty view")
        #expect(Presentation(state: loaded()).olderFooter == nil, "idle older: no footer until asked")
    }

    @Test func olderFooterFollowsTheOlderDirection() {
        var state = loaded()
        state.older = .init(load: .loading)
        #expect(Presentation(state: state).olderFooter == .spinner)
        state.older = .init(load: .failed(LoadFailure(error: timeout, attempt: 1, nextRetryAt: date)))
        #expect(Presentation(state: state).olderFooter == .error(message: "timed out", nextRetryAt: date))
        #expect(Presentation(state: state).main == .content(itemCount: 3), "an older failure keeps the content")
        state.older = .init(load: .idle, paused: true)
        #expect(Presentation(state: state).olderFooter == .paused)
        state.older = .init(load: .failed(LoadFailure(error: timeout, attempt: 1, nextRetryAt: nil)), paused: true)
        #expect(Presentation(state: state).olderFooter == .paused, "waiting for the network, not for the user")
        state.older = .init(load: .loaded)
        state.endReached = true
        #expect(Presentation(state: state).olderFooter == .end)
    }

    @Test func newerFailureIsATransientNoticeOverContent() {
        var state = loaded()
        state.newer = .init(load: .loading)
        #expect(Presentation(state: state).isRefreshing)
        #expect(Presentation(state: state).newerNotice == nil)
        state.newer = .init(load: .failed(LoadFailure(error: transient, attempt: 4, nextRetryAt: date)))
        let p = Presentation(state: state)
        #expect(p.newerNotice == .init(message: "service unavailable", attempt: 4, nextRetryAt: date))
        #expect(p.main == .content(itemCount: 3))
        #expect(!p.isRefreshing)
    }

    @Test func offlineBannerOverlaysContent() {
        var state = loaded()
        state.offline = banner
        state.newer = .init(load: .loaded, paused: true)
        let p = Presentation(state: state)
        #expect(p.main == .content(itemCount: 3))
        #expect(p.offlineBanner == banner)
    }
}
