@testable import HTTPFeedSource
import NIOCore
import Testing
import TestSupport

private typealias Machine = PageWalkMachine
private typealias Action = PageWalkMachine.Action

private func r(_ number: Int) -> Machine.RequestID { .init(number: number) }
private func c(_ number: Int) -> Machine.ConnectionID { .init(number: number) }

/// When every table case starts; the machine never reads a clock, so any instant does.
private let start = NIODeadline.uptimeNanoseconds(1_000_000_000_000)
private let requestTimeout = TimeAmount.seconds(10)
private let idleTimeout = TimeAmount.seconds(60)

/// One event for the machine, as the cases write them; connections and requests by number.
private enum Event: CustomStringConvertible, Sendable {
    case ask
    case cancel(Int)
    case connected(Int)
    case connectFailed(Int)
    case head(Int, status: Int = 200, keepAlive: Bool = true)
    case refused(Int)
    case framed(Int)
    case ended(Int)
    case failed(Int)
    case requestTimer(Int)
    case idleTimer(Int)
    case close
    /// Time passes; no event.
    case wait(TimeAmount)

    var description: String {
        switch self {
        case .ask: "ask"
        case .cancel(let n): "cancel(r\(n))"
        case .connected(let n): "connected(c\(n))"
        case .connectFailed(let n): "connectFailed(c\(n))"
        case .head(let n, let status, let keepAlive): "head(c\(n), \(status)\(keepAlive ? "" : ", close"))"
        case .refused(let n): "refused(c\(n))"
        case .framed(let n): "framed(c\(n))"
        case .ended(let n): "ended(c\(n))"
        case .failed(let n): "failed(c\(n))"
        case .requestTimer(let n): "requestTimer(r\(n))"
        case .idleTimer(let n): "idleTimer(c\(n))"
        case .close: "close"
        case .wait(let amount): "wait(\(amount))"
        }
    }
}

/// The machine and its clock, told events the way the walk's shell tells them.
private struct Driver {
    var machine = Machine(requestTimeout: requestTimeout, idleTimeout: idleTimeout)
    var now = start

    mutating func send(_ event: Event) -> [Action] {
        switch event {
        case .ask: return machine.ask(at: now).actions
        case .cancel(let n): return machine.cancel(r(n))
        case .connected(let n): return machine.connected(c(n), at: now)
        case .connectFailed(let n): return machine.connectFailed(c(n))
        case .head(let n, let status, let keepAlive):
            machine.head(on: c(n), status: status, keepAlive: keepAlive)
            return []
        case .refused(let n):
            machine.refused(on: c(n))
            return []
        case .framed(let n): return machine.framed(on: c(n), at: now)
        case .ended(let n): return machine.ended(on: c(n), at: now)
        case .failed(let n): return machine.failed(on: c(n))
        case .requestTimer(let n): return machine.timerFired(.request(r(n)), at: now)
        case .idleTimer(let n): return machine.timerFired(.idle(c(n)), at: now)
        case .close: return machine.close()
        case .wait(let amount):
            now = now + amount
            return []
        }
    }
}

/// A case of the table: what happens before, the event, and exactly what it must do.
private struct Transition: CustomTestStringConvertible, Sendable {
    let name: String
    let before: [Event]
    let event: Event
    let expected: [Action]

    var testDescription: String { name }
}

/// The request on c1 (r1) with a 200 head read, and `waiting` more asked behind it.
private func onWire(waiting: Int = 0, status: Int = 200, keepAlive: Bool = true) -> [Event] {
    [.ask] + Array(repeating: .ask, count: waiting) + [.connected(1), .head(1, status: status, keepAlive: keepAlive)]
}

/// r1 answered on c1, which is now idle with its idle timer armed.
private let idle: [Event] = onWire() + [.ended(1)]

/// r1's response framed on c1 and r2 written early behind it; `waiting` more asked behind those.
private func early(waiting: Int = 0) -> [Event] {
    onWire(waiting: 1 + waiting) + [.framed(1)]
}

