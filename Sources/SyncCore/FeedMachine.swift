import Foundation

/// The paging state machine of one feed: a pure reducer from events to state and effects.
///
/// It owns every decision (what runs, when, what is paused, how long to back off) and performs
/// none: the coordinator turns its ``FeedEffect``s into requests and timers. Time and randomness
/// come in with each event, so a sequence of events always gives the same result.
///
/// Rules it keeps:
/// - older and newer do not run before a first load succeeded; a later failure never takes loaded
///   content away (it is reported on its own direction);
/// - at most one request per direction is in flight; triggers while one runs coalesce, and
///   automatic triggers while a retry is scheduled wait for it rather than bypass the backoff;
/// - nothing is sent while offline: going offline cancels requests and timers and marks those
///   directions paused without counting a failure; coming back runs them (and newer) after a
///   random spread;
/// - failures back off by ``RetryPolicy``; permanent errors wait for a manual trigger;
/// - backfill ends only where the feed does (no `next`) or where the server repeats a page that
///   added nothing (a cycle of links), which is shown as an older failure, never silent;
/// - an open ``FeedGap`` (a page-numbered feed got more new items than a page) is loaded before
///   anything newer, at most ``SyncConfiguration/gapPageLimit`` pages per trigger; a gap still
///   open after that is shown as a newer failure until a later refresh closes it;
/// - over a metered link, ``SyncConfiguration/onMetered`` and ``SyncConfiguration/meteredBudget``
///   hold automatic loads back (a request in flight finishes); a manual trigger loads once. When
///   the hold lifts (another link, a new day), what it held runs after a random spread.
@_spi(StateMachine) public struct FeedMachine: Sendable {
    /// The feed's identifier.
    public let feed: String
    /// How the feed is synced; changes apply from the next event.
    public var configuration: SyncConfiguration

    private var persisted: PersistedFeed
    private var lanes: [Direction: Lane] = [.initial: Lane(), .older: Lane(), .newer: Lane()]
    private var offline: OfflineBanner?
    private var connectivity: FeedConnectivity?
    /// Bytes received over metered links, as the driver last told (``FeedEvent/meteredUsage(_:)``)
    /// or the store held at start; the driver adds to it.
    public private(set) var meteredUsage: MeteredUsage?
    private var started = false
    /// Set when the server's `next` led back to a page that added nothing, so backfill cannot
    /// spin on a cycle of links.
    private var backfillStalled = false
    /// Items refreshes brought in since the user last looked (``FeedEvent/seen``): inserted by
    /// newer loads and revalidations, never by the first load or backfill, never edits.
    private var newItems = 0
    /// Older cursors whose pages added nothing since the last page that did: meeting one again
    /// is a cycle.
    private var fruitlessCursors: Set<ExactID> = []
    /// Newer pages loaded in a row since the last trigger, which bounds a gap walk.
    private var newerChain = 0
    /// Set at start while the refresh on start has not ended: the backfill resumes only after
    /// it. A positional older cursor (an offset, a page number) kept over a stop points at newer
    /// items once more arrived than it skips; stored first by the refresh, they are then only
    /// read again by the backfill, never stored below older ones.
    private var backfillAwaitsRefresh = false
    /// A refresh was asked for while a newer load ran: another runs when that walk ends.
    private var refreshAgain = false
    /// The newer walk started by the first load of a feed listed oldest first is still under
    /// way: what it brings is the backlog, not new items for the user.
    private var catchingUp = false
    /// When the last revalidation was committed; `nil` before the first of this run (a start
    /// revalidates, so what changed while stopped is found).
    private var lastRevalidation: Date?

    /// Whether a refresh asked for during a newer walk waits for that walk to end.
    public var refreshIsPending: Bool { refreshAgain }
    private var lastToken: UInt64 = 0
    private var effects: [FeedEffect] = []
    private var now = Date(timeIntervalSinceReferenceDate: 0)

