import ConnectivityPolicy
import Foundation
@_spi(StateMachine) import SyncCore
import Testing

/// A newest-first server with integer ids 1...newest and Mastodon-like cursors (the id itself).
private struct SimServer {
    var newest: Int
    let pageSize: Int

    func page(_ ids: [Int]) -> FeedPage {
        let sorted = ids.sorted(by: >)
        return FeedPage(
            items: sorted.map { item(String($0)) },
            olderCursor: sorted.last.flatMap { $0 > 1 ? String($0) : nil },
            newerCursor: sorted.first.map { String($0) }
        )
    }

    func answer(_ request: FetchRequest) -> FeedPage {
        switch (request.direction, request.cursor.flatMap(Int.init)) {
        case (.older, let cursor?):
            return page(Array(max(1, cursor - pageSize)..<cursor))
        case (.newer, let cursor?):
            // min_id: the items immediately above the cursor.
            guard cursor < newest else { return page([]) }
            return page(Array((cursor + 1)...min(newest, cursor + pageSize)))
        default:
            guard newest > 0 else { return page([]) }
            return page(Array(max(1, newest - pageSize + 1)...newest))
        }
    }
}

/// Random sequences of responses, failures, connectivity changes, triggers and time never break
/// the machine's invariants.
@Suite struct FeedMachinePropertyTests {
    static let errors: [FeedError] = [
        transient, timeout, notFound,
        FeedError(.httpStatus(429), "rate limited", retryAfter: .seconds(45)),
        FeedError(.httpStatus(503), "maintenance", retryAfter: .seconds(500)),
        FeedError(.transport, "connection reset"),
    ]