private let transitions: [Transition] = [
    // Connecting
    .init(name: "a request asked with no connection opens one", before: [], event: .ask, expected: [.connect(c(1))]),
    .init(name: "a request asked while connecting waits for it", before: [.ask], event: .ask, expected: []),
    .init(
        name: "the connection made sends the first request and starts its time", before: [.ask, .ask], event: .connected(1),
        expected: [.write(r(1), on: c(1)), .arm(.request(r(1)), at: start + requestTimeout)]),
    .init(
        name: "a connect that fails fails every waiting request", before: [.ask, .ask], event: .connectFailed(1),
        expected: [.fail(r(1), .connection), .fail(r(2), .connection)]),
    .init(
        name: "a connect the walk no longer waits for is closed as it completes", before: [.ask, .close, .ask], event: .connected(1),
        expected: [.close(c(1))]),
    .init(name: "a stale connect's failure fails nothing", before: [.ask, .close, .ask], event: .connectFailed(1), expected: []),
    .init(
        name: "a request asked on an idle connection goes out at once", before: idle + [.wait(.seconds(5))], event: .ask,
        expected: [.write(r(2), on: c(1)), .arm(.request(r(2)), at: start + .seconds(5) + requestTimeout)]),
    .init(name: "a request asked behind one on the connection waits", before: onWire(), event: .ask, expected: []),

    // The next request early
    .init(
        name: "a success framed sends the next request before it ends", before: onWire(waiting: 1), event: .framed(1),
        expected: [.write(r(2), on: c(1)), .arm(.request(r(2)), at: start + requestTimeout)]),
    .init(name: "a success framed with nothing waiting sends nothing", before: onWire(), event: .framed(1), expected: []),
    .init(name: "an error status framed sends nothing early", before: onWire(waiting: 1, status: 404), event: .framed(1), expected: []),
    .init(name: "a redirect framed sends nothing early", before: onWire(waiting: 1, status: 302), event: .framed(1), expected: []),
    .init(
        name: "a success that closes the connection sends nothing early", before: onWire(waiting: 1, keepAlive: false), event: .framed(1),
        expected: []),
    .init(name: "a refused success sends nothing early", before: onWire(waiting: 1) + [.refused(1)], event: .framed(1), expected: []),
    .init(name: "a second framing sends no third request", before: early(waiting: 1), event: .framed(1), expected: []),
    .init(name: "a framing on an older connection sends nothing", before: early() + [.failed(1), .connected(2)], event: .framed(1), expected: []),

    // A response's end
    .init(
        name: "the end makes the early request current, then answers", before: early(waiting: 1), event: .ended(1),
        expected: [.disarm(.request(r(1))), .answer(r(1))]),
    .init(
        name: "the end sends the next request before it answers", before: onWire(waiting: 1) + [.wait(.seconds(8))], event: .ended(1),
        expected: [
            .disarm(.request(r(1))), .write(r(2), on: c(1)), .arm(.request(r(2)), at: start + .seconds(8) + requestTimeout), .answer(r(1)),
        ]),
    .init(
        name: "the end with nothing waiting arms the idle timer", before: onWire(), event: .ended(1),
        expected: [.disarm(.request(r(1))), .arm(.idle(c(1)), at: start + idleTimeout), .answer(r(1))]),
    .init(
        name: "the end of a response that closes the connection closes it and opens another", before: onWire(waiting: 1, keepAlive: false),
        event: .ended(1), expected: [.disarm(.request(r(1))), .close(c(1)), .connect(c(2)), .answer(r(1))]),
    .init(
        name: "the end of a refused response answers it and closes the walk", before: early(waiting: 1) + [.refused(1)], event: .ended(1),
        expected: [
            .disarm(.request(r(1))), .answer(r(1)), .disarm(.request(r(2))), .fail(r(2), .cancelled), .fail(r(3), .cancelled), .close(c(1)),
        ]),
    .init(name: "an end on an older connection answers nothing", before: early() + [.failed(1), .connected(2)], event: .ended(1), expected: []),
    .init(
        name: "the early request's end answers it on its connection", before: early() + [.ended(1), .head(1)], event: .ended(1),
        expected: [.disarm(.request(r(2))), .arm(.idle(c(1)), at: start + idleTimeout), .answer(r(2))]),

    // The connection failing
    .init(
        name: "a failure fails the request with a head and sends the early one first again", before: early(waiting: 1), event: .failed(1),
        expected: [.close(c(1)), .disarm(.request(r(2))), .disarm(.request(r(1))), .fail(r(1), .connection), .connect(c(2))]),
    .init(
        name: "a failure on a fresh connection before any answer fails the request", before: [.ask, .connected(1)], event: .failed(1),
        expected: [.close(c(1)), .disarm(.request(r(1))), .fail(r(1), .connection)]),
    .init(
        name: "a cut-off on a reused connection before any answer sends the request once more", before: idle + [.ask], event: .failed(1),
        expected: [.disarm(.idle(c(1))), .close(c(1)), .disarm(.request(r(2))), .connect(c(2))]),
    .init(
        name: "the request sent once more goes first on the new connection", before: idle + [.ask, .ask, .failed(1)], event: .connected(2),
        expected: [.write(r(2), on: c(2)), .arm(.request(r(2)), at: start + requestTimeout)]),
    .init(
        name: "a failure after the head on a reused connection fails the request", before: idle + [.ask, .head(1)], event: .failed(1),
        expected: [.disarm(.idle(c(1))), .close(c(1)), .disarm(.request(r(2))), .fail(r(2), .connection)]),
    .init(name: "a failure of an older connection changes nothing", before: idle + [.ask, .failed(1), .connected(2)], event: .failed(1), expected: []),
    .init(name: "a failure while connecting changes nothing", before: [.ask], event: .failed(1), expected: []),

    // Request timers
    .init(
        name: "the request's time running out fails it and sends the rest on a new connection", before: onWire(waiting: 1),
        event: .requestTimer(1), expected: [.disarm(.request(r(1))), .close(c(1)), .connect(c(2)), .fail(r(1), .timedOut)]),
    .init(
        name: "the early request's time running out sends the current one first again", before: early(), event: .requestTimer(2),
        expected: [.disarm(.request(r(2))), .disarm(.request(r(1))), .close(c(1)), .connect(c(2)), .fail(r(2), .timedOut)]),
    .init(name: "the timer of a request answered changes nothing", before: idle, event: .requestTimer(1), expected: []),
    .init(name: "the timer of a request still waiting changes nothing", before: onWire(waiting: 1), event: .requestTimer(2), expected: []),

    // Cancelling
    .init(name: "a waiting request cancelled is taken off the queue", before: onWire(waiting: 1), event: .cancel(2), expected: [.fail(r(2), .cancelled)]),
    .init(
        name: "a request on the connection cancelled closes it and sends the rest on a new one", before: onWire(waiting: 1), event: .cancel(1),
        expected: [.disarm(.request(r(1))), .close(c(1)), .connect(c(2)), .fail(r(1), .cancelled)]),
    .init(
        name: "an early request cancelled closes the connection and sends the current one first again", before: early(waiting: 1),
        event: .cancel(2), expected: [.disarm(.request(r(2))), .disarm(.request(r(1))), .close(c(1)), .connect(c(2)), .fail(r(2), .cancelled)]),
    .init(
        name: "the only request on the connection cancelled leaves no connection", before: onWire(), event: .cancel(1),
        expected: [.disarm(.request(r(1))), .close(c(1)), .fail(r(1), .cancelled)]),
    .init(
        name: "a waiting request cancelled is not written", before: onWire(waiting: 1) + [.cancel(2)], event: .ended(1),
        expected: [.disarm(.request(r(1))), .arm(.idle(c(1)), at: start + idleTimeout), .answer(r(1))]),
    .init(name: "a request answered cancelled changes nothing", before: idle, event: .cancel(1), expected: []),
    .init(name: "a request cancelled while connecting is taken off the queue", before: [.ask], event: .cancel(1), expected: [.fail(r(1), .cancelled)]),

    // Idle
    .init(name: "the idle timer closes a connection idle for the idle time", before: idle + [.wait(idleTimeout)], event: .idleTimer(1), expected: [.close(c(1))]),
    .init(
        name: "the idle timer moves on to the idle time from the connection's last idle start",
        before: idle + [.wait(.seconds(30)), .ask, .head(1), .ended(1), .wait(.seconds(30))], event: .idleTimer(1),
        expected: [.arm(.idle(c(1)), at: start + .seconds(30) + idleTimeout)]),
    .init(
        name: "the connection going idle again with its idle timer armed leaves it as it is",
        before: idle + [.wait(.seconds(30)), .ask, .head(1)], event: .ended(1), expected: [.disarm(.request(r(2))), .answer(r(2))]),
    .init(name: "the idle timer firing while a request is on the connection does nothing", before: idle + [.ask], event: .idleTimer(1), expected: []),
    .init(
        name: "the connection going idle after a busy idle timer arms it again",
        before: idle + [.ask, .wait(idleTimeout), .idleTimer(1), .head(1)], event: .ended(1),
        expected: [.disarm(.request(r(2))), .arm(.idle(c(1)), at: start + idleTimeout + idleTimeout), .answer(r(2))]),
    .init(
        name: "the idle timer of an older connection does nothing", before: idle + [.close, .ask, .connected(2), .head(2), .ended(2)],
        event: .idleTimer(1), expected: []),

    // Closing the walk
    .init(
        name: "close fails the request on the connection and cancels those waiting", before: early(waiting: 1), event: .close,
        expected: [.disarm(.request(r(1))), .fail(r(1), .closed), .disarm(.request(r(2))), .fail(r(2), .cancelled), .fail(r(3), .cancelled), .close(c(1))]),
    .init(name: "close while connecting cancels the waiting", before: [.ask, .ask], event: .close, expected: [.fail(r(1), .cancelled), .fail(r(2), .cancelled)]),
    .init(name: "close of an idle walk closes its connection and its idle timer", before: idle, event: .close, expected: [.disarm(.idle(c(1))), .close(c(1))]),
    .init(name: "close of a walk never used does nothing", before: [], event: .close, expected: []),
    .init(name: "a walk closed opens a new connection when asked again", before: idle + [.close], event: .ask, expected: [.connect(c(2))]),
]