    /// Everything the machine tracks for one direction beyond its public ``DirectionState``.
    private struct Lane: Sendable, Hashable {
        var load: LoadState = .idle
        var paused = false
        /// Consecutive failures; a pause does not count, success resets it.
        var attempt = 0
        /// Not before this date, from the server's `Retry-After`.
        var notBefore: Date?
        var running: FetchToken?
        /// The cursor the running request was sent with.
        var cursor: String?
        var timer: FetchToken?
        /// The state to return to when the running request is cancelled by going offline.
        var restore: LoadState = .idle
        /// The last request cancelled by going offline (its commit may still land).
        var cancelled: FetchToken?
        /// Wanted to load but the link's cost held it back (``LoadHold``); it loads once the hold lifts.
        var held = false
        /// The running request (or the walk it continues) was asked for by hand, so the link's
        /// cost does not stop it.
        var manual = false
        /// The running request is a revalidation.
        var revalidating = false

        var isPermanentlyFailed: Bool { load.failure?.error.isPermanent ?? false }
    }

    /// A machine for a feed, starting from what the store holds (its items and cursors, and
    /// the bytes it received over metered links on the last day recorded).
    public init(feed: String, persisted: PersistedFeed, configuration: SyncConfiguration = .default, meteredUsage: MeteredUsage? = nil) {
        self.feed = feed
        self.persisted = persisted
        self.configuration = configuration
        self.meteredUsage = meteredUsage
        if persisted.hasLoaded {
            lanes[.initial]?.load = .loaded
        }
    }

    // MARK: Reading

    /// The state clients see.
    public var state: FeedState {
        FeedState(
            feed: feed,
            initial: publicState(.initial),
            older: publicState(.older),
            newer: publicState(.newer),
            hasLoaded: persisted.hasLoaded,
            endReached: persisted.hasLoaded && persisted.endReached,
            itemCount: persisted.itemCount,
            offline: offline,
            connectivity: connectivity,
            lastSyncAt: persisted.lastSyncAt,
            newItems: newItems,
            gap: persisted.gap,
            meteredUsage: configuration.meteredBudget.map { budget in
                MeteredUsage(day: budget.day(of: now), bytes: meteredUsage?.bytes(at: now, budget: budget) ?? 0)
            }
        )
    }

    /// The stored feed as last reported by the store.
    public var persistedFeed: PersistedFeed { persisted }

    /// Whether `token` is the request in flight for `direction`: only then may its page be committed.
    public func isRunning(_ token: FetchToken, in direction: Direction) -> Bool {
        lane(direction).running == token
    }

    /// The cursor of the older page that committing `page`, the answer to `token` in
    /// `direction`, will start loading at once as backfill; `nil` when no such load would start.
    ///
    /// Lets a driver fetch that page while this one is being committed. The machine still
    /// decides: the driver hands the early answer only to a fetch the machine asks for with the
    /// same cursor, and drops it otherwise.
    public func backfillCursor(afterCommitting page: FeedPage, answering token: FetchToken, in direction: Direction) -> String? {
        guard direction != .newer, lane(direction).running == token,
              let cursor = page.olderCursor, backfillGoesOn(to: cursor, beyond: page.items.count),
              !(lane(direction).cursor ?? "").isExactly(cursor)
        else { return nil }
        if direction == .initial {
            let older = lane(.older)
            guard older.running == nil, older.timer == nil, !older.isPermanentlyFailed else { return nil }
        }
        return cursor
    }

    /// `olderCursor`, the older cursor of a page fetched ahead of the backfill and not yet
    /// committed, when the backfill would go on to load it; `pendingItems` counts the items
    /// fetched but not yet committed, that page's included. `nil` when it would stop there.
    ///
    /// Lets a driver keep fetching ahead while the store commits, so fetches run at the network's
    /// pace and commits at the store's instead of taking turns. As with
    /// ``backfillCursor(afterCommitting:answering:in:)``, the machine still decides what loads.
    public func readAheadCursor(after olderCursor: String?, pendingItems: Int) -> String? {
        guard !lane(.older).isPermanentlyFailed, let olderCursor, backfillGoesOn(to: olderCursor, beyond: pendingItems) else { return nil }
        return olderCursor
    }

