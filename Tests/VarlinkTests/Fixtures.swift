import AsyncBroadcast
import ConnectivityPolicy
import Foundation
import Logging
import SyncControl
import Synchronization
import SyncCore
import Testing
import TestSupport
import Varlink

/// A handler with canned answers that records the mutating calls it receives.
final class FakeHandler: SyncControlHandler {
    let broadcaster: Broadcast<ControlStatus>
    private let calls = Mutex<[String]>([])

    /// Item summaries are `summaryPrefix` followed by the item's number.
    let summaryPrefix: String

    /// Stored items served as feed "raw", as they are.
    let rawItems: [FeedItem]

    init(status: ControlStatus = Samples.status(), summaryPrefix: String = "item ", rawItems: [FeedItem] = []) {
        broadcaster = Broadcast<ControlStatus>(bufferingNewest: 1, latest: status)
        self.summaryPrefix = summaryPrefix
        self.rawItems = rawItems
    }

    var recordedCalls: [String] { calls.withLock { $0 } }

    func status() async throws -> ControlStatus {
        broadcaster.latest!
    }

    func statusUpdates() async -> AsyncStream<ControlStatus> {
        broadcaster.subscribe()
    }

    func refresh(feed: String?) async throws -> [String] { try record("refresh", feed) }
    func loadOlder(feed: String?) async throws -> [String] {
        if feed == "fresh" { throw SyncControlError.notReady(feed: "fresh", reason: "first load has not succeeded") }
        return try record("older", feed)
    }
    func retry(feed: String?) async throws -> [String] {
        if feed == "boom" { throw CocoaStyleError() }
        return try record("retry", feed)
    }

    func markSeen(feed: String?) async throws -> [String] {
        try record("seen", feed)
    }

    func items(feed: String, limit: Int, after: String?) async throws -> StoredItemPage {
        if feed == "raw" { return StoredItemPage(items: Array(rawItems.prefix(limit)), next: nil) }
        guard feed == "home" else { throw SyncControlError.feedNotFound(feed) }
        // The summary comes from the title, the first field the server's summary looks at.
        let all = try (1...5).reversed().map { n in
            let payload: JSONValue = ["id": .string("\(n)"), "title": .string("\(summaryPrefix)\(n)"), "content": .string("<p>item \(n)</p>")]
            return FeedItem(id: "\(n)", payload: try VarlinkCoding.makeEncoder().encode(payload))
        }
        var start = 0
        if let after {
            guard let index = all.firstIndex(where: { $0.id == after }) else { throw SyncControlError.invalidCursor(after) }
            start = index + 1
        }
        let slice = Array(all[start...].prefix(limit))
        let next = start + slice.count < all.count ? slice.last?.id : nil
        return StoredItemPage(items: slice, next: next)
    }