@Suite("The page walk's machine: each transition, and invariants over random events")
struct PageWalkMachineTests {
    @Test(arguments: transitions)
    fileprivate func transition(_ transition: Transition) {
        var driver = Driver()
        for event in transition.before { _ = driver.send(event) }
        let actions = driver.send(transition.event)
        #expect(actions == transition.expected, "after \(transition.before), \(transition.event)")
    }

    @Test func waitingCountsTheRequestsNotYetWritten() {
        var driver = Driver()
        for event in early(waiting: 2) { _ = driver.send(event) }
        #expect(driver.machine.waiting == 2)
        #expect(driver.machine.reading(on: c(1)) == r(1))
        #expect(driver.machine.reading(on: c(2)) == nil)
    }

    /// Random events, a server that answers in order on each connection, and timers that fire
    /// when due: every seed keeps every invariant of ``Simulation``, and once the server answers
    /// all, every request has been answered or failed exactly once.
    @Test func randomEventsKeepTheInvariants() {
        for seed in 0..<1000 {
            var simulation = Simulation(seed: UInt64(seed))
            do {
                try simulation.run(steps: 200)
            } catch {
                Issue.record("seed \(seed): \(error)\nlast events:\n\(simulation.log.suffix(25).joined(separator: "\n"))")
                return
            }
        }
    }
}