    /// Whether backfill would load `cursor` next, with `pendingItems` more items than the store
    /// holds: online, not stalled, short of the depth, and not a cursor known to bring nothing.
    ///
    /// Over a metered link under a byte budget, nothing is fetched ahead: each page's bytes are
    /// counted before the next is asked for, so the budget is not overrun by a read-ahead.
    private func backfillGoesOn(to cursor: String, beyond pendingItems: Int) -> Bool {
        !isOffline && !backfillStalled && persisted.itemCount + pendingItems < configuration.backfillDepth
            && !fruitlessCursors.contains(ExactID(cursor)) && hold(.older) == nil
            && !(configuration.meteredBudget != nil && isOnMeteredLink)
    }

    /// Consecutive failures of `direction`: its spent retry budget. Pauses do not count.
    public func attempts(_ direction: Direction) -> Int {
        lane(direction).attempt
    }

    private func publicState(_ direction: Direction) -> DirectionState {
        let lane = lane(direction)
        return DirectionState(
            load: lane.load, paused: lane.paused, retrying: lane.load.isLoading ? lane.restore.failure : nil,
            held: lane.held && lane.running == nil ? hold(direction) : nil)
    }

    private func lane(_ direction: Direction) -> Lane {
        lanes[direction] ?? Lane()
    }

    private var isOffline: Bool { offline != nil }

    /// Whether the host is reached over a link known to be metered (and the feed not offline).
    public var isOnMeteredLink: Bool {
        if case .online(_, _, let cost)? = connectivity?.status { return cost.isMetered }
        return false
    }

    /// What holds `direction` back now, if anything: the budget spent today, or the policy for
    /// metered links. Nothing holds while offline (the pause says it) or over another link.
    private func hold(_ direction: Direction) -> LoadHold? {
        guard isOnMeteredLink, !isOffline else { return nil }
        if let budget = configuration.meteredBudget {
            let used = meteredUsage?.bytes(at: now, budget: budget) ?? 0
            if used >= budget.bytesPerDay { return .meteredBudget(used: used, budget: budget.bytesPerDay) }
        }
        switch configuration.onMetered {
        case .sync: return nil
        case .newer: return direction == .older ? .meteredLink : nil
        case .pause: return .meteredLink
        }
    }

    // MARK: Events

    /// Applies one event at `now`, drawing jitter from `random`, and returns what to do.
    public mutating func handle<R: RandomSource>(_ event: FeedEvent, now: Date, random: inout R) -> [FeedEffect] {
        self.now = now
        effects = []
        switch event {
        case .start:
            started = true
            if persisted.hasLoaded {
                if configuration.refreshOnStart {
                    backfillAwaitsRefresh = true
                    request(.newer, manual: false)
                    // Not asked for (held, failed for good): nothing to wait for.
                    if lane(.newer).running == nil && !lane(.newer).paused { backfillAwaitsRefresh = false }
                }
                backfill()
            } else {
                request(.initial, manual: false)
            }
        case .refresh:
            if persisted.hasLoaded {
                // A load already under way began before this was asked for: what came since is
                // fetched by another, once it ends.
                if lane(.newer).running != nil { refreshAgain = true }
                request(.newer, manual: true)
            } else {
                started = true
                request(.initial, manual: true)
            }
        case .periodicRefresh:
            if started && persisted.hasLoaded { request(.newer, manual: false) }
        case .seen:
            newItems = 0
        case .loadOlder:
            backfillStalled = false
            fruitlessCursors = []
            request(.older, manual: true)
        case .retry:
            if !persisted.hasLoaded {
                if lane(.initial).load.failure != nil { request(.initial, manual: true) }
            } else {
                for direction in [Direction.older, .newer] where lane(direction).load.failure != nil {
                    request(direction, manual: true)
                }
            }
        case .committed(let direction, let token, let outcome):
            committed(direction, token, outcome)
        case .failed(let direction, let token, let error):
            failed(direction, token, error, random: &random)
        case .serverAskedToWait(let direction, let wait):
            holdBack(direction, until: now.adding(wait))
        case .timerFired(let direction, let token):
            guard lane(direction).timer == token else { break }
            lanes[direction]?.timer = nil
            if canRun(direction) {
                if hold(direction) != nil {
                    holdOff(direction)
                } else {
                    begin(direction)
                }
            } else {
                settle(direction)
            }
        case .online(let link, let family, let cost):
            let since = connectivity?.isOnline == true ? connectivity?.since ?? now : now
            connectivity = FeedConnectivity(.online(link: link, family: family, cost: cost), since: since)
            goOnline(random: &random)
            reconsiderHolds(random: &random)
        case .offline(let reason):
            goOffline(OfflineBanner(since: now, problem: .offline(reason)))
            connectivity = FeedConnectivity(.offline(reason), since: offline?.since ?? now)
        case .limited(let reason, let detail, let link, let family):
            // Limited pauses like offline: requests to a host that cannot answer only spend
            // retries, and the evidence (a resolver, a portal, a probe) says when to resume.
            goOffline(OfflineBanner(since: now, problem: .limited(reason), detail: detail))
            connectivity = FeedConnectivity(.limited(reason, detail: detail, link: link, family: family), since: offline?.since ?? now)
        case .meteredUsage(let usage):
            meteredUsage = usage
            reconsiderHolds(random: &random)
        }
        return effects
    }

