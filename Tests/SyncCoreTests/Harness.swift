import Testing
import Foundation
@_spi(StateMachine) import SyncCore

/// Drives a ``FeedMachine`` by hand: a fake store (``FeedLog``), a manual "now", and a record of
/// every effect so tests can tell what the machine asked for.
struct Harness {
    var machine: FeedMachine
    var log = FeedLog()
    var now = Date(timeIntervalSinceReferenceDate: 1_000_000)
    var random: AnyRandomSource
    /// Requests sent and not yet answered or cancelled.
    var inFlight: [Direction: FetchRequest] = [:]
    /// Timers scheduled and not yet fired or cancelled, with their due dates.
    var timers: [Direction: (token: FetchToken, due: Date)] = [:]
    var effects: [FeedEffect] = []
    var allFetches: [FetchRequest] = []

    init(configuration: SyncConfiguration = .init(reconnectSpread: .zero), persisted: PersistedFeed = .fresh, random: any RandomSource = ConstantRandomSource(1)) {
        machine = FeedMachine(feed: "f", persisted: persisted, configuration: configuration)
        self.random = AnyRandomSource(random)
    }

    /// A harness whose machine has started and committed `first` as the answer to its first
    /// load: where every test of a loaded feed begins. The other arguments are as in
    /// ``init(configuration:persisted:random:)``; the last effects are those of that commit.
    init(
        configuration: SyncConfiguration = .init(reconnectSpread: .zero), random: any RandomSource = ConstantRandomSource(1),
        afterFirstLoad first: FeedPage, sourceLocation: SourceLocation = #_sourceLocation
    ) {
        self.init(configuration: configuration, random: random)
        send(.start)
        succeed(.initial, first, sourceLocation: sourceLocation)
    }

    var state: FeedState { machine.state }
    var presentation: Presentation { Presentation(state: machine.state) }

    @discardableResult
    mutating func send(_ event: FeedEvent) -> [FeedEffect] {
        let produced = machine.handle(event, now: now, random: &random)
        for effect in produced {
            switch effect {
            case .fetch(let request):
                inFlight[request.direction] = request
                allFetches.append(request)
            case .cancelFetch(let direction, let token):
                if inFlight[direction]?.token == token { inFlight[direction] = nil }
            case .schedule(let direction, let delay, let token):
                timers[direction] = (token, now.adding(delay))
            case .cancelTimer(let direction, let token):
                if timers[direction]?.token == token { timers[direction] = nil }
            }
        }
        effects = produced
        return produced
    }

    /// The fetches among the last effects.
    var fetched: [FetchRequest] {
        effects.compactMap { if case .fetch(let request) = $0 { request } else { nil } }
    }

    /// Delays scheduled among the last effects.
    var scheduled: [Direction: Duration] {
        var result: [Direction: Duration] = [:]
        for case .schedule(let direction, let delay, _) in effects { result[direction] = delay }
        return result
    }

    /// Answers the request in flight for `direction` with a page, committing it like a store.
    @discardableResult
    mutating func succeed(_ direction: Direction, _ page: FeedPage, sourceLocation: SourceLocation = #_sourceLocation) -> [FeedEffect] {
        guard let request = inFlight.removeValue(forKey: direction) else { return noRequest(direction, sourceLocation) }
        let outcome = log.commit(page, direction: direction, at: now)
        return send(.committed(direction, request.token, outcome))
    }

    @discardableResult
    mutating func fail(_ direction: Direction, _ error: FeedError, sourceLocation: SourceLocation = #_sourceLocation) -> [FeedEffect] {
        guard let request = inFlight.removeValue(forKey: direction) else { return noRequest(direction, sourceLocation) }
        return send(.failed(direction, request.token, error))
    }

    /// A test that answers a request the machine never sent fails where it did so, and only
    /// that test: the rest of the parallel run goes on.
    private func noRequest(_ direction: Direction, _ sourceLocation: SourceLocation) -> [FeedEffect] {
        Issue.record("no \(direction) request in flight", sourceLocation: sourceLocation)
        return []
    }

    /// Moves time on and fires every timer that is due, earliest first.
    mutating func advance(_ seconds: Double) {
        let target = now.addingTimeInterval(seconds)
        while let (direction, timer) = timers.filter({ $0.value.due <= target }).min(by: { $0.value.due < $1.value.due }) {
            now = max(now, timer.due)
            timers[direction] = nil
            send(.timerFired(direction, timer.token))
        }
        now = target
    }
}

func item(_ id: String) -> FeedItem { FeedItem(id: id, payload: Data("{\"id\":\"\(id)\"}".utf8)) }

func page(_ ids: [String], older: String?, newer: String?) -> FeedPage {
    FeedPage(items: ids.map(item), olderCursor: older, newerCursor: newer)
}

let transient = FeedError(.httpStatus(503), "service unavailable")
let timeout = FeedError(.timeout, "timed out")
let notFound = FeedError(.httpStatus(404), "not found")

extension Duration {
    /// Whether two durations agree to within a microsecond (floating-point growth factors).
    func isClose(to other: Duration) -> Bool {
        abs((self - other).secondsValue) < 1e-6
    }
}