/// Something the machine must never do, with what it did.
private struct Violation: Error, CustomStringConvertible {
    let description: String
}

/// A walk told random events by a shell and a server that keep account of what it asks for:
/// which connections are open, what is on each, what has been answered, which timers are armed.
///
/// After every event: each request completes at most once, and only as the event allows (an
/// answer only to the response the server just ended, a timeout only to its own timer); one
/// connection open or being made; at most two requests on it, the second only after a success
/// was framed, none on a connection the server closes or after a refused response; requests
/// written and answered in the order asked; the next request on its way before the caller of
/// the one before hears; a request's time armed as it goes out and only while it is on the wire;
/// the idle timer armed only with nothing waiting, never over itself, closing only after the
/// idle time; a cut-off sent once more exactly when it is an idle drop; events about older
/// connections and late timers change nothing.
private struct Simulation {
    /// Where the response to the first request on a connection has got to.
    enum Stage {
        case waiting
        case head(status: Int, keepAlive: Bool)
        case framed(status: Int, keepAlive: Bool)
    }

    var random: SplitMix64
    var driver = Driver()
    var log: [String] = []
    var asked: [Machine.RequestID] = []
    var completions: [Machine.RequestID: Int] = [:]
    /// Connects asked for and not yet told.
    var pendingConnects: [Machine.ConnectionID] = []
    var open: Set<Machine.ConnectionID> = []
    var closed: [Machine.ConnectionID] = []
    /// Written on each open connection and not yet answered, in order.
    var wire: [Machine.ConnectionID: [Machine.RequestID]] = [:]
    var stage: [Machine.ConnectionID: Stage] = [:]
    /// Connections whose server said it closes them after this response.
    var closing: Set<Machine.ConnectionID> = []
    /// Connections whose current response the shell refused.
    var refused: Set<Machine.ConnectionID> = []
    var lastWritten: [Machine.ConnectionID: Machine.RequestID] = [:]
    var lastAnswered: [Machine.ConnectionID: Machine.RequestID] = [:]
    /// When each open connection last went idle or was made.
    var idleFrom: [Machine.ConnectionID: NIODeadline] = [:]
    var armed: [Machine.Timer: NIODeadline] = [:]
    /// Timers fired or disarmed, which a late firing must find changing nothing.
    var spent: [Machine.Timer] = []
    var connectionsSeen = 0
    /// Connects asked for that the walk still waits for: closing the walk gives them up.
    var liveConnects: Set<Machine.ConnectionID> = []
    /// Connections that have ended a response.
    var answeredOn: Set<Machine.ConnectionID> = []
    /// Requests whose response head the server sent since they were last written.
    var headSent: Set<Machine.RequestID> = []
    /// Requests last written on a connection that had answered before, or written early.
    var reused: Set<Machine.RequestID> = []
    /// Requests sent once more after a cut-off.
    var retried: Set<Machine.RequestID> = []