    // MARK: Triggers

    private func canRun(_ direction: Direction) -> Bool {
        switch direction {
        case .initial: !persisted.hasLoaded
        case .older: persisted.hasLoaded && !persisted.endReached && persisted.olderCursor != nil
        case .newer: persisted.hasLoaded
        }
    }

    /// Asks for `direction` to load. Manual requests run at once (even a permanent failure, even
    /// before a scheduled retry); automatic ones respect the backoff and permanent errors.
    private mutating func request(_ direction: Direction, manual: Bool) {
        let lane = lane(direction)
        guard lane.running == nil, canRun(direction) else { return }
        if !manual {
            if lane.timer != nil || lane.isPermanentlyFailed { return }
        }
        if isOffline {
            pause(direction)
            return
        }
        if !manual, hold(direction) != nil {
            holdOff(direction)
            return
        }
        begin(direction, manual: manual)
    }

    /// Starts a load. `chained` marks a newer page that follows the one just committed (a
    /// catch-up or gap walk), which counts towards the walk's bound and is as manual as the walk;
    /// anything else starts a new walk.
    private mutating func begin(_ direction: Direction, chained: Bool = false, manual: Bool = false) {
        if direction == .newer && !chained {
            newerChain = 0
            // A new walk covers any refresh asked for before it.
            refreshAgain = false
        }
        // Resumed when the refresh on start ends (``newerWalkEnded()``); by hand, at once.
        if direction == .older && backfillAwaitsRefresh && !manual {
            // No retry is scheduled any more: the state must not show one.
            if var failure = lanes[.older]?.load.failure, failure.nextRetryAt != nil {
                failure.nextRetryAt = nil
                lanes[.older]?.load = .failed(failure)
            }
            return
        }
        // The timer goes, and so does the retry it would have made: `restore`, what the lane
        // shows again if this load is abandoned, must not show one due.
        dropTimer(direction)
        guard var lane = lanes[direction] else { return }
        lane.manual = chained ? lane.manual : manual
        lane.held = false
        lane.restore = lane.load
        let token = nextToken()
        lane.paused = false
        lane.load = .loading
        lane.running = token
        lanes[direction] = lane
        let cursor: String? = switch direction {
        case .initial: nil
        case .older: persisted.olderCursor
        case .newer: persisted.gap?.cursor ?? persisted.newerCursor
        }
        lanes[direction]?.cursor = cursor
        let revalidate = direction == .newer && !chained ? dueRevalidation : nil
        lanes[direction]?.revalidating = revalidate != nil
        effects.append(.fetch(FetchRequest(direction: direction, cursor: cursor, token: token, revalidate: revalidate)))
    }

