import ConnectivityPolicy
@_spi(StateMachine) import SyncCore

extension FeedEvent {
    /// The machine's connectivity event for a connectivity verdict.
    public init(_ verdict: Verdict) {
        switch verdict {
        case .online(let path):
            self = .online(link: path.link, family: path.family.rawValue, cost: path.cost)
        case .offline(let reason):
            self = .offline(code: reason.rawValue, reason: reason.description)
        case .limited(let limitation):
            self = .limited(
                code: limitation.reason.rawValue, reason: limitation.reason.description, detail: limitation.detail,
                link: limitation.path?.link, family: limitation.path?.family.rawValue
            )
        }
    }
}
