import Foundation
@_spi(StateMachine) import SyncCore

/// A pure, discrete-event simulation of a fleet of agents reconnecting together after an outage,
/// each driven by its own ``FeedMachine`` (the real reducer syncd's coordinator runs) with its own
/// seeded jitter source, as `SyncCoordinator` seeds each feed. No network, no clock: time is the
/// simulation's.
///
/// Every agent holds a loaded feed whose newer load was paused by the outage; at t = 0 they all
/// get `.online`. A request reaching the server before `failFor` is answered 503 (no
/// `Retry-After`), later ones succeed; answers arrive `latency` after the request.
public enum FleetSimulation {
    public struct Scenario: Sendable {
        public var name: String
        public var agents: Int
        public var reconnectSpread: Duration
        public var retry: RetryPolicy
        public var failFor: Duration
        public var latency: Duration
        public var seed: UInt64

        public init(name: String, agents: Int = 10_000, reconnectSpread: Duration, retry: RetryPolicy = .default,
                    failFor: Duration = .zero, latency: Duration = .milliseconds(20), seed: UInt64 = 1) {
            self.name = name
            self.agents = agents
            self.reconnectSpread = reconnectSpread
            self.retry = retry
            self.failFor = failFor
            self.latency = latency
            self.seed = seed
        }
    }

    public struct Result: Sendable {
        public var scenario: Scenario
        /// Request arrival instants at the server, ns after the reconnect.
        public var arrivals: [Int64]
        /// Arrivals of retries only (requests after a failure of the same agent).
        public var retryArrivals: [Int64]
        public var failedRequests: Int
        /// When the last agent's load succeeded, ns after the reconnect.
        public var allSyncedAt: Int64
        public var synced: Int

        public func peak(bucket: Duration, retriesOnly: Bool = false) -> Int {
            let width = bucket.nanoseconds
            var counts: [Int64: Int] = [:]
            for arrival in retriesOnly ? retryArrivals : arrivals { counts[arrival / width, default: 0] += 1 }
            return counts.values.max() ?? 0
        }

        /// Peak rate in requests per second over buckets of `bucket`.
        public func peakRate(bucket: Duration) -> Double {
            Double(peak(bucket: bucket)) * 1e9 / Double(bucket.nanoseconds)
        }

        /// Requests per `bucket` from 0 to `until`.
        public func histogram(bucket: Duration, until: Duration) -> [Int] {
            let width = bucket.nanoseconds
            var counts = [Int](repeating: 0, count: Int(until.nanoseconds / width))
            for arrival in arrivals where arrival >= 0 {
                let index = Int(arrival / width)
                if index < counts.count { counts[index] += 1 }
            }
            return counts
        }
    }

    private enum EventKind {
        case timer(Direction, FetchToken)
        case answer(Direction, FetchToken, FeedError?)
    }

    private struct Event: Comparable {
        var at: Int64
        var order: Int
        var agent: Int
        var kind: EventKind
        static func < (a: Event, b: Event) -> Bool { (a.at, a.order) < (b.at, b.order) }
        static func == (a: Event, b: Event) -> Bool { a.at == b.at && a.order == b.order }
    }