    /// The window a new refresh revalidates now, if one is configured and due: never with a gap
    /// open (it is loaded first), with nothing stored, or for a feed listed oldest first (whose
    /// first page holds the oldest items, not the newest a walk from the head must start with).
    private var dueRevalidation: RevalidationWindow? {
        guard let window = configuration.revalidate, !configuration.listsOldestFirst, persisted.itemCount > 0, persisted.gap == nil
        else { return nil }
        if let last = lastRevalidation, now < last.adding(configuration.revalidateInterval) { return nil }
        return window
    }

    /// Puts a direction that can no longer run (its timer fired after the feed changed) at rest.
    private mutating func settle(_ direction: Direction) {
        lanes[direction]?.paused = false
        lanes[direction]?.held = false
        lanes[direction]?.load = persisted.hasLoaded ? .loaded : .idle
    }

    /// Stops `direction` waiting on its timer until connectivity returns.
    private mutating func pause(_ direction: Direction) {
        dropTimer(direction)
        lanes[direction]?.paused = true
    }

    /// Keeps a direction that wants to load from loading while the link's cost holds it: its
    /// timer goes (a retry now would only be held again) and it loads when the hold lifts.
    private mutating func holdOff(_ direction: Direction) {
        dropTimer(direction)
        lanes[direction]?.held = true
    }

    /// Cancels `direction`'s timer; a failure it would have retried shows no retry due.
    private mutating func dropTimer(_ direction: Direction) {
        guard var lane = lanes[direction] else { return }
        if let timer = lane.timer {
            effects.append(.cancelTimer(direction, timer))
            lane.timer = nil
        }
        if var failure = lane.load.failure {
            failure.nextRetryAt = nil
            lane.load = .failed(failure)
        }
        lanes[direction] = lane
    }

    /// After the cost, the budget or the day changed: directions waiting on a retry that the cost
    /// now holds are held, and held directions it no longer holds load after a random spread
    /// (a fleet whose budgets renew at midnight does not reach the server in one instant).
    private mutating func reconsiderHolds<R: RandomSource>(random: inout R) {
        guard !isOffline else { return }
        var lifted: [Direction] = []
        for direction in [Direction.initial, .older, .newer] {
            let lane = lane(direction)
            if hold(direction) != nil {
                if lane.timer != nil, lane.running == nil { holdOff(direction) }
            } else if lane.held {
                lanes[direction]?.held = false
                lifted.append(direction)
            }
        }
        for direction in lifted where canRun(direction) && lane(direction).running == nil && lane(direction).timer == nil {
            startAfterSpread(direction, random: &random)
        }
    }

    private mutating func backfill() {
        guard !backfillStalled, persisted.itemCount < configuration.backfillDepth else { return }
        request(.older, manual: false)
    }

    /// A newer walk has ended (caught up, stopped, or failed): a refresh asked for by hand while
    /// it ran goes out now, not after a backoff, and a backfill held for the refresh on start
    /// goes on.
    private mutating func newerWalkEnded() {
        catchingUp = false
        if refreshAgain {
            refreshAgain = false
            request(.newer, manual: true)
        }
        guard backfillAwaitsRefresh else { return }
        backfillAwaitsRefresh = false
        backfill()
    }

    // MARK: Answers