    init(seed: UInt64) {
        random = SplitMix64(seed: seed)
    }

    var outstanding: [Machine.RequestID] { asked.filter { completions[$0] == nil } }

    mutating func run(steps: Int) throws {
        for _ in 0..<steps { try step() }
        // The server answers all, connects succeed and no timer fires: nothing may be left waiting.
        for _ in 0..<1000 {
            if let connection = pendingConnects.first {
                try deliver(.connected(connection.number))
            } else if let connection = open.first(where: { wire[$0]?.isEmpty == false }) {
                try respond(on: connection, status: 200, keepAlive: true)
            } else {
                break
            }
        }
        guard outstanding.isEmpty else { throw Violation(description: "stranded once the server answered all: \(outstanding)") }
        try deliver(.close)
        for id in asked where completions[id] != 1 {
            throw Violation(description: "\(id) completed \(completions[id] ?? 0) times")
        }
    }

    private mutating func step() throws {
        switch random.int(in: 0...19) {
        case 0...3:
            guard outstanding.count < 6 else { return }
            try deliver(.ask)
        case 4:
            guard let id = asked.randomElement(using: &random) else { return }
            try deliver(.cancel(id.number))
        case 5, 6:
            guard !pendingConnects.isEmpty else { return }
            let connection = pendingConnects[random.int(in: 0...pendingConnects.count - 1)]
            try deliver(random.chance(0.85) ? .connected(connection.number) : .connectFailed(connection.number))
        case 7...12:
            guard let connection = open.first(where: { wire[$0]?.isEmpty == false }) else { return }
            try respond(
                on: connection, status: random.pick([200, 200, 200, 206, 302, 404, 503]), keepAlive: random.chance(0.85))
        case 13:
            guard let connection = open.randomElement(using: &random) else { return }
            try deliver(.failed(connection.number))
        case 14:
            // What an older connection says: the machine must not act on it.
            guard let connection = closed.randomElement(using: &random) else { return }
            let event = random.pick([Event.failed(connection.number), .framed(connection.number), .ended(connection.number)])
            let actions = try deliver(event)
            guard actions.isEmpty else { throw Violation(description: "acted on the closed \(connection): \(actions)") }
        case 15, 16:
            // In a fixed order: a dictionary's differs from one process to the next.
            let due = armed.sorted { ($0.value, "\($0.key)") < ($1.value, "\($1.key)") }
            guard let (timer, deadline) = due.randomElement(using: &random) else { return }
            if deadline > driver.now { try deliver(.wait(deadline - driver.now)) }
            armed[timer] = nil
            spent.append(timer)
            switch timer {
            case .request(let id): try deliver(.requestTimer(id.number))
            case .idle(let connection): try deliver(.idleTimer(connection.number))
            }
        case 17, 18:
            try deliver(.wait(.milliseconds(Int64(random.int(in: 0...40_000)))))
        default:
            if random.chance(0.2) {
                try deliver(.close)
                return
            }
            // A timer firing late, after it was stopped or had fired.
            let late = spent.filter { armed[$0] == nil }
            guard let timer = late.randomElement(using: &random) else { return }
            let actions: [Action]
            switch timer {
            case .request(let id): actions = try deliver(.requestTimer(id.number))
            case .idle(let connection): actions = try deliver(.idleTimer(connection.number))
            }
            guard actions.isEmpty else { throw Violation(description: "acted on \(timer) firing late: \(actions)") }
        }
    }

