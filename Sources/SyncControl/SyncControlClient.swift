import Foundation
import Varlink

/// A Swift client of syncd's control socket, so Swift programs need not speak Varlink.
///
/// Every call opens its own short connection; ``watch()`` keeps one open while iterated.
/// Failures are ``SyncControlError``s.
public struct SyncControlClient: Sendable {
    /// Where syncd listens by default (`RuntimeDirectory=syncd`).
    public static let defaultSocketPath = "/run/syncd/io.syncd"

    /// The socket this client connects to.
    public let socketPath: String
    private let client: VarlinkClient

    /// A client of the syncd listening at `socketPath`.
    public init(socketPath: String = SyncControlClient.defaultSocketPath) {
        self.socketPath = socketPath
        self.client = VarlinkClient(socketPath: socketPath)
    }

    /// The socket path from `SYNCD_SOCKET`, else the default.
    public static func socketPath(environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        environment["SYNCD_SOCKET"].flatMap { $0.isEmpty ? nil : $0 } ?? defaultSocketPath
    }

    /// The daemon's status now (`GetStatus`).
    public func status() async throws -> ControlStatus {
        try await call("GetStatus", VarlinkEmpty(), as: SyncControlServer.StatusResult.self).status
    }

    /// The metrics in Prometheus's text format (`GetMetrics`).
    public func metrics() async throws -> String {
        try await call("GetMetrics", VarlinkEmpty(), as: SyncControlServer.MetricsResult.self).text
    }

    /// The current status, then every change, until the consumer stops or syncd goes away.
    public func watch() -> AsyncThrowingStream<ControlStatus, any Error> {
        let client = self.client
        let socketPath = self.socketPath
        return AsyncThrowingStream(bufferingPolicy: .bufferingNewest(1)) { continuation in
            let task = Task {
                do {
                    try await client.withConnection { connection in
                        try await connection.callMore("\(SyncdInterface.name).Watch") { parameters in
                            let result = try VarlinkCoding.decode(SyncControlServer.StatusResult.self, from: .object(parameters))
                            continuation.yield(result.status)
                            return !Task.isCancelled
                        }
                    }
                    continuation.finish()
                } catch {
                    continuation.finish(throwing: Self.translate(error, method: "Watch", socketPath: socketPath))
                }
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }

    /// Triggers loading newer items; returns the feeds affected.
    @discardableResult
    public func refresh(feed: String? = nil) async throws -> [String] {
        try await call("Refresh", SyncControlServer.FeedParameter(feed: feed), as: SyncControlServer.FeedsResult.self).feeds
    }

    /// Marks `feed` (or every feed) as seen, clearing its new-items notice; returns the feeds.
    @discardableResult
    public func markSeen(feed: String? = nil) async throws -> [String] {
        try await call("MarkSeen", SyncControlServer.FeedParameter(feed: feed), as: SyncControlServer.FeedsResult.self).feeds
    }

    /// Triggers loading the next older page.
    @discardableResult
    public func loadOlder(feed: String? = nil) async throws -> [String] {
        try await call("LoadOlder", SyncControlServer.FeedParameter(feed: feed), as: SyncControlServer.FeedsResult.self).feeds
    }

    /// Retries failed loads now.
    @discardableResult
    public func retry(feed: String? = nil) async throws -> [String] {
        try await call("Retry", SyncControlServer.FeedParameter(feed: feed), as: SyncControlServer.FeedsResult.self).feeds
    }

    /// The changes of `feed`'s stored items after `since` (a ``ControlItemChange/point`` from an
    /// earlier change; from the start when `nil`), then each change as syncd commits it, until
    /// the consumer stops or syncd goes away. Each change is read when the consumer asks for it.
    public func watchItems(feed: String, since: String? = nil) -> AsyncThrowingStream<ControlItemChange, any Error> {
        let client = self.client
        let socketPath = self.socketPath
        return AsyncThrowingStream(bufferingPolicy: .bufferingOldest(64)) { continuation in
            let task = Task {
                do {
                    var parameters: [String: JSONValue] = ["feed": .string(feed)]
                    if let since { parameters["since"] = .string(since) }
                    try await client.withConnection { connection in
                        try await connection.callMore("\(SyncdInterface.name).WatchItems", parameters: parameters) { reply in
                            let change = try VarlinkCoding.decode(ControlItemChange.self, from: .object(reply))
                            // A full buffer waits for the consumer instead of dropping a change; the
                            // next reply stays unread meanwhile, so syncd waits too.
                            while case .dropped = continuation.yield(change) {
                                try await Task.sleep(for: .milliseconds(5))
                            }
                            return !Task.isCancelled
                        }
                    }
                    continuation.finish()
                } catch {
                    continuation.finish(throwing: Self.translate(error, method: "WatchItems", socketPath: socketPath))
                }
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }

    /// One page of stored items, newest first.
    public func items(feed: String, limit: Int? = nil, after: String? = nil) async throws -> ControlItemPage {
        try await call("ListItems", SyncControlServer.ListItemsParameters(feed: feed, limit: limit, after: after), as: ControlItemPage.self)
    }

    private func call<Parameters: Encodable & Sendable, Result: Decodable & Sendable>(
        _ member: String, _ parameters: Parameters, as: Result.Type
    ) async throws -> Result {
        do {
            return try await client.call("\(SyncdInterface.name).\(member)", parameters: parameters, returning: Result.self)
        } catch {
            throw Self.translate(error, method: member, socketPath: socketPath)
        }
    }

    static func translate(_ error: any Error, method: String, socketPath: String) -> any Error {
        switch error {
        case let error as VarlinkConnectError:
            // A socket we may not open means syncd may well be running: say what is wrong.
            if error.errno == EACCES || error.errno == EPERM { return SyncControlError.socketAccessDenied(socket: socketPath) }
            return SyncControlError.unreachable(socket: socketPath, reason: error.reason)
        case let error as VarlinkError:
            switch error.name {
            case "io.syncd.FeedNotFound": return SyncControlError.feedNotFound(error.string("feed") ?? "")
            case "io.syncd.InvalidCursor": return SyncControlError.invalidCursor(error.string("after") ?? "")
            case "io.syncd.NotReady": return SyncControlError.notReady(feed: error.string("feed") ?? "", reason: error.string("reason") ?? "")
            case VarlinkError.permissionDenied.name: return SyncControlError.permissionDenied(method: method)
            case "io.syncd.InternalError": return SyncControlError.remote(VarlinkErrorDescription(name: error.name, text: "syncd failed: \(error.string("message") ?? "internal error")"))
            default: return SyncControlError.remote(VarlinkErrorDescription(name: error.name, text: error.description))
            }
        case VarlinkProtocolError.connectionClosed:
            return SyncControlError.remote(VarlinkErrorDescription(name: "closed", text: "syncd closed the connection"))
        case let error as VarlinkProtocolError:
            return SyncControlError.remote(VarlinkErrorDescription(name: "protocol", text: error.description))
        default:
            return error
        }
    }
}