    public static func run(_ scenario: Scenario) -> Result {
        let origin = Date(timeIntervalSinceReferenceDate: 800_000_000)
        func date(_ ns: Int64) -> Date { origin.addingTimeInterval(Double(ns) / 1e9) }
        let configuration = SyncConfiguration(retry: scenario.retry, reconnectSpread: scenario.reconnectSpread)
        let persisted = PersistedFeed(olderCursor: "older", newerCursor: "newer", hasLoaded: true, itemCount: 100, revision: 1)
        var machines: [FeedMachine] = []
        var randoms: [SeededRandomSource] = []
        var seeder = SeededRandomSource(seed: scenario.seed)
        machines.reserveCapacity(scenario.agents)
        var queue = Heap<Event>()
        var order = 0
        var arrivals: [Int64] = []
        var retryArrivals: [Int64] = []
        var hasFailed = [Bool](repeating: false, count: scenario.agents)
        var failed = 0
        var synced = 0
        var allSyncedAt: Int64 = 0

        func perform(_ effects: [FeedEffect], agent: Int, now: Int64) {
            for effect in effects {
                switch effect {
                case .fetch(let request):
                    arrivals.append(now)
                    if hasFailed[agent] { retryArrivals.append(now) }
                    let error: FeedError? = now < scenario.failFor.nanoseconds
                        ? FeedError(.httpStatus(503), "HTTP 503 Service Unavailable") : nil
                    if error != nil {
                        failed += 1
                        hasFailed[agent] = true
                    }
                    order += 1
                    queue.push(Event(at: now + scenario.latency.nanoseconds, order: order, agent: agent,
                                     kind: .answer(request.direction, request.token, error)))
                case .schedule(let direction, let delay, let token):
                    order += 1
                    queue.push(Event(at: now + delay.nanoseconds, order: order, agent: agent, kind: .timer(direction, token)))
                case .cancelFetch, .cancelTimer:
                    break  // the machine ignores answers and timers whose token it dropped
                }
            }
        }

        // Before the outage ends: loaded, offline, a newer load asked for and paused.
        for _ in 0..<scenario.agents {
            var machine = FeedMachine(feed: "feed", persisted: persisted, configuration: configuration)
            var random = SeededRandomSource(seed: seeder.next())
            _ = machine.handle(.offline(.noCarrier), now: date(-60_000_000_000), random: &random)
            _ = machine.handle(.start, now: date(-60_000_000_000), random: &random)
            machines.append(machine)
            randoms.append(random)
        }
        // t = 0: the network is back for everyone.
        for agent in 0..<scenario.agents {
            let effects = machines[agent].handle(.online(), now: date(0), random: &randoms[agent])
            perform(effects, agent: agent, now: 0)
        }
        var steps = 0
        while let event = queue.pop(), steps < 10_000_000 {
            steps += 1
            let now = event.at
            let machineEvent: FeedEvent
            switch event.kind {
            case .timer(let direction, let token):
                machineEvent = .timerFired(direction, token)
            case .answer(let direction, let token, let error?):
                machineEvent = .failed(direction, token, error)
            case .answer(let direction, let token, nil):
                var feed = machines[event.agent].persistedFeed
                feed.revision += 1
                feed.lastSyncAt = date(now)
                machineEvent = .committed(direction, token, CommitOutcome(feed: feed, pageItemCount: 0, inserted: 0))
                synced += 1
                allSyncedAt = max(allSyncedAt, now)
            }
            let effects = machines[event.agent].handle(machineEvent, now: date(now), random: &randoms[event.agent])
            perform(effects, agent: event.agent, now: now)
        }
        return Result(scenario: scenario, arrivals: arrivals, retryArrivals: retryArrivals, failedRequests: failed, allSyncedAt: allSyncedAt, synced: synced)
    }
}

/// A binary min-heap.
struct Heap<Element: Comparable> {
    private var items: [Element] = []

    mutating func push(_ element: Element) {
        items.append(element)
        var child = items.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard items[child] < items[parent] else { break }
            items.swapAt(child, parent)
            child = parent
        }
    }

    mutating func pop() -> Element? {
        guard !items.isEmpty else { return nil }
        items.swapAt(0, items.count - 1)
        let top = items.removeLast()
        var parent = 0
        while true {
            let left = 2 * parent + 1, right = left + 1
            var smallest = parent
            if left < items.count && items[left] < items[smallest] { smallest = left }
            if right < items.count && items[right] < items[smallest] { smallest = right }
            if smallest == parent { break }
            items.swapAt(parent, smallest)
            parent = smallest
        }
        return top
    }
}
