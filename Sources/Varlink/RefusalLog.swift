/// Decides which refused connections are logged: one line per user per interval, carrying the
/// count refused since the last line, so a client that reconnects in a loop cannot flood the
/// journal (and use up journald's rate limit for syncd's real messages).
struct RefusalLog: Sendable {
    /// The least time between two lines about one user.
    let interval: Duration
    /// Per user: when a line was last written, and the refusals not logged since.
    private var users: [UInt32: (at: ContinuousClock.Instant, unlogged: Int)] = [:]

    init(interval: Duration) {
        self.interval = interval
    }

    /// A refusal of `uid` at `now`: `nil` when a line about the user was written within the
    /// interval (the refusal is counted for the next line), else the refusals not logged
    /// before this one, for the line to be written now.
    mutating func refused(_ uid: UInt32, at now: ContinuousClock.Instant) -> Int? {
        if let last = users[uid], now - last.at < interval {
            users[uid]!.unlogged += 1
            return nil
        }
        let unlogged = users[uid]?.unlogged ?? 0
        // Users not refused for an interval are forgotten, so the table stays as small as the
        // set of users being refused now.
        users = users.filter { now - $0.value.at < interval }
        users[uid] = (now, 0)
        return unlogged
    }
}