    @Test(arguments: 0..<300)
    func randomEventSequencesKeepTheInvariants(seed: Int) throws {
        var rng = SeededRandomSource(seed: UInt64(seed) &* 7919)
        let policy = RetryPolicy(
            base: .seconds(1), multiplier: 1.6, cap: .seconds(120),
            maxAutomaticAttempts: rng.next() % 2 == 0 ? nil : 3
        )
        let utc = TimeZone(identifier: "UTC")!
        let configuration = SyncConfiguration(
            retry: policy,
            reconnectSpread: rng.next() % 2 == 0 ? .zero : .seconds(1),
            backfillDepth: [0, 10, 50][Int(rng.next() % 3)],
            onMetered: MeteredPolicy.allCases[Int(rng.next() % 3)],
            meteredBudget: rng.next() % 2 == 0 ? nil : MeteredBudget(bytesPerDay: 1000, timeZone: utc)
        )
        var h = Harness(configuration: configuration, random: SeededRandomSource(seed: UInt64(seed)))
        var server = SimServer(newest: Int(rng.next() % 3) == 0 ? 0 : Int(rng.next() % 40) + 1, pageSize: 3)
        var offline = false
        var cancelled: [(Direction, FetchToken)] = []
        var everLoaded = false
        var lastCount = 0
        // Directions a manual trigger asked for since their last answer: only those may run again
        // after a permanent error.
        var manual: Set<Direction> = []
        // When each direction may run again by the server's word (Retry-After), kept from the
        // events sent: a failure's wait or one asked for on a page fetched ahead, until a success.
        var serverWait: [Direction: Date] = [:]
        // The link's cost and the bytes used today, as the events sent say.
        var metered = false
        var used: Int64 = 0

        for step in 0..<150 {
            let before = h.state
            let attemptsBefore = Direction.allCases.map { h.machine.attempts($0) }
            let event: FeedEvent
            switch rng.next() % 15 {
            case 0: event = .start
            case 1: event = .refresh
            case 2: event = .periodicRefresh
            case 3: event = .loadOlder
            case 4: event = .retry
            case 5, 6:
                guard let request = h.inFlight.values.randomElement(using: &rng) else { continue }
                h.inFlight[request.direction] = nil
                let outcome = h.log.commit(server.answer(request), direction: request.direction, at: h.now)
                event = .committed(request.direction, request.token, outcome)
            case 7:
                guard let request = h.inFlight.values.randomElement(using: &rng) else { continue }
                h.inFlight[request.direction] = nil
                event = .failed(request.direction, request.token, Self.errors.randomElement(using: &rng)!)
            case 8:
                // A late answer to a cancelled request: must change nothing.
                guard let (direction, token) = cancelled.randomElement(using: &rng) else { continue }
                let stateBefore = h.state
                let produced = h.send(.failed(direction, token, transient))
                #expect(produced.isEmpty && h.state == stateBefore, "seed \(seed) step \(step): stale answer changed the feed")
                continue
            case 9:
                offline = true
                event = .offline(.noCarrier)
            case 10:
                offline = false
                metered = rng.next() % 2 == 0
                event = .online(link: "l", family: "ipv4", cost: metered ? LinkCostAssessment(.metered, source: .configuration) : .unknown)
            case 13:
                used = Int64(rng.next() % 1500)
                event = .meteredUsage(MeteredUsage(day: MeteredBudget(bytesPerDay: 1, timeZone: utc).day(of: h.now), bytes: used))
            case 12:
                event = .serverAskedToWait([Direction.older, .newer].randomElement(using: &rng)!, .seconds(Double(rng.next() % 600)))
            case 11:
                h.advance(Double(rng.next() % 200) / 4)
                try check(h, offline: offline, manual: manual, seed: seed, step: step)
                continue
            default:
                server.newest += Int(rng.next() % 4)
                continue
            }

            switch event {
            case .refresh: manual.insert(h.state.hasLoaded ? .newer : .initial)
            case .loadOlder: manual.insert(.older)
            case .retry: manual.formUnion(Direction.allCases)
            case .committed(let direction, _, _), .failed(let direction, _, _): manual.remove(direction)
            default: break
            }
            let inFlightBefore = h.inFlight
            let waitBefore = serverWait
            func serverAsks(_ direction: Direction, _ wait: Duration) {
                serverWait[direction] = max(serverWait[direction] ?? h.now, h.now.addingTimeInterval(wait / .seconds(1)))
            }
            switch event {
            case .failed(let direction, _, let error):
                if let wait = error.retryAfter { serverAsks(direction, wait) }
            case .serverAskedToWait(let direction, let wait):
                serverAsks(direction, wait)
            case .committed(let direction, _, _):
                serverWait[direction] = nil
            default:
                break
            }
            let pendingBefore = h.machine.refreshIsPending
            let produced = h.send(event)
            let context = "seed \(seed) step \(step) \(event)"
            // A refresh asked for during a newer walk runs when that walk ends: asked for by hand.
            if pendingBefore, !h.machine.refreshIsPending, produced.contains(where: { if case .fetch(let request) = $0 { request.direction == .newer } else { false } }) {
                manual.insert(.newer)
            }
            // What the link's cost holds back, by the test's own account of the events.
            // (The run's 150 steps stay within one day: the usage sent is today's throughout.)
            let budgetSpent = metered && configuration.meteredBudget.map { used >= $0.bytesPerDay } == true
            var automatic = false
            switch event {
            case .start, .periodicRefresh, .online, .meteredUsage: automatic = true
            case .committed(.older, _, _): automatic = true
            default: break
            }
            if automatic && metered && !offline {
                for case .fetch(let request) in produced {
                    let held = budgetSpent || configuration.onMetered == .pause || (configuration.onMetered == .newer && request.direction == .older)
                    #expect(!held, "\(context): \(request.direction) sent by itself while the link's cost holds it")
                }
            }

            for effect in produced {
                switch effect {
                case .fetch(let request):
                    #expect(!offline, "\(context): request sent while offline")
                    #expect(inFlightBefore[request.direction] == nil || produced.contains(.cancelFetch(request.direction, inFlightBefore[request.direction]!.token)),
                            "\(context): second \(request.direction) request in flight")
                    if request.direction != .initial {
                        #expect(h.state.hasLoaded, "\(context): \(request.direction) before the first load")
                    }
                    if request.direction == .older {
                        #expect(request.cursor != nil && request.cursor == h.machine.persistedFeed.olderCursor, "\(context): older after the end")
                    }
                case .cancelFetch(let direction, let token):
                    cancelled.append((direction, token))
                case .schedule(let direction, let delay, _):
                    var ceiling = policy.cap
                    // A wait the server asked for and that has not run out is a floor for a
                    // retry scheduled by a failure or by the ask itself, and may exceed the cap.
                    if let until = serverWait[direction], until > h.now {
                        let remaining = Duration.seconds(until.timeIntervalSince(h.now))
                        switch event {
                        case .failed(direction, _, _), .serverAskedToWait(direction, _):
                            #expect(delay >= remaining - .milliseconds(1), "\(context): \(direction) retried before the server's wait ran out")
                        default:
                            break
                        }
                        ceiling = max(ceiling, remaining)
                    }
                    if let until = waitBefore[direction], until > h.now { ceiling = max(ceiling, .seconds(until.timeIntervalSince(h.now))) }
                    if case .failed(_, _, let error) = event, let floor = error.retryAfter {
                        #expect(delay >= floor, "\(context): below Retry-After")
                        ceiling = max(ceiling, floor)
                    }
                    for direction in Direction.allCases {
                        if let floor = before[direction].load.failure?.error.retryAfter { ceiling = max(ceiling, floor) }
                    }
                    #expect(delay >= .zero && delay <= ceiling, "\(context): delay \(delay) outside 0...\(ceiling)")
                case .cancelTimer:
                    break
                }
            }

            switch event {
            case .online, .offline:
                #expect(Direction.allCases.map { h.machine.attempts($0) } == attemptsBefore,
                        "\(context): a pause changed the retry budget")
            case .failed(let direction, _, let error) where error.isPermanent:
                #expect(h.state[direction].load.failure?.nextRetryAt == nil, "\(context): permanent error scheduled")
                #expect(h.timers[direction] == nil)
            default:
                break
            }

