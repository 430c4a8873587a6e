import NIOCore

/// What a ``PageWalk`` does next: a pure state machine over its requests and its one HTTP/1.1
/// connection, told each event and returning the ``Action``s that perform it.
///
/// It holds no channel, promise or timer, and reads no clock: it names requests and connections
/// by the ids it hands out, and takes the time with each event that may start one of its timers.
/// The walk's I/O shell keeps what those ids stand for and performs the actions in order.
///
/// Rules it keeps:
/// - one connection at a time, opened when a request waits and none is open or being made;
/// - requests go out in the order asked, one at a time: the next one only once the response
///   before it has ended, or early, once that response is complete on the wire (``framed(on:at:)``)
///   if it is a success that keeps the connection; so at most two are on the connection;
/// - the next request goes out before the caller hears of the answer before it;
/// - each request's time runs from when it goes out until its response ends;
/// - events about a connection other than the open one (an older connection's failure, a
///   connect the walk no longer waits for, a late timer) change nothing;
/// - a request written and then left without its answer (the connection failed, or was dropped
///   for another request) goes first again on the next connection; a GET, so safe to ask again;
/// - a connection that closes before answering, after answering before, was dropped as idle by
///   the server while the request went out: that request goes out once more;
/// - the connection closes once it has been idle for the idle timeout; the timer is armed when
///   it goes idle and moved on when it fires, not re-armed for every request.
struct PageWalkMachine: Sendable {
    /// A caller's request, numbered in the order asked.
    struct RequestID: Hashable, Comparable, Sendable, CustomStringConvertible {
        let number: Int
        static func < (lhs: Self, rhs: Self) -> Bool { lhs.number < rhs.number }
        var description: String { "r\(number)" }
    }

    /// A connection, numbered in the order opened; never reused.
    struct ConnectionID: Hashable, Sendable, CustomStringConvertible {
        let number: Int
        var description: String { "c\(number)" }
    }

    /// A timer the shell runs; told back with ``timerFired(_:at:)``.
    enum Timer: Hashable, Sendable {
        /// The request's time, from when it went out.
        case request(RequestID)
        /// The connection's idle time.
        case idle(ConnectionID)
    }

    /// Why a request failed, for the shell to turn into the caller's error.
    enum Failure: Hashable, Sendable {
        /// The caller gave up (``cancel(_:)``), or the walk closed while the request waited.
        case cancelled
        /// The walk closed while the request was on the connection.
        case closed
        /// Its response did not end within the request timeout.
        case timedOut
        /// The error that came with the event: the connection's, or the connect's.
        case connection
    }

    /// What the shell does, in the order given.
    enum Action: Hashable, Sendable {
        /// Open a connection; tell ``connected(_:at:)`` or ``connectFailed(_:)``.
        case connect(ConnectionID)
        /// Send the request on the connection, its response read afresh.
        case write(RequestID, on: ConnectionID)
        /// Close the connection; nothing more is done with it.
        case close(ConnectionID)
        /// Start (or restart) the timer to fire at the deadline.
        case arm(Timer, at: NIODeadline)
        /// Stop the timer.
        case disarm(Timer)
        /// Complete the request with the response read for it, whatever it says.
        case answer(RequestID)
        /// Fail the request.
        case fail(RequestID, Failure)
    }

    /// A request, and what the machine knows of its response.
    private struct Request: Sendable {
        let id: RequestID
        /// Its response's head was read.
        var headRead = false
        /// Its response is a success (2xx).
        var succeeded = false
        /// The server closes the connection after this response (`Connection: close`, HTTP/1.0).
        var closesConnection = false
        /// The shell refused the response (its body over the limit): the rest is not read.
        var refused = false
        /// Sent on a connection that had answered before.
        var onReusedConnection = false
        /// Already sent again once after a cut-off on a reused connection.
        var retried = false

        init(id: RequestID) { self.id = id }

        /// Whether the next request may go out once this response is complete on the wire.
        var letsNextGoEarly: Bool { succeeded && !refused && !closesConnection }

        /// The same request, to go out again: what was read of its response is forgotten.
        var again: Request {
            var request = Request(id: id)
            request.retried = retried
            return request
        }
    }

    /// The walk's connection.
    private enum Link: Sendable {
        case none
        case connecting(ConnectionID)
        case open(ConnectionID)
    }

    /// From when a request goes out until its response has ended.
    let requestTimeout: TimeAmount
    /// How long the connection stays open with nothing on it.
    let idleTimeout: TimeAmount

