import TestSupport
import Foundation
import SyncControl
import Synchronization

/// The kinds of abuse the control socket gets, each a number of seeded cases. A case returns
/// the problems it found (empty when syncd behaved).
enum FuzzPhase: String, CaseIterable, Sendable {
    case randomBytes = "random bytes"
    case truncatedJSON = "truncated JSON"
    case wrongTypes = "wrong types"
    case unknownMethods = "unknown methods"
    case oversized = "oversized messages"
    case hangUps = "hang-ups mid-call"
    case halfClose = "half-closed callers"
    case flood = "connection flood"

    var caseCount: Int {
        switch self {
        case .randomBytes: 40
        case .truncatedJSON: 30
        case .wrongTypes: 60
        case .unknownMethods: 30
        case .oversized: 8
        case .hangUps: 40
        case .halfClose: 12
        case .flood: 0
        }
    }

    /// Replies a fuzzed call may legitimately get.
    static let acceptableErrors: Set<String> = [
        "org.varlink.service.InvalidParameter", "org.varlink.service.MethodNotFound",
        "org.varlink.service.InterfaceNotFound", "org.varlink.service.ExpectedMore",
        "org.varlink.service.PermissionDenied", "org.varlink.service.MethodNotImplemented",
        "io.syncd.FeedNotFound", "io.syncd.InvalidCursor", "io.syncd.NotReady",
    ]

    static let invalidParameter = "org.varlink.service.InvalidParameter"

    func run(socket: String, rng: inout SplitMix64) -> [String] {
        do {
            switch self {
            case .randomBytes: return try randomBytes(socket, &rng)
            case .truncatedJSON: return try truncated(socket, &rng)
            case .wrongTypes: return try wrongTypes(socket, &rng)
            case .unknownMethods: return try unknownMethod(socket, &rng)
            case .oversized: return try oversized(socket, &rng)
            case .hangUps: return try hangUp(socket, &rng)
            case .halfClose: return try halfClose(socket, &rng)
            case .flood: return []
            }
        } catch {
            return ["\(error)"]
        }
    }

    // MARK: Cases

