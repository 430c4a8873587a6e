import Foundation

/// What a UI shows for a feed: exactly one main view plus overlays, derived purely from
/// ``FeedState``. GUI and terminal clients render from this and nothing else, so they agree.
///
/// The first load decides the screen: until it succeeds, only a skeleton or a full-screen error.
/// After it, content (or the empty view) stays, and later failures appear only as overlays.
public struct Presentation: Sendable, Hashable {
    /// The one view filling the screen.
    public enum Main: Sendable, Hashable {
        /// Placeholder rows shaped like content, while the first load runs or waits.
        case skeleton(rows: Int)
        /// The stored items.
        case content(itemCount: Int)
        /// Loaded, and the feed has no items.
        case empty
        /// The first load failed: a full-screen error with a retry button.
        case error(ErrorView)
    }

    /// A full-screen error.
    public struct ErrorView: Sendable, Hashable {
        /// What went wrong, in words.
        public var message: String
        /// The failure is permanent (a retry is possible but only by hand).
        public var isPermanent: Bool
        /// When it is retried automatically; `nil` when not (permanent, budget spent, offline).
        public var nextRetryAt: Date?
        /// Consecutive failures so far (1 after the first).
        public var attempt: Int
        /// The automatic (or requested) retry is running now; the error stays on screen
        /// until it succeeds or fails again.
        public var isRetrying: Bool

        /// An error view.
        public init(message: String, isPermanent: Bool, nextRetryAt: Date?, attempt: Int, isRetrying: Bool = false) {
            self.message = message
            self.isPermanent = isPermanent
            self.nextRetryAt = nextRetryAt
            self.attempt = attempt
            self.isRetrying = isRetrying
        }
    }

    /// The footer below the content, where older pages load.
    public enum Footer: Sendable, Hashable {
        /// Older items are loading.
        case spinner
        /// An inline error with a retry button, where the spinner was.
        case error(message: String, nextRetryAt: Date?)
        /// Waiting for connectivity to load more.
        case paused
        /// The end of the feed.
        case end
    }

    /// A transient notice above the content (a snackbar) for a failed refresh.
    public struct Notice: Sendable, Hashable {
        /// What went wrong with the refresh, in words.
        public var message: String
        /// Identifies this failure so a client shows each one once (it counts per streak).
        public var attempt: Int
        /// When the refresh is retried automatically; `nil` when not.
        public var nextRetryAt: Date?

        /// A notice for the `attempt`-th failed refresh.
        public init(message: String, attempt: Int, nextRetryAt: Date?) {
            self.message = message
            self.attempt = attempt
            self.nextRetryAt = nextRetryAt
        }
    }

    /// What fills the screen: skeleton, content, empty view or error.
    public var main: Main
    /// Shown over whatever main view while offline.
    public var offlineBanner: OfflineBanner?
    /// `nil` when there is nothing to show below the content (idle, or no content).
    public var olderFooter: Footer?
    /// A failed newer load.
    public var newerNotice: Notice?
    /// Items refreshes brought in since the user last looked, for a "↑ N new items" notice
    /// (0: none); marking the feed seen clears it.
    public var newItems: Int
    /// A newer load runs (a pull-to-refresh indicator).
    public var isRefreshing: Bool

    /// The default number of skeleton rows: about one screen of a timeline.
    public static let defaultSkeletonRows = 8

    /// What a client shows for `state`; `skeletonRows` placeholder rows while nothing is stored.
    public init(state: FeedState, skeletonRows: Int = Presentation.defaultSkeletonRows) {
        offlineBanner = state.offline
        guard state.hasLoaded else {
            // A retry of a failed first load keeps the error on screen: error → skeleton →
            // error on every attempt would flicker.
            if let failure = state.initial.load.failure ?? state.initial.retrying {
                main = .error(ErrorView(
                    message: failure.error.message,
                    isPermanent: failure.error.isPermanent,
                    nextRetryAt: failure.nextRetryAt,
                    attempt: failure.attempt,
                    isRetrying: state.initial.load.isLoading
                ))
            } else {
                main = .skeleton(rows: max(0, skeletonRows))
            }
            olderFooter = nil
            newerNotice = nil
            newItems = 0
            isRefreshing = false
            return
        }
        main = state.itemCount == 0 ? .empty : .content(itemCount: state.itemCount)
        isRefreshing = state.newer.load.isLoading
        newerNotice = state.newer.load.failure.map {
            Notice(message: $0.error.message, attempt: $0.attempt, nextRetryAt: $0.nextRetryAt)
        }
        newItems = state.newItems
        olderFooter = state.itemCount == 0 ? nil : Self.footer(for: state)
    }

    private static func footer(for state: FeedState) -> Footer? {
        let older = state.older
        if older.load.isLoading { return .spinner }
        if older.paused { return .paused }
        if let failure = older.load.failure { return .error(message: failure.error.message, nextRetryAt: failure.nextRetryAt) }
        if state.endReached { return .end }
        return nil
    }
}