    private var link = Link.none
    /// The request whose response is read next.
    private var current: Request?
    /// Written once `current`'s response was complete on the wire: current next.
    private var early: Request?
    /// Asked for and not yet written, in order.
    private var queue: [Request] = []
    /// Responses ended on the open connection.
    private var answered = 0
    private var idleTimerArmed = false
    /// When the open connection last went idle.
    private var idleSince = NIODeadline.uptimeNanoseconds(0)
    private var requestsAsked = 0
    private var connectionsOpened = 0
    /// What the event being handled does.
    private var actions: [Action] = []

    /// A walk with nothing asked and no connection.
    init(requestTimeout: TimeAmount, idleTimeout: TimeAmount) {
        self.requestTimeout = requestTimeout
        self.idleTimeout = idleTimeout
    }

    // MARK: Reading

    /// Requests asked for and not yet written.
    var waiting: Int { queue.count }

    /// The request whose response is read on `connection` now; `nil` when it is not the open
    /// connection or nothing is on it (what it reads then belongs to no caller).
    func reading(on connection: ConnectionID) -> RequestID? {
        guard case .open(connection) = link else { return nil }
        return current?.id
    }

    // MARK: Events

    /// A caller asks for a page, at `now`: the id names its request in the actions.
    mutating func ask(at now: NIODeadline) -> (id: RequestID, actions: [Action]) {
        actions = []
        requestsAsked += 1
        let id = RequestID(number: requestsAsked)
        queue.append(Request(id: id))
        sendNext(at: now)
        return (id, actions)
    }

    /// The caller of `id` gave up. Waiting, it is taken off the queue; on the connection, the
    /// connection is closed under it (a stalled server would hold it for ever; AsyncHTTPClient
    /// closes a cancelled request's connection too) and what else waits goes on a new one.
    mutating func cancel(_ id: RequestID) -> [Action] {
        actions = []
        if let index = queue.firstIndex(where: { $0.id == id }) {
            queue.remove(at: index)
        } else if current?.id == id || early?.id == id {
            dropConnection(abandoning: id)
        } else {
            return []
        }
        actions.append(.fail(id, .cancelled))
        return actions
    }

    /// The connection `connection` is open, at `now`.
    mutating func connected(_ connection: ConnectionID, at now: NIODeadline) -> [Action] {
        actions = []
        // The walk closed while it was being made: it is not wanted any more.
        guard case .connecting(connection) = link else { return [.close(connection)] }
        link = .open(connection)
        answered = 0
        sendNext(at: now)
        return actions
    }

    /// The connection `connection` could not be made: every request waiting for it gets the
    /// reason (``Failure/connection``).
    mutating func connectFailed(_ connection: ConnectionID) -> [Action] {
        actions = []
        guard case .connecting(connection) = link else { return [] }
        link = .none
        failQueue(with: .connection)
        return actions
    }

    /// The head of the response read on `connection`: its status code and whether the server
    /// keeps the connection after it.
    mutating func head(on connection: ConnectionID, status: Int, keepAlive: Bool) {
        guard reading(on: connection) != nil else { return }
        current?.headRead = true
        current?.succeeded = (200..<300).contains(status)
        current?.closesConnection = !keepAlive
    }

    /// The shell refused the response read on `connection` (its body is over the limit): the
    /// rest is not read, and the connection goes when it ends.
    mutating func refused(on connection: ConnectionID) {
        guard reading(on: connection) != nil else { return }
        current?.refused = true
    }

    /// The response read on `connection` is complete on the wire, its body not yet decoded or
    /// handed on, at `now`: after a success that keeps the connection, the next request goes
    /// out now, so the server works on it while this one is decoded.
    mutating func framed(on connection: ConnectionID, at now: NIODeadline) -> [Action] {
        actions = []
        guard reading(on: connection) != nil, let request = current, request.letsNextGoEarly, early == nil, !queue.isEmpty else {
            return []
        }
        var next = queue.removeFirst()
        write(&next, on: connection, at: now)
        // The connection has answered: one that closes before answering this is an idle drop.
        next.onReusedConnection = true
        early = next
        return actions
    }

    /// The response read on `connection` has ended, at `now`: the next request goes out, then
    /// its caller hears of it (hearing runs the caller's code, and the server would wait for that).
    mutating func ended(on connection: ConnectionID, at now: NIODeadline) -> [Action] {
        actions = []
        guard reading(on: connection) != nil, let request = current else { return [] }
        answered += 1
        current = nil
        actions.append(.disarm(.request(request.id)))
        if request.refused {
            // The rest of a refused body is not read: the connection goes with it.
            actions.append(.answer(request.id))
            closeAll()
            return actions
        }
        if request.closesConnection {
            // Nothing more goes on this connection: the next request opens a new one.
            if let connection = detach() { actions.append(.close(connection)) }
        }
        sendNext(at: now)
        actions.append(.answer(request.id))
        return actions
    }

