import SyncControl
/// One word for a feed's overall condition, and the colour of its dot.
public enum FeedCondition: String, Sendable, Hashable {
    /// failed: the first load failed; paused: waiting for connectivity (or for a metered link's cost to lift); loading: a load runs; degraded: an older or newer load failed; empty: loaded, no items; synced: loaded; idle: not loaded yet.
    case failed, paused, loading, degraded, empty, synced, idle

    /// Decided in this order: host unreachable (paused), first load failed, a load paused, loading, another load failed (degraded), empty, loaded (synced), else idle.
    public init(_ feed: ControlFeed) {
        let directions = [feed.initial, feed.older, feed.newer]
        if let connectivity = feed.connectivity, !connectivity.isOnline {
            // Its host is unreachable (offline or limited): nothing will load, whether or not a
            // load was waiting.
            self = .paused
        } else if feed.initial.phase == .failed && !feed.initial.paused {
            self = .failed
        } else if directions.contains(where: \.paused) || [feed.initial, feed.newer].contains(where: { $0.held != nil }) {
            // Held older pages alone leave the feed current (on_metered = "newer"); a held first
            // load or refresh does not.
            self = .paused
        } else if directions.contains(where: { $0.phase == .loading }) {
            self = .loading
        } else if directions.contains(where: { $0.phase == .failed }) {
            self = .degraded
        } else if feed.empty {
            self = .empty
        } else if feed.initial.phase == .loaded {
            self = .synced
        } else {
            self = .idle
        }
    }

    /// Red for failures (bright for a failed first load), yellow while paused or loading, green when synced or empty, grey when idle.
    public var dotColor: ANSI {
        switch self {
        case .failed: .brightRed
        case .degraded: .red
        case .paused, .loading: .yellow
        case .synced, .empty: .green
        case .idle: .grey
        }
    }
}