    /// The server's next step on `connection` for the first request on it.
    private mutating func respond(on connection: Machine.ConnectionID, status: Int, keepAlive: Bool) throws {
        let n = connection.number
        switch stage[connection] ?? .waiting {
        case .waiting:
            // The server's state changes as it sends, before the walk is told.
            if !keepAlive { closing.insert(connection) }
            stage[connection] = .head(status: status, keepAlive: keepAlive)
            if let id = wire[connection]?.first { headSent.insert(id) }
            try deliver(.head(n, status: status, keepAlive: keepAlive))
            if (200..<300).contains(status), random.chance(0.1) { try refuse(on: connection) }
        case .head(let status, let keepAlive):
            // A long body is passed on as it comes: never framed.
            if random.chance(0.3) { return try end(on: connection) }
            stage[connection] = .framed(status: status, keepAlive: keepAlive)
            try deliver(.framed(n))
            // A body refused once decompressed, after the next request went out.
            if (200..<300).contains(status), random.chance(0.05) { try refuse(on: connection) }
        case .framed:
            try end(on: connection)
        }
    }

    private mutating func end(on connection: Machine.ConnectionID) throws {
        try deliver(.ended(connection.number))
    }

    private mutating func refuse(on connection: Machine.ConnectionID) throws {
        refused.insert(connection)
        try deliver(.refused(connection.number))
    }

