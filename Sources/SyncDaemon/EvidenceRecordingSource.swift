import EventLoopClock
import Reachability
import SyncCore

/// A feed source that tells the feed's ``HostReachability`` how its requests went: answered
/// (whatever the status), failed with an answer (which proves the server is there), or failed
/// without one (connect timeouts, host unreachable): the passive evidence for
/// `server-unreachable`, from the requests the feed makes anyway.
struct EvidenceRecordingSource: FeedSource {
    let base: any FeedSource
    let reachability: HostReachability<EventLoopClock>
    /// Named in the evidence: "feed.example: connection timed out".
    let host: String

    func fetchInitial() async throws -> FeedPage { try await recording { try await base.fetchInitial() } }
    func fetchOlder(cursor: String) async throws -> FeedPage { try await recording { try await base.fetchOlder(cursor: cursor) } }
    func fetchNewer(cursor: String) async throws -> FeedPage { try await recording { try await base.fetchNewer(cursor: cursor) } }
    func fetchOlder(cursor: String, olderCursorKnown: @escaping @Sendable (String?) -> Void) async throws -> FeedPage {
        try await recording { try await base.fetchOlder(cursor: cursor, olderCursorKnown: olderCursorKnown) }
    }
    var executor: (any SerialExecutor)? { base.executor }
    var bytesReceived: Int64 { base.bytesReceived }

    private func recording(_ request: () async throws -> FeedPage) async throws -> FeedPage {
        do {
            let page = try await request()
            reachability.requestSucceeded()
            return page
        } catch let error as FeedError {
            if error.serverDidNotAnswer {
                reachability.requestFailed(unanswered: "\(host): \(error.kind == .timeout ? "connection timed out" : "host unreachable")")
            } else {
                switch error.kind {
                // An HTTP answer, a body, a handshake: the server is there.
                case .httpStatus, .malformed, .tooLarge, .tls: reachability.requestFailed(unanswered: nil)
                default: break
                }
            }
            throw error
        }
    }
}
