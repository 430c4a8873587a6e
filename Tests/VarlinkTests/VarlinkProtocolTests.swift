import Foundation
import SyncControl
import TestSupport
import Testing
import Varlink
import Logging

@Suite("Varlink protocol", .timeLimit(.minutes(3)))
struct VarlinkProtocolTests {
    @Test func getInfoListsInterfaces() async throws {
        try await withControlServer { path in
            let info = try await VarlinkClient(socketPath: path).call("org.varlink.service.GetInfo")
            #expect(info["product"] == "syncd")
            #expect(info["interfaces"] == ["org.varlink.service", "io.syncd"])
        }
    }

    @Test func interfaceDescriptionIsServedVerbatim() async throws {
        try await withControlServer { path in
            let client = VarlinkClient(socketPath: path)
            let reply = try await client.call("org.varlink.service.GetInterfaceDescription", parameters: ["interface": "io.syncd"])
            #expect(reply["description"]?.stringValue == SyncdInterface.description)
            let own = try await client.call("org.varlink.service.GetInterfaceDescription", parameters: ["interface": "org.varlink.service"])
            #expect(own["description"]?.stringValue?.contains("interface org.varlink.service") == true)
            await #expect(throws: VarlinkError.interfaceNotFound("com.example.nope")) {
                try await client.call("org.varlink.service.GetInterfaceDescription", parameters: ["interface": "com.example.nope"])
            }
        }
    }

    @Test func unknownInterfaceAndMethodGiveStandardErrors() async throws {
        try await withControlServer { path in
            let client = VarlinkClient(socketPath: path)
            await #expect(throws: VarlinkError.interfaceNotFound("com.example")) { try await client.call("com.example.Foo") }
            await #expect(throws: VarlinkError.methodNotFound("io.syncd.Explode")) { try await client.call("io.syncd.Explode") }
        }
    }

    @Test func wrongParameterTypesNameTheParameter() async throws {
        try await withControlServer { path in
            let client = VarlinkClient(socketPath: path)
            await #expect(throws: VarlinkError.invalidParameter("feed")) {
                try await client.call("io.syncd.ListItems", parameters: ["feed": 42])
            }
            await #expect(throws: VarlinkError.invalidParameter("feed")) {
                try await client.call("io.syncd.ListItems", parameters: [:])
            }
            await #expect(throws: VarlinkError.invalidParameter("limit")) {
                try await client.call("io.syncd.ListItems", parameters: ["feed": "home", "limit": 100_000])
            }
        }
    }

    /// Garbage, wrong shapes and bad names each get an error reply, and the same connection
    /// then still answers a good call.
    @Test(arguments: [
        ("{not json", "message is not valid JSON"),
        ("[1,2,3]", "message is not a JSON object"),
        ("\"text\"", "message is not a JSON object"),
        ("{}", "method"),
        ("{\"method\": 7}", "method"),
        ("{\"method\": \"nodot\"}", "method"),
        ("{\"method\": \"io.syncd.lowercase\"}", "method"),
        ("{\"method\": \"io.syncd.GetStatus\", \"parameters\": [1]}", "parameters"),
        ("{\"method\": \"io.syncd.GetStatus\", \"more\": \"yes\"}", "more"),
        ("{\"method\": \"io.syncd.GetStatus\", \"upgrade\": true}", "upgrade"),
        ("\u{FF}\u{FE}", "message is not valid JSON"),
    ])
    func malformedMessagesGetAnErrorAndTheConnectionGoesOn(message: String, parameter: String) async throws {
        try await expectInvalidParameter(message, named: parameter)
    }

    /// A message over the limit costs its connection; other connections never notice.
    @Test func oversizedMessageClosesOnlyItsConnection() async throws {
        try await withControlServer(maxMessageSize: 1024) { path in
            let client = VarlinkClient(socketPath: path)
            try await client.withAnsweredConnection { bystander in
                try await client.withConnection { offender in
                    let huge = "{\"method\":\"io.syncd.GetStatus\",\"parameters\":{\"x\":\"" + String(repeating: "a", count: 4096) + "\"}}"
                    try await offender.sendRaw(Array(huge.utf8))
                    let reply = try await offender.receive()
                    #expect(reply.error == "org.varlink.service.InvalidParameter")
                    await #expect(throws: VarlinkProtocolError.connectionClosed) { try await offender.receive() }
                }
                let info = try await bystander.call("org.varlink.service.GetInfo")
                #expect(info["vendor"] == "syncd")
            }
        }
    }

    @Test func pipelinedCallsAreAnsweredInOrder() async throws {
        try await withControlServer { path in
            try await VarlinkClient(socketPath: path).withConnection { connection in
                var batch: [UInt8] = []
                for feed in ["home", "nope", "home"] {
                    batch += Array(try VarlinkCall(method: "io.syncd.ListItems", parameters: ["feed": .string(feed), "limit": 1]).encoded()) + [0]
                }
                batch.removeLast()
                try await connection.sendRaw(batch)
                let first = try await connection.receive()
                let second = try await connection.receive()
                let third = try await connection.receive()
                #expect(first.error == nil && third.error == nil)
                #expect(second.error == "io.syncd.FeedNotFound")
                #expect(second.parameters["feed"] == "nope")
            }
        }
    }

    @Test func onewayCallsGetNoReply() async throws {
        let handler = FakeHandler()
        try await withControlServer(handler: handler) { path in
            try await VarlinkClient(socketPath: path).withConnection { connection in
                try await connection.sendRaw(Array(try VarlinkCall(method: "io.syncd.Refresh", parameters: ["feed": "home"], oneway: true).encoded()))
                // The next reply on the wire must belong to the next call.
                let info = try await connection.call("org.varlink.service.GetInfo")
                #expect(info["product"] == "syncd")
            }
        }
        #expect(handler.recordedCalls == ["refresh home"])
    }

    @Test func watchWithoutMoreIsExpectedMore() async throws {
        _ = try await withControlServer { path in
            await #expect(throws: VarlinkError.expectedMore) {
                try await VarlinkClient(socketPath: path).call("io.syncd.Watch")
            }
        }
    }

    @Test func watchStreamsChanges() async throws {
        let handler = FakeHandler()
        try await withControlServer(handler: handler) { path in
            var seen: [ControlConnectivitySummary] = []
            try await VarlinkClient(socketPath: path).withConnection { connection in
                try await connection.callMore("io.syncd.Watch") { parameters in
                    let status = try VarlinkCoding.decode(ControlStatus.self, from: parameters["status"]!)
                    seen.append(status.connectivity)
                    if seen.count == 1 { handler.broadcaster.publish(Samples.status(online: false)) }
                    return seen.count < 2
                }
            }
            #expect(seen.map(\.isOnline) == [true, false])
        }
    }

    /// A client that hangs up ends its stream on the server at once (no update needed to notice).
    @Test(.timeLimit(.minutes(1))) func hangingUpEndsTheWatch() async throws {
        let handler = FakeHandler()
        try await withControlServer(handler: handler) { path in
            try await VarlinkClient(socketPath: path).withConnection { connection in
                try await connection.callMore("io.syncd.Watch") { _ in false }
            }
            try await waitUntil("the watch subscription ended") { handler.broadcaster.subscriberCount == 0 }
            #expect(handler.broadcaster.subscriberCount == 0)
        }
    }

    @Test func connectionLimitRefusesExtraClientsAndRecovers() async throws {
        try await withControlServer(maxConnections: 2) { path in
            let client = VarlinkClient(socketPath: path)
            try await client.withAnsweredConnection { _ in
                try await client.withAnsweredConnection { _ in
                    await #expect(throws: (any Error).self) {
                        try await client.call("org.varlink.service.GetInfo")
                    }
                }
            }
            // Slots are given back when the server notices the hang-ups, which can take
            // seconds on a loaded machine. Each try is bounded too, so the wait always ends.
            var info: [String: JSONValue] = [:]
            try await waitUntil("a connection slot is free again") {
                info = (try? await withHangGuard("GetInfo") { try await client.call("org.varlink.service.GetInfo") }) ?? [:]
                return !info.isEmpty
            }
            #expect(info["product"] == "syncd")
        }
    }

    @Test func handlerErrorsBecomeInterfaceErrors() async throws {
        try await withControlServer { path in
            let client = VarlinkClient(socketPath: path)
            await #expect(throws: VarlinkError("io.syncd.NotReady", parameters: ["feed": "fresh", "reason": "first load has not succeeded"])) {
                try await client.call("io.syncd.LoadOlder", parameters: ["feed": "fresh"])
            }
            await #expect(throws: VarlinkError("io.syncd.InternalError", parameters: ["message": "disk on fire"])) {
                try await client.call("io.syncd.Retry", parameters: ["feed": "boom"])
            }
            await #expect(throws: VarlinkError("io.syncd.InvalidCursor", parameters: ["after": "zzz"])) {
                try await client.call("io.syncd.ListItems", parameters: ["feed": "home", "after": "zzz"])
            }
        }
    }

    @Test func staleSocketFileIsReplacedButALiveOneIsNot() async throws {
        let directory = try makeSocketDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/io.syncd"
        // A socket file nobody listens on, as a crash leaves behind.
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(path.utf8) + [0]) }
        let bound = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) } }
        #expect(bound == 0)
        close(fd)

        let service = VarlinkService(info: VarlinkServiceInfo(vendor: "t", product: "t", version: "1", url: "u"), interfaces: [])
        let first = VarlinkServer(service: service, configuration: .init(listen: .path(path)), logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() }))
        // Unstructured and waited for with bounds (see withControlServer): a server that took
        // over the live socket would serve until cancelled, not fail.
        let serving = BoundedTask { try await first.run() }
        defer { serving.cancel() }
        _ = try await BoundedTask { await first.waitUntilListening() }.value("the first server's start")
        _ = try await VarlinkClient(socketPath: path).call("org.varlink.service.GetInfo")
        let second = VarlinkServer(service: service, configuration: .init(listen: .path(path)), logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() }))
        let secondRun = BoundedTask { try await second.run() }
        defer { secondRun.cancel() }
        await #expect(throws: VarlinkSocketError.self) { try await secondRun.value("the second server's run()") }
        serving.cancel()
        try await serving.value("the first server's run()")
        #expect(access(path, F_OK) != 0, "the server removes its socket file when it stops")
    }
}