    /// The connection `connection` failed or closed: what was on it goes first again on a new
    /// one (the current request only after an idle drop, see the type's rules), or fails.
    mutating func failed(on connection: ConnectionID) -> [Action] {
        actions = []
        guard case .open(connection) = link else { return [] }
        detach()
        actions.append(.close(connection))
        requeueEarly()
        if let request = current {
            current = nil
            actions.append(.disarm(.request(request.id)))
            if !request.headRead, request.onReusedConnection, !request.retried {
                var again = request.again
                again.retried = true
                queue.insert(again, at: 0)
            } else {
                actions.append(.fail(request.id, .connection))
            }
        }
        connectIfWaiting()
        return actions
    }

    /// `timer` fired at `now`.
    mutating func timerFired(_ timer: Timer, at now: NIODeadline) -> [Action] {
        actions = []
        switch timer {
        case .request(let id):
            guard current?.id == id || early?.id == id else { return [] }
            // No complete response in time: it fails as the pool's would, and the requests
            // waiting behind it go out on a new connection, each with its full time.
            dropConnection(abandoning: id)
            actions.append(.fail(id, .timedOut))
        case .idle(let connection):
            guard case .open(connection) = link, idleTimerArmed else { return [] }
            idleTimerArmed = false
            guard current == nil, queue.isEmpty else { return [] }
            let deadline = idleSince + idleTimeout
            if deadline > now {
                armIdleTimer(on: connection, at: deadline)
            } else {
                closeAll()
            }
        }
        return actions
    }

    /// Closes the walk: the request on the connection fails (``Failure/closed``), those waiting
    /// are cancelled, and a connection being made is closed once made.
    mutating func close() -> [Action] {
        actions = []
        closeAll()
        return actions
    }

    // MARK: Steps

    private mutating func closeAll() {
        let connection = detach()
        if let request = current {
            current = nil
            actions.append(.disarm(.request(request.id)))
            actions.append(.fail(request.id, .closed))
        }
        // As if it had waited: it fails with the others.
        requeueEarly()
        failQueue(with: .cancelled)
        if let connection { actions.append(.close(connection)) }
    }

    /// Closes the connection under `abandoned`, which nobody waits for any more; what else was
    /// on it goes first again on a new connection.
    private mutating func dropConnection(abandoning abandoned: RequestID) {
        let connection = detach()
        requeueEarly()
        if let request = current {
            current = nil
            actions.append(.disarm(.request(request.id)))
            if request.id != abandoned { queue.insert(request.again, at: 0) }
        }
        queue.removeAll { $0.id == abandoned }
        if let connection { actions.append(.close(connection)) }
        connectIfWaiting()
    }

    /// The request written early goes first again, on the next connection.
    private mutating func requeueEarly() {
        guard let request = early else { return }
        early = nil
        actions.append(.disarm(.request(request.id)))
        queue.insert(request.again, at: 0)
    }

    private mutating func failQueue(with failure: Failure) {
        let waiting = queue
        queue = []
        for request in waiting { actions.append(.fail(request.id, failure)) }
    }

    /// Takes the connection off the walk, open or being made, with its idle timer; the caller
    /// closes an open one.
    @discardableResult
    private mutating func detach() -> ConnectionID? {
        defer { link = .none }
        guard case .open(let connection) = link else { return nil }
        if idleTimerArmed {
            idleTimerArmed = false
            actions.append(.disarm(.idle(connection)))
        }
        return connection
    }

    private mutating func sendNext(at now: NIODeadline) {
        guard current == nil else { return }
        if let request = early {
            // On the connection already: it only becomes the one whose answer comes next.
            early = nil
            current = request
            return
        }
        guard case .open(let connection) = link else {
            connectIfWaiting()
            return
        }
        guard !queue.isEmpty else {
            idleSince = now
            if !idleTimerArmed { armIdleTimer(on: connection, at: now + idleTimeout) }
            return
        }
        var request = queue.removeFirst()
        write(&request, on: connection, at: now)
        current = request
    }

    private mutating func connectIfWaiting() {
        guard case .none = link, current == nil, !queue.isEmpty else { return }
        connectionsOpened += 1
        let connection = ConnectionID(number: connectionsOpened)
        link = .connecting(connection)
        actions.append(.connect(connection))
    }

    private mutating func write(_ request: inout Request, on connection: ConnectionID, at now: NIODeadline) {
        request.onReusedConnection = answered > 0
        actions.append(.write(request.id, on: connection))
        actions.append(.arm(.request(request.id), at: now + requestTimeout))
    }

    private mutating func armIdleTimer(on connection: ConnectionID, at deadline: NIODeadline) {
        idleTimerArmed = true
        actions.append(.arm(.idle(connection), at: deadline))
    }
}