    /// Feed "home"'s log: an insert, an edit of it, an eviction; a `since` of `e1:1` starts after
    /// the first. The stream ends after the last, as a server's never does, so a client's follow
    /// ends too.
    func itemChanges(feed: String, since: ChangePoint?) async throws -> AsyncThrowingStream<ItemChange, any Error> {
        guard feed == "home" else { throw SyncControlError.feedNotFound(feed) }
        let log = [
            ItemChange(kind: .inserted, point: ChangePoint(epoch: "e1", seq: 1), id: "7", payload: Data(#"{"id":"7","title":"first"}"#.utf8)),
            ItemChange(kind: .updated, point: ChangePoint(epoch: "e1", seq: 2), id: "7", payload: Data(#"{"id":"7","title":"\u001b[2J edited"}"#.utf8)),
            ItemChange(kind: .evicted, point: ChangePoint(epoch: "e1", seq: 3), id: "7", payload: nil),
        ].filter { $0.point.seq > (since?.seq ?? 0) }
        return AsyncThrowingStream { continuation in
            for change in log { continuation.yield(change) }
            continuation.finish()
        }
    }

    private func record(_ verb: String, _ feed: String?) throws -> [String] {
        if let feed, feed != "home", feed != "work" { throw SyncControlError.feedNotFound(feed) }
        calls.withLock { $0.append("\(verb) \(feed ?? "*")") }
        return feed.map { [$0] } ?? ["home", "work"]
    }
}

struct CocoaStyleError: Error, CustomStringConvertible {
    var description: String { "disk on fire" }
}

enum Samples {
    static let now = Date(timeIntervalSince1970: 1_714_564_800) // 2024-05-01 12:00:00 UTC

    static func status(online: Bool = true) -> ControlStatus {
        let banner = online ? nil : ControlOfflineBanner(reason: .noCarrier, since: now.addingTimeInterval(-125))
        let connectivity: ControlConnectivity = online
            ? .online(link: "eth0", family: .ipv4, since: now.addingTimeInterval(-300))
            : .offline(reason: .noCarrier, since: now.addingTimeInterval(-125))
        let home = ControlFeed(
            name: "home",
            source: "https://social.example/api/v1/timelines/home",
            initial: .loaded,
            older: .failed("timeout", attempt: 3, nextRetryAt: now.addingTimeInterval(12)),
            newer: .loaded,
            itemCount: 120,
            lastSync: now.addingTimeInterval(-180),
            connectivity: connectivity,
            presentation: ControlPresentation(
                main: .content([ControlRow(id: "9", summary: "Hello world"), ControlRow(id: "8", summary: "Second post")]),
                offlineBanner: banner,
                olderFooter: .error("timeout"),
                newerNotice: .newItems(count: 3)
            )
        )
        let work = ControlFeed(
            name: "work",
            initial: ControlDirection(phase: .loading, paused: !online),
            connectivity: connectivity,
            presentation: ControlPresentation(main: .skeleton(rows: 4), offlineBanner: banner)
        )
        return ControlStatus(version: "0.1.0", internet: connectivity, feeds: [home, work])
    }
}

/// A private directory for a test's socket, reachable by an unprivileged child process.
func makeSocketDirectory() throws -> String {
    var template = Array("/tmp/varlink-test-XXXXXX".utf8CString)
    guard let made = mkdtemp(&template) else { throw CocoaStyleError() }
    let path = String(cString: made)
    chmod(path, 0o755)
    return path
}

/// Runs a control server on a fresh socket for the duration of `body`.
func withControlServer<R: Sendable>(
    handler: FakeHandler = FakeHandler(),
    policy: ControlAccessPolicy = ControlAccessPolicy(),
    maxConnections: Int = 64,
    maxMessageSize: Int = 64 * 1024,
    _ body: @Sendable (String) async throws -> R
) async throws -> R {
    try await withControlServer(handler: handler, policy: policy, maxConnections: maxConnections, maxMessageSize: maxMessageSize) { path, _ in
        try await body(path)
    }
}

/// Runs a control server on a fresh socket for the duration of `body`, which also gets the
/// server itself (to watch its connection count).
func withControlServer<R: Sendable>(
    handler: FakeHandler = FakeHandler(),
    policy: ControlAccessPolicy = ControlAccessPolicy(),
    maxConnections: Int = 64,
    maxMessageSize: Int = 64 * 1024,
    idleTimeout: Duration = .seconds(60),
    logger: Logger = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() }),
    _ body: @Sendable (String, SyncControlServer) async throws -> R
) async throws -> R {
    let directory = try makeSocketDirectory()
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let path = directory + "/io.syncd"
    var configuration = SyncControlServer.Configuration(socketPath: path, controlGroup: nil, useSocketActivation: false, version: "0.1.0")
    configuration.maxConnections = maxConnections
    configuration.maxMessageSize = maxMessageSize
    configuration.idleTimeout = idleTimeout
    let server = SyncControlServer(handler: handler, configuration: configuration, policy: policy, logger: logger)
    return try await whileRunning("the control server's run()", { try await server.run() }) { _ in
        _ = try await BoundedTask { await server.waitUntilListening() }.value("the control server's start")
        return try await body(path, server)
    }
}

extension VarlinkClient {
    /// As ``withConnection(_:)``, but the connection has answered one `GetInfo` call (its reply
    /// unchecked) before `body` runs: the server has accepted it and holds one of its slots.
    @discardableResult
    func withAnsweredConnection<Result: Sendable>(_ body: (VarlinkConnection) async throws -> Result) async throws -> Result {
        try await withConnection { connection in
            _ = try await connection.call("org.varlink.service.GetInfo")
            return try await body(connection)
        }
    }
}

/// Sends `message`, as it is, to a control server and expects an `InvalidParameter` error naming
/// `parameter`, after which the same connection still answers a good call.
func expectInvalidParameter(_ message: String, named parameter: String, sourceLocation: SourceLocation = #_sourceLocation) async throws {
    try await withControlServer { path in
        try await VarlinkClient(socketPath: path).withConnection { connection in
            try await connection.sendRaw(Array(message.utf8))
            let reply = try await connection.receive()
            #expect(reply.error == "org.varlink.service.InvalidParameter", sourceLocation: sourceLocation)
            #expect(reply.parameters["parameter"]?.stringValue == parameter, sourceLocation: sourceLocation)
            let status = try await connection.call("io.syncd.GetStatus")
            #expect(status["status"]?["version"] == "0.1.0", sourceLocation: sourceLocation)
        }
    }
}

/// Reads `fd` until a newline or its end, for at most `timeout` of real time, on a thread of
/// its own; returns what arrived by then (a caller checks it is the line it wanted).
///
/// A blocking read (`availableData`, `readLine`) ends only when the writer writes or closes, so a
/// child that stops short would hang the test.
func readLine(from fd: Int32, timeout: Duration = hangGuard) async throws -> String {
    let deadline = ContinuousClock.now + timeout
    return try await onDedicatedThread {
        var data: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while !data.contains(0x0A) {
            let left = deadline - ContinuousClock.now
            guard left > .zero else { break }
            var pollFD = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ready = poll(&pollFD, 1, Int32(clamping: Int64((left / .milliseconds(1)).rounded(.up))))
            if ready < 0 && errno != EINTR { break }
            guard ready > 0 else { continue }
            let count = read(fd, &buffer, buffer.count)
            if count < 0 && (errno == EINTR || errno == EAGAIN) { continue }
            if count <= 0 { break }
            data += buffer[..<count]
        }
        return String(decoding: data, as: UTF8.self)
    }
}