    /// Random bytes, NULs included: every NUL ends a message, and each must get an
    /// InvalidParameter error; the connection then still answers a good call.
    private func randomBytes(_ socket: String, _ rng: inout SplitMix64) throws -> [String] {
        var bytes = (0..<rng.int(in: 1...4096)).map { _ in UInt8.random(in: 0...255, using: &rng) }
        if rng.chance(0.5) {
            // Mostly printable, JSON-ish noise, which gets further into the parser.
            let alphabet = Array(#"{}[]":,.-+eE0123456789 truefalsnl\u"#.utf8) + [0]
            bytes = bytes.map { _ in rng.pick(alphabet) }
        }
        bytes.append(0)
        let messages = bytes.filter { $0 == 0 }.count
        let connection = try RawSocket(path: socket)
        var problems: [String] = []
        // Sent in batches of at most 64 messages, each batch's replies read before the next:
        // past 128 unanswered calls the server closes the connection as a flood (its pipelining
        // limit, ConnectionLifecycle.maxQueuedCalls), which a 4 KiB burst of NULs can reach when
        // the server is busy with the other cases.
        var index = 0
        var start = 0
        while start < bytes.count {
            var end = start
            var inBatch = 0
            while end < bytes.count, inBatch < 64 {
                if bytes[end] == 0 { inBatch += 1 }
                end += 1
            }
            try connection.send(Array(bytes[start..<end]))
            for _ in 0..<inBatch {
                let read = connection.read()
                guard case .message(let reply) = read, let parsed = RawReply(reply) else {
                    return ["message \(index + 1) of \(messages) got no reply: \(read) (sent \(bytes.count) bytes)"]
                }
                if parsed.error != Self.invalidParameter { problems.append("garbage answered with \(parsed)") }
                index += 1
            }
            start = end
        }
        problems += try expectGoodCall(on: connection)
        return problems
    }

    /// A valid call cut short: with its NUL it is an error; without, when the caller half-closes,
    /// it is dropped silently and the connection ends.
    private func truncated(_ socket: String, _ rng: inout SplitMix64) throws -> [String] {
        let call = rng.pick(Self.goodCalls)
        let cut = Array(call.utf8.prefix(rng.int(in: 1...(call.utf8.count - 1))))
        let connection = try RawSocket(path: socket)
        if rng.chance(0.6) {
            try connection.send(cut + [0])
            let read = connection.read()
            guard case .message(let reply) = read, let parsed = RawReply(reply) else { return ["truncated call got no reply: \(read)"] }
            if parsed.error != Self.invalidParameter { return ["truncated call \(String(decoding: cut, as: UTF8.self)) answered with \(parsed)"] }
            return try expectGoodCall(on: connection)
        }
        try connection.send(cut)
        connection.shutdownWrite()
        let (messages, end) = connection.drain()
        var problems: [String] = []
        if !messages.isEmpty { problems.append("an unterminated message was answered: \(messages.map { String(decoding: $0, as: UTF8.self) })") }
        if end == .timeout { problems.append("connection not closed after the caller half-closed with an unterminated message") }
        return problems
    }

    /// Well-formed JSON whose shape is wrong, plus random parameters for every method: always
    /// exactly one reply, success or a known error, never an internal error or silence.
    private func wrongTypes(_ socket: String, _ rng: inout SplitMix64) throws -> [String] {
        let connection = try RawSocket(path: socket)
        var problems: [String] = []
        for _ in 0..<rng.int(in: 1...6) {
            let (message, expected) = rng.chance(0.35) ? rng.pick(Self.wrongShapes) : Self.randomCall(&rng)
            try connection.sendMessage(message)
            let read = connection.read()
            guard case .message(let reply) = read, let parsed = RawReply(reply) else {
                problems.append("\(message.prefix(300)) got no reply: \(read)")
                return problems
            }
            if let expected {
                if parsed.error != expected.error || (expected.parameter != nil && parsed.parameters["parameter"] as? String != expected.parameter) {
                    problems.append("\(message.prefix(300)) answered \(parsed), expected \(expected.error) \(expected.parameter ?? "")")
                }
            } else if let error = parsed.error, !Self.acceptableErrors.contains(error) {
                problems.append("\(message.prefix(300)) answered \(parsed)")
            }
            if parsed.continues { problems.append("\(message.prefix(200)) started a stream without more") }
        }
        return problems + (try expectGoodCall(on: connection))
    }

    private func unknownMethod(_ socket: String, _ rng: inout SplitMix64) throws -> [String] {
        let connection = try RawSocket(path: socket)
        let member = "X" + String((0..<rng.int(in: 1...30)).map { _ in rng.pick(Array("abcdefghijklmnopqrstuvwxyzABC0123456789")) })
        let (method, expected): (String, String) = switch rng.int(in: 0...4) {
        case 0: ("io.syncd.\(member)", "org.varlink.service.MethodNotFound")
        case 1: ("org.varlink.service.\(member)", "org.varlink.service.MethodNotFound")
        case 2: ("com.example\(rng.int(in: 0...999)).\(member)", "org.varlink.service.InterfaceNotFound")
        case 3: ("io.syncd.\(member.lowercased())", Self.invalidParameter)
        default: (String(repeating: "a.", count: rng.int(in: 100...400)) + member, Self.invalidParameter)
        }
        let message = try Self.json(["method": method, "parameters": ["feed": "home"]])
        try connection.sendMessage(message)
        let read = connection.read()
        guard case .message(let reply) = read, let parsed = RawReply(reply) else { return ["\(method.prefix(80)) got no reply: \(read)"] }
        // A very long name is either invalid (over 255 bytes) or simply unknown.
        let acceptable = method.utf8.count > 255 ? [Self.invalidParameter] : [expected, "org.varlink.service.InterfaceNotFound"]
        guard let error = parsed.error, acceptable.contains(error) else { return ["\(method.prefix(80)) answered \(parsed), expected \(expected)"] }
        return try expectGoodCall(on: connection)
    }

    /// Beyond the 64 KiB limit: one InvalidParameter error, then the connection is closed.
    private func oversized(_ socket: String, _ rng: inout SplitMix64) throws -> [String] {
        let size = rng.pick([64 * 1024 + 1, 100_000, 1 << 20, 4 << 20])
        let body: [UInt8]
        switch rng.int(in: 0...2) {
        case 0: body = Array(repeating: UInt8(ascii: "a"), count: size)
        case 1: body = Array(("{\"method\":\"io.syncd.GetStatus\",\"parameters\":{\"pad\":\"" + String(repeating: "x", count: size) + "\"}}").utf8) + [0]
        default: body = (0..<size).map { _ in UInt8.random(in: 1...255, using: &rng) }
        }
        let connection = try RawSocket(path: socket)
        // The server stops reading at the limit and closes: sending may fail half-way.
        try? connection.send(body)
        let (messages, end) = connection.drain()
        var problems: [String] = []
        guard let first = messages.first.flatMap(RawReply.init) else {
            return ["a \(size)-byte message got no error reply (connection \(end))"]
        }
        if first.error != Self.invalidParameter { problems.append("oversized message answered with \(first)") }
        if messages.count > 1 { problems.append("\(messages.count) replies to one oversized message") }
        if end == .timeout { problems.append("the connection stayed open after an oversized message") }
        return problems
    }

    /// Callers that go away before their reply, or in the middle of a stream.
    private func hangUp(_ socket: String, _ rng: inout SplitMix64) throws -> [String] {
        let connection = try RawSocket(path: socket)
        switch rng.int(in: 0...3) {
        case 0:
            try connection.sendMessage(rng.pick(Self.goodCalls))
        case 1:
            try connection.sendMessage(#"{"method":"io.syncd.ListItems","parameters":{"feed":"home","limit":500}}"#)
        case 2:
            try connection.sendMessage(#"{"method":"io.syncd.Watch","more":true}"#)
            guard case .message = connection.read() else { return ["Watch sent nothing"] }
        default:
            for _ in 0..<20 { try connection.sendMessage(rng.pick(Self.goodCalls)) }
        }
        return []  // closed by deinit, mid-call
    }

    /// A caller that sends its call and half-closes still gets its reply, then EOF.
    private func halfClose(_ socket: String, _ rng: inout SplitMix64) throws -> [String] {
        let connection = try RawSocket(path: socket)
        let count = rng.int(in: 1...3)
        for _ in 0..<count { try connection.sendMessage(#"{"method":"org.varlink.service.GetInfo"}"#) }
        connection.shutdownWrite()
        let (messages, end) = connection.drain()
        var problems: [String] = []
        if messages.count != count { problems.append("\(count) calls then half-close got \(messages.count) replies") }
        for message in messages where RawReply(message)?.parameters["product"] as? String != "syncd" {
            problems.append("half-closed GetInfo answered \(String(decoding: message, as: UTF8.self))")
        }
        if end == .timeout { problems.append("connection not closed after the half-closed caller was answered") }
        return problems
    }

    // MARK: Helpers

    private func expectGoodCall(on connection: RawSocket) throws -> [String] {
        try connection.sendMessage(#"{"method":"org.varlink.service.GetInfo"}"#)
        let read = connection.read()
        guard case .message(let reply) = read, let parsed = RawReply(reply) else {
            return ["a good call after the bad ones got no reply: \(read)"]
        }
        if parsed.error != nil || parsed.parameters["product"] as? String != "syncd" {
            return ["a good call after the bad ones answered \(parsed)"]
        }
        return []
    }

    static let goodCalls = [
        #"{"method":"io.syncd.GetStatus"}"#,
        #"{"method":"io.syncd.ListItems","parameters":{"feed":"home","limit":5}}"#,
        #"{"method":"org.varlink.service.GetInfo"}"#,
        #"{"method":"org.varlink.service.GetInterfaceDescription","parameters":{"interface":"io.syncd"}}"#,
    ]

    struct Expected {
        var error: String
        var parameter: String?
    }

    /// Messages with a known answer.
    static let wrongShapes: [(String, Expected?)] = [
        (#"{"method":"io.syncd.ListItems","parameters":{"feed":42}}"#, Expected(error: invalidParameter, parameter: "feed")),
        (#"{"method":"io.syncd.ListItems","parameters":{}}"#, Expected(error: invalidParameter, parameter: "feed")),
        (#"{"method":"io.syncd.ListItems","parameters":{"feed":"home","limit":"ten"}}"#, Expected(error: invalidParameter, parameter: "limit")),
        (#"{"method":"io.syncd.ListItems","parameters":{"feed":"home","limit":0}}"#, Expected(error: invalidParameter, parameter: "limit")),
        (#"{"method":"io.syncd.ListItems","parameters":{"feed":"home","limit":-3}}"#, Expected(error: invalidParameter, parameter: "limit")),
        (#"{"method":"io.syncd.ListItems","parameters":{"feed":"home","limit":1e300}}"#, Expected(error: invalidParameter, parameter: nil)),
        (#"{"method":"io.syncd.ListItems","parameters":{"feed":"home","limit":99999999999999999999999}}"#, Expected(error: invalidParameter, parameter: nil)),
        (#"{"method":"io.syncd.ListItems","parameters":{"feed":"home","after":"no-such-id"}}"#, Expected(error: "io.syncd.InvalidCursor", parameter: nil)),
        (#"{"method":"io.syncd.ListItems","parameters":{"feed":"nope"}}"#, Expected(error: "io.syncd.FeedNotFound", parameter: nil)),
        (#"{"method":"io.syncd.ListItems","parameters":{"feed":"home","after":7}}"#, Expected(error: invalidParameter, parameter: "after")),
        (#"{"method":"io.syncd.GetStatus","parameters":[1,2]}"#, Expected(error: invalidParameter, parameter: "parameters")),
        (#"{"method":"io.syncd.GetStatus","parameters":"x"}"#, Expected(error: invalidParameter, parameter: "parameters")),
        (#"{"method":"io.syncd.GetStatus","more":1}"#, Expected(error: invalidParameter, parameter: "more")),
        (#"{"method":"io.syncd.GetStatus","oneway":"yes"}"#, Expected(error: invalidParameter, parameter: "oneway")),
        (#"{"method":"io.syncd.GetStatus","upgrade":true}"#, Expected(error: invalidParameter, parameter: "upgrade")),
        (#"{"method":["io.syncd.GetStatus"]}"#, Expected(error: invalidParameter, parameter: "method")),
        (#"{"method":null}"#, Expected(error: invalidParameter, parameter: "method")),
        (#"{"method":""}"#, Expected(error: invalidParameter, parameter: "method")),
        (#"{"method":".GetStatus"}"#, Expected(error: invalidParameter, parameter: "method")),
        (#"{"method":"io.syncd."}"#, Expected(error: invalidParameter, parameter: "method")),
        (#"{"method":"io.syncd.Refresh","parameters":{"feed":17}}"#, Expected(error: invalidParameter, parameter: "feed")),
        (#"{"method":"io.syncd.Refresh","parameters":{"feed":"nope"}}"#, Expected(error: "io.syncd.FeedNotFound", parameter: nil)),
        (#"{"method":"io.syncd.LoadOlder","parameters":{"feed":[]}}"#, Expected(error: invalidParameter, parameter: "feed")),
        (#"{"method":"io.syncd.Retry","parameters":{"feed":{"a":1}}}"#, Expected(error: invalidParameter, parameter: "feed")),
        (#"{"method":"io.syncd.Watch"}"#, Expected(error: "org.varlink.service.ExpectedMore", parameter: nil)),
        (#"{"method":"org.varlink.service.GetInterfaceDescription","parameters":{"interface":5}}"#, Expected(error: invalidParameter, parameter: "interface")),
        (#"{"method":"org.varlink.service.GetInterfaceDescription","parameters":{"interface":"com.example.nope"}}"#, Expected(error: "org.varlink.service.InterfaceNotFound", parameter: nil)),
        // Deep nesting inside an otherwise valid call, well within the size limit.
        ("{\"method\":\"io.syncd.GetStatus\",\"parameters\":{\"x\":" + String(repeating: "[", count: 20_000) + String(repeating: "]", count: 20_000) + "}}", nil),
        ("{\"method\":\"io.syncd.GetStatus\",\"parameters\":{\"x\":" + String(repeating: "{\"a\":", count: 5_000) + "1" + String(repeating: "}", count: 5_000) + "}}", nil),
        ("{\"method\":\"io.syncd.GetStatus\",\"parameters\":{\"x\":\"\\ud800\\udc00\\u0000\\uffff\"}}", nil),
        ("{\"method\":\"io.syncd.GetStatus\",\"parameters\":{\"x\":\"\\ud800\"}}", nil),
        ("{\"method\":\"io.syncd.GetStatus\",\"method\":\"io.syncd.Nope\"}", nil),
    ]

    /// A call to a real method with random flags and random parameters.
    static func randomCall(_ rng: inout SplitMix64) -> (String, Expected?) {
        let methods = [
            "io.syncd.GetStatus", "io.syncd.ListItems", "io.syncd.Refresh", "io.syncd.LoadOlder", "io.syncd.Retry",
            "io.syncd.Watch", "org.varlink.service.GetInfo", "org.varlink.service.GetInterfaceDescription",
        ]
        var object = "{\"method\":\"\(rng.pick(methods))\""
        if rng.chance(0.85) {
            var members: [String] = []
            for _ in 0..<rng.int(in: 0...4) {
                let key = rng.pick(["feed", "limit", "after", "interface", "more", "x", "", "feed"])
                members.append("\(jsonString(key)):\(randomJSON(&rng, depth: 0))")
            }
            object += ",\"parameters\":{\(members.joined(separator: ","))}"
        }
        // Flags that stay within "one reply per call": more only false, oneway never true.
        if rng.chance(0.15) { object += ",\"more\":false" }
        if rng.chance(0.1) { object += ",\"oneway\":\(rng.pick(["false", "0", "\"true\"", "null"]))" }
        if rng.chance(0.1) { object += ",\"extra\":\(randomJSON(&rng, depth: 0))" }
        return (object + "}", nil)
    }

    static func randomJSON(_ rng: inout SplitMix64, depth: Int) -> String {
        switch rng.int(in: 0...(depth > 3 ? 6 : 8)) {
        case 0: return "null"
        case 1: return rng.chance(0.5) ? "true" : "false"
        case 2: return String(rng.pick([0, 1, -1, 5, 500, 501, Int.max, Int.min, Int(Int32.max), rng.int(in: -1000...1000)]))
        case 3: return rng.pick(["1.5", "-0.0", "1e309", "-1e-320", "123456789012345678901234567890"])
        case 4: return jsonString(rng.pick(["home", "", "nope", "0000000001", "../../etc/passwd", "\u{0}", "\u{1F389}\u{FFFF}", String(repeating: "z", count: 5000)]))
        case 5, 6: return jsonString(String((0..<rng.int(in: 0...40)).map { _ in Character(Unicode.Scalar(UInt8.random(in: 1...127, using: &rng))) }))
        case 7: return "[" + (0..<rng.int(in: 0...4)).map { _ in randomJSON(&rng, depth: depth + 1) }.joined(separator: ",") + "]"
        default: return "{" + (0..<rng.int(in: 0...4)).map { _ in "\(jsonString(rng.pick(["feed", "a", "limit"]))):\(randomJSON(&rng, depth: depth + 1))" }.joined(separator: ",") + "}"
        }
    }

    static func jsonString(_ text: String) -> String {
        let data = (try? JSONSerialization.data(withJSONObject: [text], options: [.fragmentsAllowed])) ?? Data("[\"\"]".utf8)
        return String(String(decoding: data, as: UTF8.self).dropFirst().dropLast())
    }

    static func json(_ object: [String: Any]) throws -> String {
        String(decoding: try JSONSerialization.data(withJSONObject: object), as: UTF8.self)
    }
}

/// A well-behaved `SyncControlClient` polling syncd all along, its successes and failures kept
/// per phase of the fuzzing.
final class Bystander: Sendable {
    private let client: SyncControlClient
    private let feed: String
    private let state = Mutex(State())

    private struct State {
        var phase = "setup"
        var running = true
        var successes: [String: Int] = [:]
        var failures: [(phase: String, error: String)] = []
        var task: BoundedTask<Void>?
    }

    struct Report {
        var successes: [String: Int]
        var failuresOutsideFlood: [String]
        var floodFailures: Int
        var totalSuccessesOutsideFlood: Int
        var summary: String {
            "successes by phase \(successes.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }.joined(separator: ", ")); failures during the flood \(floodFailures); elsewhere \(failuresOutsideFlood.count)"
        }
    }

    init(client: SyncControlClient, feed: String) {
        self.client = client
        self.feed = feed
    }

    /// Phases in which every connection slot may be taken, so failing to connect is expected.
    static let tolerated: Set<String> = [FuzzPhase.flood.rawValue, "recovering"]

    func enter(_ phase: String) { state.withLock { $0.phase = phase } }

    /// Starts polling: `GetStatus` and `ListItems` over and over, each call bounded by the hang
    /// guard (the client has none), so a syncd that stops answering is a failure of the phase,
    /// not a poll that never ends.
    func start() {
        let client = self.client, feed = self.feed
        let task = BoundedTask { [self] in
            while state.withLock({ $0.running }) {
                let phase = state.withLock { $0.phase }
                do {
                    _ = try await withHangGuard("GetStatus") { try await client.status() }
                    _ = try await withHangGuard("ListItems") { try await client.items(feed: feed, limit: 5) }
                    state.withLock { $0.successes[phase, default: 0] += 1 }
                } catch {
                    // Ended by stop(): a call it cut short is no failure of syncd.
                    guard state.withLock({ $0.running }) else { break }
                    // A failure belongs to the phase it started in, or the one it ended in.
                    let now = state.withLock { $0.phase }
                    let blamed = Self.tolerated.contains(now) ? now : phase
                    state.withLock { $0.failures.append((blamed, "\(error)")) }
                }
                try? await Task.sleep(for: .milliseconds(20))
            }
        }
        state.withLock { $0.task = task }
    }

    /// Stops polling, cutting short a call in flight, without waiting (cleanup after a failure).
    func stop() {
        let task = state.withLock { state in
            state.running = false
            return state.task
        }
        task?.cancel()
    }

    /// Stops polling and waits (bounded) until the polling loop has ended.
    func finish() async throws {
        stop()
        try await state.withLock { $0.task }?.value("the well-behaved client's polling")
    }

    func report() -> Report {
        state.withLock { state in
            let outside = state.failures.filter { !Self.tolerated.contains($0.phase) }.map { "\($0.phase): \($0.error)" }
            return Report(
                successes: state.successes,
                failuresOutsideFlood: outside,
                floodFailures: state.failures.count - outside.count,
                totalSuccessesOutsideFlood: state.successes.filter { !Self.tolerated.contains($0.key) }.values.reduce(0, +)
            )
        }
    }
}