    /// Tells the machine `event`, checks what it did and every invariant after it.
    @discardableResult
    private mutating func deliver(_ event: Event) throws -> [Action] {
        var context = Context(event: event)
        var wantedConnect = false
        var cutOff: [Machine.RequestID] = []
        switch event {
        case .connected(let n):
            pendingConnects.removeAll { $0 == c(n) }
            wantedConnect = liveConnects.remove(c(n)) != nil
            open.insert(c(n))
            idleFrom[c(n)] = driver.now
        case .connectFailed(let n):
            pendingConnects.removeAll { $0 == c(n) }
            liveConnects.remove(c(n))
        case .ended(let n) where open.contains(c(n)):
            // The server's answer is done: the first request on the connection leaves it.
            context.answering = wire[c(n)]?.first
            if context.answering != nil { wire[c(n)]?.removeFirst() }
            context.refusedEnd = refused.remove(c(n)) != nil
            stage[c(n)] = nil
            answeredOn.insert(c(n))
            idleFrom[c(n)] = driver.now
        case .failed(let n) where open.contains(c(n)):
            cutOff = wire[c(n)] ?? []
        case .close:
            liveConnects = []
        default: break
        }
        let actions = driver.send(event)
        log.append("\(event) -> \("\(actions)".replacing("HTTPFeedSource.PageWalkMachine.", with: ""))")
        if case .ask = event { asked.append(Machine.RequestID(number: asked.count + 1)) }
        for action in actions {
            try apply(action, in: &context)
        }
        if case .connected(let n) = event, wantedConnect == actions.contains(.close(c(n))) {
            throw Violation(description: "c\(n) made \(wantedConnect ? "while the walk waited for it" : "after the walk gave it up"): \(actions)")
        }
        if let id = cutOff.first {
            // Sent once more only when cut off before any answer on a connection that had
            // answered before, and only once.
            let mustFail = headSent.contains(id) || !reused.contains(id) || retried.contains(id)
            if mustFail != (completions[id] != nil) { throw Violation(description: "\(id) cut off: failed \(!mustFail), must \(mustFail)") }
            if !mustFail { retried.insert(id) }
        }
        for id in cutOff.dropFirst() where completions[id] != nil { throw Violation(description: "\(id), written early, failed with the connection") }
        if case .ended(let n) = event, context.refusedEnd, open.contains(c(n)) || !outstanding.isEmpty {
            throw Violation(description: "c\(n) kept after a refused response, \(outstanding) waiting")
        }
        try checkInvariants(armedIdle: context.armedIdle)
        return actions
    }

    /// What the event being delivered says about the actions it may give.
    private struct Context {
        let event: Event
        /// The request whose response the server just ended.
        var answering: Machine.RequestID?
        /// That response was refused.
        var refusedEnd = false
        var armedIdle = false
    }

