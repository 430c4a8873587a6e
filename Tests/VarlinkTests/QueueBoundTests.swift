import AsyncBroadcast
import Foundation
import Logging
import SyncControl
import SyncCore
import TestSupport
import Testing
@testable import Varlink

/// What a connection may make the server hold: calls read but not answered are bounded per
/// connection and per user, a full queue stops the reading (the client's writes block instead),
/// a flood behind a stream gets an error reply before the close, and a client that leaves replies
/// unread loses its connection after the idle timeout.
@Suite("Varlink queue bounds", .timeLimit(.minutes(3)))
struct QueueBoundTests {
    static let interfaceName = "org.example.bounds"
    static let floodError = VarlinkError("org.example.bounds.TooManyCalls")

    /// A server whose `Hold` calls wait until `gate` is open, whose `Echo` answers at once, and whose
    /// `Stream` sends `streamReplies` replies of `streamReplySize` bytes (forever when `nil`),
    /// then waits until cancelled.
    final class Fixture: Sendable {
        let gate = Broadcast<Bool>(bufferingNewest: 1, latest: false)
        let streamReplies: Int?
        let streamReplySize: Int
        let server: VarlinkServer
        let path: String
        let directory: String

        init(configuration: (String) -> VarlinkServer.Configuration, streamReplies: Int? = 1, streamReplySize: Int = 16, logger: Logger = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })) throws {
            directory = try makeSocketDirectory()
            path = directory + "/bounds"
            self.streamReplies = streamReplies
            self.streamReplySize = streamReplySize
            var interface = try VarlinkInterface(description: """
                interface org.example.bounds
                method Hold() -> ()
                method Echo(pad: ?string) -> ()
                method Stream() -> (text: string)
                error TooManyCalls ()
                """)
            let gate = gate
            interface.method("Hold") { (_: VarlinkRequest) -> VarlinkEmpty in
                for await open in gate.subscribe() where open { break }
                return VarlinkEmpty()
            }
            interface.method("Echo", parameters: EchoParameters.self) { _, _ in VarlinkEmpty() }
            let text = String(repeating: "x", count: streamReplySize)
            interface.streamingMethod("Stream", parameters: VarlinkEmpty.self) { (_, _, yield: @Sendable (StreamReply) async throws -> Void) in
                var sent = 0
                while streamReplies.map({ sent < $0 }) ?? true {
                    try await yield(StreamReply(text: text))
                    sent += 1
                }
                try await Task.sleep(for: .seconds(3600))
            }
            let service = VarlinkService(info: VarlinkServiceInfo(vendor: "test", product: "bounds", version: "1", url: "https://example.org"), interfaces: [interface])
            server = VarlinkServer(service: service, configuration: configuration(path), logger: logger)
        }

        deinit { try? FileManager.default.removeItem(atPath: directory) }

        func run<R: Sendable>(_ body: @Sendable () async throws -> R) async throws -> R {
            let server = self.server
            defer { gate.publish(true) }
            return try await whileRunning("the server's run()", { try await server.run() }) { _ in
                _ = try await BoundedTask { await server.waitUntilListening() }.value("the server's start")
                let result = try await body()
                gate.publish(true)
                return result
            }
        }

        /// The most the server held queued over 100 ms: a bound crossed only for a moment fails too.
        func mostQueuedBytes() async throws -> Int {
            var most = 0
            for _ in 0..<50 {
                most = max(most, server.statistics.queuedBytes)
                try await Task.sleep(for: .milliseconds(2))
            }
            return most
        }
    }

    struct EchoParameters: Codable, Sendable { var pad: String? }
    struct StreamReply: Codable, Sendable { var text: String }

    static func call(_ method: String, more: Bool = false, pad: Int = 0) -> [UInt8] {
        var call: [String: Any] = ["method": "\(interfaceName).\(method)"]
        if more { call["more"] = true }
        if pad > 0 { call["parameters"] = ["pad": String(repeating: "p", count: pad)] }
        return Array(try! JSONSerialization.data(withJSONObject: call)) + [0]
    }

    /// A client that sends a `Hold` call and `calls` ~4 KiB `Echo` calls behind it, on a thread of
    /// its own since its writes block once the server stops reading. True when every write went
    /// through, false when the server closed the connection instead of pushing back.
    static func holdThenEcho(_ calls: Int, on socket: RawSocket) -> BoundedTask<Bool> {
        BoundedTask {
            try await onDedicatedThread {
                do {
                    try socket.send(call("Hold"))
                    for _ in 0..<calls { try socket.send(call("Echo", pad: 4000)) }
                    return true
                } catch {
                    return false
                }
            }
        }
    }

    static func bounded(_ path: String) -> VarlinkServer.Configuration {
        VarlinkServer.Configuration(listen: .path(path), maxQueuedCalls: 128, maxQueuedBytes: 64 * 1024, maxQueuedBytesPerUser: 1024 * 1024, floodError: floodError)
    }

    /// 400 calls of ~4 KiB pipelined behind one that waits: far more than the queue's 64 KiB
    /// and 128 calls, and more than the kernel's socket buffers. The server holds no more than
    /// its bound while the client's writes block; once the first call is answered, every call is
    /// answered, in order, on the same connection.
    @Test func pipelinedCallsBeyondTheBoundsWaitInsteadOfClosing() async throws {
        let fixture = try Fixture(configuration: Self.bounded)
        try await fixture.run {
            let socket = try RawSocket(path: fixture.path)
            let calls = 400
            let writer = Self.holdThenEcho(calls, on: socket)
            try await waitUntil("the server has queued the calls it may hold") {
                fixture.server.statistics.queuedBytes >= 48 * 1024
            }
            // Everything the client can put in the kernel's buffers and the server's queue is
            // there by now; the rest waits in the client's blocked write.
            let most = try await fixture.mostQueuedBytes()
            #expect(most <= 64 * 1024, "the server held \(most) bytes of queued calls, past its bound of 64 KiB")
            #expect(!writer.hasEnded, "all \(calls) calls (1.6 MB) were taken while the first was still running: nothing pushed back")
            fixture.gate.publish(true)
            let replies = try await onDedicatedThread { socket.receive(count: calls + 1, timeout: hangGuard) }
            #expect(try await writer.value("the client's writes"), "the server closed the connection instead of pushing back")
            #expect(replies.count == calls + 1, "\(replies.count) of \(calls + 1) replies before the connection ended")
            #expect(replies.allSatisfy { !$0.contains("\"error\"") }, "an error reply: \(replies.first { $0.contains("\"error\"") } ?? "")")
            #expect(fixture.server.statistics.queuedBytes == 0)
        }
    }

    /// Calls pipelined behind a stream never run; past the bounds the client gets the
    /// configured error, then end-of-file, and its slot is free.
    @Test func callsQueuedBehindAStreamGetAnErrorBeforeTheClose() async throws {
        let fixture = try Fixture(configuration: Self.bounded)
        try await fixture.run {
            let socket = try RawSocket(path: fixture.path)
            _ = try await onDedicatedThread {
                // The writes stop at the first that fails: the server closing is what is tested.
                do {
                    try socket.send(Self.call("Stream", more: true))
                    for _ in 0..<300 { try socket.send(Self.call("Echo", pad: 4000)) }
                } catch {}
            }
            let replies = try await onDedicatedThread { socket.receive(count: 10, timeout: hangGuard) }
            #expect(replies.first?.contains("\"continues\":true") == true, "the stream's reply: \(replies)")
            #expect(replies.last?.contains("org.example.bounds.TooManyCalls") == true, "no error before the close: \(replies.suffix(2))")
            #expect(socket.endedByPeer, "the connection stayed open after the error")
            try await waitUntil("the slot is free") { fixture.server.connectionCount == 0 }
            #expect(fixture.server.statistics.queuedBytes == 0)
        }
    }

    /// A stream whose client stops reading is closed once a reply has waited the idle timeout.
    @Test func aStreamWhoseClientStopsReadingIsClosed() async throws {
        let fixture = try Fixture(
            configuration: { path in VarlinkServer.Configuration(listen: .path(path), idleTimeout: .milliseconds(500)) },
            streamReplies: nil, streamReplySize: 16 * 1024
        )
        try await fixture.run {
            let socket = try RawSocket(path: fixture.path)
            try socket.send(Self.call("Stream", more: true))
            try await waitUntil("the server has closed the stream nobody reads") { fixture.server.connectionCount == 0 }
            withExtendedLifetime(socket) {}
        }
    }

    /// The connections of one user share one bound: five connections, each within its own
    /// bound, cannot make the server hold more than the user's.
    @Test func oneUsersConnectionsShareOneBound() async throws {
        let fixture = try Fixture(configuration: { path in
            VarlinkServer.Configuration(listen: .path(path), maxQueuedBytes: 64 * 1024, maxQueuedBytesPerUser: 128 * 1024, floodError: Self.floodError)
        })
        try await fixture.run {
            let sockets = try (0..<5).map { _ in try RawSocket(path: fixture.path) }
            let writers = sockets.map { Self.holdThenEcho(100, on: $0) }
            try await waitUntil("the server has queued what the user may hold") {
                fixture.server.statistics.queuedBytes >= 100 * 1024
            }
            let most = try await fixture.mostQueuedBytes()
            #expect(most <= 128 * 1024, "one user's five connections made the server hold \(most) bytes, past the user's 128 KiB")
            fixture.gate.publish(true)
            for (index, socket) in sockets.enumerated() {
                let replies = try await onDedicatedThread { socket.receive(count: 101, timeout: hangGuard) }
                #expect(replies.count == 101, "connection \(index): \(replies.count) of 101 replies")
            }
            for writer in writers { #expect(try await writer.value("a client's writes")) }
        }
    }

    /// One line per user per interval, with the count refused meanwhile.
    @Test func refusalsAreLoggedOncePerUserPerInterval() {
        var log = RefusalLog(interval: .seconds(10))
        let start = ContinuousClock.now
        #expect(log.refused(65534, at: start) == 0)
        for second in 1...9 { #expect(log.refused(65534, at: start + .seconds(second)) == nil) }
        #expect(log.refused(1000, at: start + .seconds(9)) == 0, "another user has a line of its own")
        #expect(log.refused(65534, at: start + .seconds(10)) == 9, "the next line counts the refusals not logged")
        #expect(log.refused(65534, at: start + .seconds(30)) == 0)
    }
}

/// `ListItems` sends each stored payload's bytes as they are: no decode and encode that would
/// reorder keys, rewrite numbers or change escapes, and anything that is not one JSON object is
/// wrapped instead of spliced into the reply.
@Suite("ListItems payload bytes", .timeLimit(.minutes(1)))
struct ListItemsPayloadTests {
    @Test func payloadsTravelAsStoredAndTheReplyIsValidJSON() async throws {
        let exact = #"{"z":1.50,"a":"caf\u00e9 \/ é","n":[1e2,-0.0],"nested":{"b":true,"a":null}}"#
        let items = [
            FeedItem(id: "3", payload: Data(exact.utf8)),
            FeedItem(id: "2\"\n", payload: Data(#"["not","an","object"]"#.utf8)),
            FeedItem(id: "1", payload: Data(#"{"broken": "#.utf8)),
        ]
        let handler = FakeHandler(rawItems: items)
        try await withControlServer(handler: handler) { path in
            let socket = try RawSocket(path: path)
            try socket.send(Array(#"{"method":"io.syncd.ListItems","parameters":{"feed":"raw","limit":10}}"#.utf8) + [0])
            let replies = try await onDedicatedThread { socket.receive(count: 1, timeout: hangGuard) }
            let reply = try #require(replies.first)
            #expect(reply.contains(#""payload":"# + exact), "the stored bytes are not in the reply: \(reply)")
            // Python's json module, an independent reader, accepts the reply and sees the items.
            let checked = try await runCommand(["/usr/bin/python3", "-c", """
                import json, sys
                reply = json.loads(sys.stdin.read())
                items = reply["parameters"]["items"]
                print(items[0]["payload"]["a"], items[0]["payload"]["z"], json.dumps(items[1]["id"]), items[1]["payload"]["raw"], items[2]["payload"]["raw"], items[0]["summary"])
                """], input: reply)
            #expect(checked.trimmingCharacters(in: .newlines) == #"café / é 1.5 "2\"\n" ["not","an","object"] {"broken":  3"#)
            let page = try await SyncControlClient(socketPath: path).items(feed: "raw")
            #expect(page.items.map(\.id) == ["3", "2\"\n", "1"])
            #expect(page.items[0].payload["nested"]?["b"] == true)
        }
    }
}