            if h.state.hasLoaded { everLoaded = true }
            #expect(h.state.hasLoaded == everLoaded, "\(context): the first load was forgotten")
            #expect(h.state.itemCount >= lastCount, "\(context): items went away")
            lastCount = h.state.itemCount
            try check(h, offline: offline, manual: manual, seed: seed, step: step)
        }

        // Online over a link of no known cost, answer everything, and let time pass: the feed
        // catches up with no gap, whatever the cost held back before.
        h.send(.online())
        server.newest += 1
        for _ in 0..<500 {
            if let request = h.inFlight.values.first {
                h.inFlight[request.direction] = nil
                let outcome = h.log.commit(server.answer(request), direction: request.direction, at: h.now)
                h.send(.committed(request.direction, request.token, outcome))
            } else if !h.timers.isEmpty {
                h.advance(600)
            } else {
                break
            }
        }
        h.send(.retry)
        h.send(.refresh)
        for _ in 0..<500 {
            guard let request = h.inFlight.values.first else { break }
            h.inFlight[request.direction] = nil
            let outcome = h.log.commit(server.answer(request), direction: request.direction, at: h.now)
            h.send(.committed(request.direction, request.token, outcome))
        }
        let ids = h.log.items.compactMap { Int($0.id) }
        #expect(Set(ids).count == ids.count, "seed \(seed): duplicate items")
        #expect(ids == ids.sorted(by: >), "seed \(seed): items out of feed order")
        if let high = ids.first, let low = ids.last {
            #expect(ids == Array((low...high).reversed()), "seed \(seed): a gap in \(ids)")
            #expect(high == server.newest, "seed \(seed): did not catch up (\(high) of \(server.newest))")
        }
        if h.state.hasLoaded {
            #expect(h.state.initial.load == .loaded)
        }
    }

    /// Invariants that hold after every event.
    private func check(_ h: Harness, offline: Bool, manual: Set<Direction>, seed: Int, step: Int) throws {
        let state = h.state
        let context = "seed \(seed) step \(step)"
        #expect((state.offline != nil) == offline, "\(context): banner disagrees with connectivity")
        for direction in Direction.allCases {
            let lane = state[direction]
            #expect(lane.load.isLoading == (h.inFlight[direction] != nil), "\(context): \(direction) loading ≠ request in flight")
            if lane.paused {
                #expect(offline, "\(context): \(direction) paused while online")
                #expect(!lane.load.isLoading)
            }
            if lane.held != nil {
                #expect(!offline && !lane.paused, "\(context): \(direction) held while offline")
                #expect(!lane.load.isLoading && h.timers[direction] == nil, "\(context): \(direction) held while it runs or waits on a timer")
            }
            if offline {
                #expect(h.inFlight[direction] == nil, "\(context): \(direction) request survives offline")
                #expect(h.timers[direction] == nil, "\(context): \(direction) timer survives offline")
            }
            if let failure = lane.load.failure {
                #expect(failure.attempt >= 1 && failure.attempt == h.machine.attempts(direction), "\(context): shown attempt is not the budget spent")
                if let next = failure.nextRetryAt {
                    #expect(h.timers[direction]?.due == next, "\(context): \(direction) shows a retry that is not scheduled")
                    #expect(next >= h.now)
                }
                if failure.error.isPermanent && h.timers[direction] != nil && !manual.contains(direction) {
                    Issue.record("\(context): \(direction) permanent error retried automatically")
                }
            }
            if direction != .initial && !state.hasLoaded {
                #expect(lane.load == .idle && !lane.paused, "\(context): \(direction) active before the first load")
            }
        }
        let presentation = Presentation(state: state)
        if state.hasLoaded {
            switch presentation.main {
            case .content(let count): #expect(count == state.itemCount && count > 0)
            case .empty: #expect(state.itemCount == 0)
            default: Issue.record("\(context): loaded content hidden by \(presentation.main)")
            }
        } else {
            #expect(presentation.olderFooter == nil && presentation.newerNotice == nil)
        }
        #expect(state.itemCount == h.log.items.count)
    }
}
