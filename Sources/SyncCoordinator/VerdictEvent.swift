import ConnectivityPolicy
@_spi(StateMachine) import SyncCore

extension FeedEvent {
    /// The machine's connectivity event for a connectivity verdict.
    public init(_ verdict: Verdict) {
        switch verdict {
        case .online(let path):
            self = .online(link: path.link, family: path.family.rawValue, cost: path.cost)
        case .offline(let reason):
            self = .offline(reason)
        case .limited(let limitation):
            self = .limited(limitation.reason, detail: limitation.detail, link: limitation.path?.link, family: limitation.path?.family.rawValue)
        }
    }
}