    private mutating func committed(_ direction: Direction, _ token: FetchToken, _ outcome: CommitOutcome) {
        if outcome.feed.revision >= persisted.revision {
            persisted = outcome.feed
        }
        if persisted.hasLoaded, lane(.initial).running == nil, lane(.initial).timer == nil {
            lanes[.initial]?.load = .loaded
            lanes[.initial]?.paused = false
        }
        guard var lane = lanes[direction], lane.running == token else {
            // The request was cancelled (offline) while its page was being committed: the page is
            // stored, so that work is done and need not run again on reconnect.
            if var lane = lanes[direction], lane.cancelled == token, lane.running == nil {
                if let timer = lane.timer { effects.append(.cancelTimer(direction, timer)) }
                lane.timer = nil
                lane.paused = false
                lane.load = .loaded
                lane.attempt = 0
                lane.notBefore = nil
                lanes[direction] = lane
            }
            return
        }
        let requested = lane.cursor
        let walkIsManual = lane.manual
        if lane.revalidating { lastRevalidation = now }
        lane.revalidating = false
        lane.running = nil
        lane.cursor = nil
        lane.load = .loaded
        lane.paused = false
        lane.attempt = 0
        lane.notBefore = nil
        lanes[direction] = lane
        started = true

        switch direction {
        case .newer:
            if !catchingUp { newItems += outcome.inserted }
            newerChain += 1
            if let gap = persisted.gap {
                // Page-numbered feed: keep walking down until the pages meet the stored items.
                if newerChain < configuration.gapPageLimit {
                    continueNewer(manual: walkIsManual)
                } else {
                    let message = "gap not closed: \(gap.items) new items loaded over \(gap.pages) pages without reaching "
                        + "the items stored before; newer items between them may still be missing (a refresh continues)"
                    lanes[.newer]?.load = .failed(LoadFailure(error: FeedError(.other, message), attempt: 1, nextRetryAt: nil))
                }
            } else if configuration.listsOldestFirst {
                // Listed oldest first: each page leads to the next one up until the newest, whose
                // own URL is the cursor again (read again by the next refresh).
                if outcome.pageItemCount > 0, let next = persisted.newerCursor, !(requested.map { next.isExactly($0) } ?? false) {
                    continueNewer(manual: walkIsManual)
                }
            } else if outcome.pageItemCount > 0, outcome.inserted > 0, !outcome.overlapped, persisted.newerCursor != nil {
                // min_id semantics: keep going while pages bring new items; an empty page, or one
                // that reaches stored items, means caught up.
                continueNewer(manual: walkIsManual)
            }
            if lanes[.newer]?.running == nil { newerWalkEnded() }
        case .older:
            if outcome.inserted > 0 {
                fruitlessCursors = []
            } else if let requested {
                fruitlessCursors.insert(ExactID(requested))
            }
            // Only a repeated cursor stops backfill short of the end: an empty page or a page of
            // items already stored (a page shift) still has a `next` worth following.
            if !persisted.endReached, let next = persisted.olderCursor, fruitlessCursors.contains(ExactID(next)) {
                backfillStalled = true
                let message = "backfill stopped: the server's next link leads back to a page that added nothing (\(next))"
                lanes[.older]?.load = .failed(LoadFailure(error: FeedError(.other, message), attempt: 1, nextRetryAt: nil))
            }
        case .initial:
            // Listed oldest first: the first page is the oldest, and the rest are newer.
            if configuration.listsOldestFirst, persisted.newerCursor != nil {
                catchingUp = true
                continueNewer(manual: walkIsManual)
            }
        }
        backfill()
    }

    /// The next page of a newer walk, unless the link's cost now holds a walk not asked for by hand.
    private mutating func continueNewer(manual: Bool) {
        if !manual, hold(.newer) != nil {
            holdOff(.newer)
        } else {
            begin(.newer, chained: true)
        }
    }

    private mutating func failed<R: RandomSource>(_ direction: Direction, _ token: FetchToken, _ error: FeedError, random: inout R) {
        guard var lane = lanes[direction], lane.running == token else { return }
        defer { if direction == .newer { newerWalkEnded() } }
        lane.running = nil
        lane.attempt += 1
        // A wait the server asked for earlier (on a page fetched ahead) still holds.
        let held = lane.notBefore.flatMap { $0 > now ? $0 : nil }
        lane.notBefore = [held, error.retryAfter.map { now.adding($0) }].compactMap { $0 }.max()
        let policy = configuration.retry
        if policy.retriesAutomatically(error, attempt: lane.attempt) {
            let delay = atLeast(policy.delay(afterAttempt: lane.attempt, retryAfter: error.retryAfter, fraction: random.nextFraction()), until: held)
            let timer = nextToken()
            lane.timer = timer
            lane.load = .failed(LoadFailure(error: error, attempt: lane.attempt, nextRetryAt: now.adding(delay)))
            effects.append(.schedule(direction, after: delay, timer))
        } else {
            lane.load = .failed(LoadFailure(error: error, attempt: lane.attempt, nextRetryAt: nil))
        }
        lanes[direction] = lane
    }

