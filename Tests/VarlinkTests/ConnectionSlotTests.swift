import Foundation
import SyncControl
import TestSupport
import Testing
import Varlink

/// Every way a client can use or abuse a connection ends with its slot given back: the count
/// returns to zero, and the same user is still served afterwards.
@Suite("Connection slots", .enabled(if: Privileges.rootTestsEnabled, Comment(rawValue: Privileges.skipReason)))
struct ConnectionSlotTests {
    /// Opens `count` connections one after another, each following `pattern`, then closes them
    /// (except `idle`, whose connections are held until the server closes them, printing how
    /// many it closed). Every socket has a timeout, so the client cannot hang; the deadline for
    /// the idle closes is far beyond the server's idle timeout (``idleTimeout``).
    static let client = """
        import json, socket, sys, time
        path, pattern, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
        def message(method, **flags):
            call = {"method": method}
            call.update(flags)
            return json.dumps(call).encode() + b"\\0"
        held = []
        for _ in range(count):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(30)
            s.connect(path)
            try:
                if pattern == "oneway-more-then-call":
                    s.sendall(message("io.syncd.Watch", more=True, oneway=True) + message("io.syncd.GetStatus"))
                elif pattern == "more-then-call":
                    s.sendall(message("io.syncd.Watch", more=True) + message("io.syncd.GetStatus"))
                    s.recv(65536)
                elif pattern == "more-half-close":
                    s.sendall(message("io.syncd.Watch", more=True))
                    s.shutdown(socket.SHUT_WR)
                elif pattern == "oneway":
                    s.sendall(message("io.syncd.GetStatus", oneway=True))
                elif pattern == "partial":
                    s.sendall(b'{"method": "io.syncd.GetSta')
            except OSError:
                pass
            if pattern == "idle":
                held.append(s)
            else:
                time.sleep(0.05)
                s.close()
        closed = 0
        deadline = time.monotonic() + 60
        for s in held:
            try:
                s.settimeout(max(0.1, deadline - time.monotonic()))
                if s.recv(1) == b"":
                    closed += 1
            except OSError:
                pass
        print(closed)
        """

    static let patterns = ["oneway-more-then-call", "more-then-call", "more-half-close", "oneway", "partial", "silent", "idle"]

    /// 20 connections: more than a non-root user's share (16 of the default 64), so a leak
    /// locks that user out.
    static let connections = 20

    static func run(pattern: String, path: String, asNobody: Bool) async throws -> String {
        let prefix = asNobody ? ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] : []
        return try await runCommand(prefix + [PermissionTests.python, "-c", client, path, pattern, "\(connections)"])
    }

    /// The server's idle timeout here. The follow-up call's connection must not be closed as
    /// idle before its request arrives, and on a congested machine the test task can resume many
    /// seconds after connecting: so not a second, but long past such a delay.
    static let idleTimeout: Duration = .seconds(10)

    /// Waits (bounded by the hang guard) until the server holds no connection; a server that
    /// notices a hang-up late under load still passes, one that never does fails naming the count.
    static func slotsDrain(_ server: SyncControlServer, after what: String) async throws {
        do {
            try await waitUntil("the server holds no connection after \(what)", interval: .milliseconds(20)) { server.connectionCount == 0 }
        } catch let timedOut as WaitTimedOut {
            throw WaitTimedOut(description: "\(timedOut.description): \(server.connectionCount) connections left behind")
        }
    }

    @Test(.timeLimit(.minutes(5)), arguments: patterns, [false, true])
    func slotsReturnToZero(pattern: String, asNobody: Bool) async throws {
        try Privileges.requireRoot()
        try await withControlServer(idleTimeout: Self.idleTimeout) { path, server in
            let output = try await Self.run(pattern: pattern, path: path, asNobody: asNobody)
            if pattern == "idle" {
                #expect(output.trimmingCharacters(in: .whitespacesAndNewlines) == "\(Self.connections)", "idle connections are closed by the server")
            }
            try await Self.slotsDrain(server, after: "\(pattern) as \(asNobody ? "nobody" : "root")")
            // The same user is still served.
            if asNobody {
                let info = try await PermissionTests.callAsNobody(path, method: "org.varlink.service.GetInfo")
                #expect(info["error"] == nil)
            } else {
                let info = try await VarlinkClient(socketPath: path).call("org.varlink.service.GetInfo")
                #expect(info["product"] == "syncd")
            }
            try await Self.slotsDrain(server, after: "the follow-up call")
        }
    }

    /// `oneway` with `more` is refused with one error naming `oneway`, then the connection ends.
    @Test(.timeLimit(.minutes(1))) func onewayWithMoreIsRejectedAndCloses() async throws {
        try await withControlServer { path in
            try await VarlinkClient(socketPath: path).withConnection { connection in
                try await connection.sendRaw(Array(try VarlinkCall(method: "io.syncd.Watch", oneway: true, more: true).encoded()))
                let reply = try await connection.receive()
                #expect(reply.error == "org.varlink.service.InvalidParameter")
                #expect(reply.parameters["parameter"] == "oneway")
                await #expect(throws: VarlinkProtocolError.connectionClosed) { try await connection.receive() }
            }
        }
    }

    /// A call pipelined behind a running stream does not stop the server from seeing the
    /// hang-up: the stream ends and the slot is free.
    @Test(.timeLimit(.minutes(2))) func hangUpDuringStreamWithQueuedCallFreesTheSlot() async throws {
        let handler = FakeHandler()
        try await withControlServer(handler: handler) { path, server in
            try await VarlinkClient(socketPath: path).withConnection { connection in
                try await connection.sendRaw(Array(try VarlinkCall(method: "io.syncd.Watch", more: true).encoded()))
                _ = try await connection.receive()
                try await connection.sendRaw(Array(try VarlinkCall(method: "io.syncd.GetStatus").encoded()))
            }
            try await Self.slotsDrain(server, after: "the hang-up")
            try await waitUntil("the watch subscriptions ended") { handler.broadcaster.subscriberCount == 0 }
        }
    }
}