    private mutating func apply(_ action: Action, in context: inout Context) throws {
        let event = context.event
        switch action {
        case .connect(let connection):
            guard open.isEmpty else { throw Violation(description: "\(connection) opened while \(open) is open") }
            guard liveConnects.isEmpty else { throw Violation(description: "\(connection) opened while \(liveConnects) is being made") }
            liveConnects.insert(connection)
            guard connection.number == connectionsSeen + 1 else { throw Violation(description: "\(connection) is not a new connection") }
            connectionsSeen += 1
            pendingConnects.append(connection)
        case .write(let id, let connection):
            guard open.contains(connection) else { throw Violation(description: "\(id) written to \(connection), not open") }
            guard !closing.contains(connection) else { throw Violation(description: "\(id) written to \(connection), which the server closes") }
            guard completions[id] == nil, asked.contains(id) else { throw Violation(description: "\(id) written, not waiting") }
            guard !wire.values.contains(where: { $0.contains(id) }) else { throw Violation(description: "\(id) written twice") }
            let onIt = wire[connection] ?? []
            guard onIt.count < 2 else { throw Violation(description: "\(id) written behind \(onIt) on \(connection)") }
            if !onIt.isEmpty {
                // Early: only once the response before it is a success framed, kept and not refused.
                guard case .framed(let status, true) = stage[connection], (200..<300).contains(status), !refused.contains(connection) else {
                    throw Violation(description: "\(id) written behind \(onIt) on \(connection) before a success was framed")
                }
            }
            if let last = lastWritten[connection], last >= id { throw Violation(description: "\(id) written after \(last) on \(connection)") }
            lastWritten[connection] = id
            if answeredOn.contains(connection) || !onIt.isEmpty { reused.insert(id) } else { reused.remove(id) }
            headSent.remove(id)
            wire[connection, default: []].append(id)
        case .close(let connection):
            guard open.remove(connection) != nil else { throw Violation(description: "closed \(connection), not open") }
            if case .idleTimer = event, let from = idleFrom[connection], driver.now < from + idleTimeout {
                throw Violation(description: "\(connection) closed as idle \(driver.now - from) after it went idle")
            }
            wire[connection] = nil
            stage[connection] = nil
            closed.append(connection)
        case .arm(let timer, let deadline):
            guard deadline >= driver.now else { throw Violation(description: "\(timer) armed in the past") }
            // Moved on or started, never armed again over itself.
            guard armed[timer] == nil else { throw Violation(description: "\(timer) armed while armed") }
            switch timer {
            case .idle: context.armedIdle = true
            case .request(let id):
                // From when it goes out: written in this same event.
                guard wire.values.contains(where: { $0.last == id }), deadline == driver.now + requestTimeout else {
                    throw Violation(description: "\(id)'s time started at \(deadline - driver.now) before its end, not as it went out")
                }
            }
            armed[timer] = deadline
        case .disarm(let timer):
            armed[timer] = nil
            spent.append(timer)
        case .answer(let id):
            guard case .ended(let n) = event, id == context.answering else {
                throw Violation(description: "\(id) answered on \(event), the server's answer was to \(context.answering.map { "\($0)" } ?? "none")")
            }
            try complete(id)
            if let last = lastAnswered[c(n)], last >= id { throw Violation(description: "\(id) answered after \(last) on c\(n)") }
            lastAnswered[c(n)] = id
            // The next request is on its way before the caller hears: on the connection, or connecting.
            let next = open.contains(c(n)) && wire[c(n)]?.isEmpty == false || !liveConnects.isEmpty
            if !context.refusedEnd, !outstanding.isEmpty, !next {
                throw Violation(description: "\(id) answered before the next of \(outstanding) went out")
            }
        case .fail(let id, let failure):
            let allowed: Bool
            switch (event, failure) {
            case (.cancel(let n), .cancelled): allowed = n == id.number
            case (.close, .closed): allowed = wire.values.contains { $0.first == id }
            case (.close, .cancelled): allowed = !wire.values.contains { $0.first == id }
            case (.ended, .cancelled): allowed = context.refusedEnd
            case (.connectFailed, .connection), (.failed, .connection): allowed = true
            case (.requestTimer(let n), .timedOut): allowed = n == id.number
            default: allowed = false
            }
            guard allowed else { throw Violation(description: "\(id) failed \(failure) on \(event)") }
            try complete(id)
        }
    }

    private mutating func complete(_ id: Machine.RequestID) throws {
        guard asked.contains(id) else { throw Violation(description: "\(id) completed, never asked") }
        guard completions[id] == nil else { throw Violation(description: "\(id) completed twice") }
        completions[id] = 1
    }

    private func checkInvariants(armedIdle: Bool) throws {
        guard open.count <= 1 else { throw Violation(description: "open: \(open)") }
        let waiting = outstanding
        if armedIdle, !waiting.isEmpty { throw Violation(description: "idle timer armed with \(waiting) waiting") }
        var onWire: [Machine.RequestID] = []
        for connection in open {
            let onIt = wire[connection] ?? []
            onWire += onIt
            let reading = driver.machine.reading(on: connection)
            guard reading == onIt.first else { throw Violation(description: "reads \(reading.map { "\($0)" } ?? "none") on \(connection), the server answers \(onIt)") }
        }
        for id in onWire where completions[id] != nil { throw Violation(description: "\(id) completed, still on the wire") }
        for id in onWire where armed[.request(id)] == nil { throw Violation(description: "\(id) on the wire without its time running") }
        for (timer, _) in armed {
            switch timer {
            case .request(let id): guard onWire.contains(id) else { throw Violation(description: "\(id)'s time runs off the wire") }
            case .idle(let connection): guard open.contains(connection) else { throw Violation(description: "idle timer of \(connection), not open") }
            }
        }
        let queued = waiting.count - onWire.count
        guard driver.machine.waiting == queued else { throw Violation(description: "waiting \(driver.machine.waiting), queued \(queued)") }
        // A server that closes after an answer is not kept once the answer has ended.
        for connection in open where closing.contains(connection) && wire[connection]?.isEmpty != false {
            throw Violation(description: "\(connection) kept open after the server closed it")
        }
    }
}