    /// Nothing in `direction` before `date`; a retry scheduled sooner moves to it, so the state
    /// shows when the request will really go out.
    private mutating func holdBack(_ direction: Direction, until date: Date) {
        guard var lane = lanes[direction], lane.notBefore.map({ $0 < date }) ?? true else { return }
        lane.notBefore = date
        if let timer = lane.timer, var failure = lane.load.failure, let at = failure.nextRetryAt, at < date {
            effects.append(.cancelTimer(direction, timer))
            let rescheduled = nextToken()
            lane.timer = rescheduled
            failure.nextRetryAt = date
            lane.load = .failed(failure)
            effects.append(.schedule(direction, after: atLeast(.zero, until: date), rescheduled))
        }
        lanes[direction] = lane
    }

    // MARK: Connectivity

    private mutating func goOffline(_ banner: OfflineBanner) {
        if let current = offline {
            offline = banner
            offline?.since = current.since
            return
        }
        offline = banner
        for direction in Direction.allCases {
            guard var lane = lanes[direction] else { continue }
            if let running = lane.running {
                effects.append(.cancelFetch(direction, running))
                lane.running = nil
                lane.cancelled = running
                lane.load = lane.restore
                lane.paused = true
            }
            lanes[direction] = lane
            if lane.timer != nil { pause(direction) }
        }
    }

    private mutating func goOnline<R: RandomSource>(random: inout R) {
        guard isOffline else { return }
        offline = nil
        // Paused directions were asked for (a permanently failed one only by hand), so they run.
        let paused = Set(Direction.allCases.filter { lane($0).paused })
        var wanted = paused
        for direction in Direction.allCases {
            let lane = lane(direction)
            if let failure = lane.load.failure, !failure.error.isPermanent { wanted.insert(direction) }
            lanes[direction]?.paused = false
        }
        if started && !persisted.hasLoaded && !lane(.initial).isPermanentlyFailed { wanted.insert(.initial) }
        // Refetch on reconnect: whatever happened while offline is fetched now.
        if persisted.hasLoaded && !lane(.newer).isPermanentlyFailed { wanted.insert(.newer) }
        if started && !backfillStalled && persisted.itemCount < configuration.backfillDepth { wanted.insert(.older) }

        for direction in [Direction.initial, .older, .newer] where wanted.contains(direction) {
            guard canRun(direction), lane(direction).running == nil, lane(direction).timer == nil else { continue }
            if lane(direction).isPermanentlyFailed && !paused.contains(direction) { continue }
            if hold(direction) != nil {
                holdOff(direction)
                continue
            }
            startAfterSpread(direction, random: &random)
        }
    }

    /// Starts `direction` after a random delay of up to ``SyncConfiguration/reconnectSpread``
    /// (and not before a wait the server asked for), at once when that is zero.
    private mutating func startAfterSpread<R: RandomSource>(_ direction: Direction, random: inout R) {
        let delay = atLeast(random.nextDuration(upTo: configuration.reconnectSpread), until: lane(direction).notBefore)
        if delay <= .zero {
            begin(direction)
        } else {
            let timer = nextToken()
            lanes[direction]?.timer = timer
            if var failure = lane(direction).load.failure {
                failure.nextRetryAt = now.adding(delay)
                lanes[direction]?.load = .failed(failure)
            }
            effects.append(.schedule(direction, after: delay, timer))
        }
    }

    /// `delay`, or longer if `notBefore` (a wait the server asked for) is further away.
    private func atLeast(_ delay: Duration, until notBefore: Date?) -> Duration {
        guard let notBefore, notBefore > now else { return delay }
        return max(delay, .seconds(notBefore.timeIntervalSince(now)))
    }

    private mutating func nextToken() -> FetchToken {
        lastToken += 1
        return FetchToken(lastToken)
    }
}
