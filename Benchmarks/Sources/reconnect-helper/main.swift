// The two ends of the ReconnectLatency rig, each run inside a network namespace of the rig with
// `ip netns exec`, spoken to in lines over stdin/stdout (every instant is CLOCK_MONOTONIC in ns,
// one time line for all processes):
//
//   reconnect-helper server HOST PORT
//     DemoFeedServer (with SyncdTesting's fault injection) bound to HOST:PORT (the peer address in the server namespace), feed "live".
//     -> "listening PORT"
//     "stall"            -> "ok"          the next newer request stalls (held, never answered)
//     "stalled"          -> "stalled N"   once a request is being held
//     "wait-request T"   -> "request NS KIND QUERY" for the first request that arrived after T
//                           (server-side arrival, `requests(feed:)`), or "timeout"
//
//   reconnect-helper agent URL SETTLE_MS STORE_DIR
//     syncd's stack in the client namespace: NetlinkMonitor (this namespace), one verdict stream
//     per feed host, SyncCoordinator (reconnect spread zero), HTTPFeedSource, SQLiteFeedStore.
//     -> "ready" once the first load is stored
//     events: "verdict NS online|offline" (a second consumer of the same verdicts),
//             "state NS off=0|1 paused=0|1 newer=idle|loading|loaded|failed" on every FeedState change
//     "refresh"          -> "refreshed"
//
// Both exit when stdin closes.

import ConnectivityPolicy
import DemoFeedServer
import Foundation
import HTTPFeedSource
import Logging
import NetlinkMonitor
import SyncBenchmarkSupport
import SyncCoordinator
import SyncCore
import SyncStore
import SyncdTesting

/// Lines from stdin, read on a thread of their own.
func stdinLines() -> AsyncStream<String> {
    let (stream, continuation) = AsyncStream<String>.makeStream()
    Thread {
        while let line = readLine() { continuation.yield(line) }
        continuation.finish()
    }.start()
    return stream
}

/// With RECONNECT_DEBUG set, both helpers log at debug level to stderr, each line stamped with
/// CLOCK_MONOTONIC ns so it lines up with the rig's instants.
struct StampedLogHandler: LogHandler {
    var logLevel: Logger.Level = .debug
    var metadata: Logger.Metadata = [:]
    let label: String
    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }
    func log(event: LogEvent) {
        let all = metadata.merging(event.metadata ?? [:]) { $1 }
        let text = all.isEmpty ? "" : " " + all.map { "\($0)=\($1)" }.sorted().joined(separator: " ")
        FileHandle.standardError.write(Data("debug \(Monotonic.now()) [\(label)] \(event.message)\(text)\n".utf8))
    }
}

let debugLogging = ProcessInfo.processInfo.environment["RECONNECT_DEBUG"] != nil
if debugLogging {
    LoggingSystem.bootstrap { StampedLogHandler(label: $0) }
}
let helperLogLevel: Logger.Level = debugLogging ? .debug : .warning

func emit(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

func runServer(host: String, port: Int) async throws {
    var configuration = DemoFeedServer.Configuration()
    configuration.host = host
    configuration.port = port
    configuration.feeds = [FeedDefinition(name: "live", initialCount: 200, itemsPerSecond: 0)]
    var logger = Logger(label: "reconnect-server")
    logger.logLevel = helperLogLevel
    let server = try DemoFeedServer(configuration: configuration, faults: .init(stallLimit: .seconds(3)), logger: logger)
    let bound = try await server.start()
    emit("listening \(bound)")
    for await command in stdinLines() {
        let parts = command.split(separator: " ").map(String.init)
        switch parts.first {
        case "stall":
            try await server.scriptFault(ScriptedFault(.stall(.headers), count: 1, feed: "live", kind: .newer))
            emit("ok")
        case "stalled":
            let deadline = ContinuousClock.now + .seconds(10)
            var count = await server.stalledRequestCount()
            while count == 0 && ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(1))
                count = await server.stalledRequestCount()
            }
            emit("stalled \(count)")
        case "wait-request":
            let after = Int64(parts.count > 1 ? parts[1] : "") ?? 0
            let deadline = ContinuousClock.now + .seconds(30)
            var found: String?
            // Bounded poll of the request log: the stamp is the server's own arrival time, the
            // poll only decides when we learn it.
            while found == nil && ContinuousClock.now < deadline {
                for record in await server.requests(feed: "live").reversed() {
                    let at = Monotonic.nanoseconds(of: record.receivedAt)
                    if at <= after { break }
                    found = "request \(at) \(record.kind.rawValue) \(record.query)"
                }
                if found == nil { try await Task.sleep(for: .microseconds(500)) }
            }
            // The first after `after`: the scan above walks newest first, so re-scan oldest first.
            if found != nil {
                for record in await server.requests(feed: "live") {
                    let at = Monotonic.nanoseconds(of: record.receivedAt)
                    if at > after {
                        found = "request \(at) \(record.kind.rawValue) \(record.query)"
                        break
                    }
                }
            }
            emit(found ?? "timeout")
        default:
            emit("error unknown command '\(command)'")
        }
    }
    await server.stop()
}

func describe(_ load: LoadState) -> String {
    switch load {
    case .idle: "idle"
    case .loading: "loading"
    case .loaded: "loaded"
    case .failed: "failed"
    }
}

func runAgent(url: String, settle: Duration, directory: String) async throws {
    var logger = Logger(label: "reconnect-agent")
    logger.logLevel = helperLogLevel
    let monitor = NetlinkMonitor(configuration: .init(), logger: logger)
    try await monitor.start()
    guard let feedURL = URL(string: url), let host = feedURL.host, let address = IPAddress(host) else {
        throw SyncRigError("agent: the feed URL needs a literal IP host")
    }
    let destination = Destination.addresses([address])
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    let store = try SQLiteFeedStore(path: directory + "/agent.sqlite")
    let client = HTTPFeedClient()
    let source = try HTTPFeedSource(configuration: .init(url: feedURL, requestTimeout: .seconds(10)), client: client, logger: logger)
    let sync = SyncConfiguration(reconnectSpread: .zero)
    let coordinator = SyncCoordinator(store: store, configuration: sync, logger: logger)
    // As syncd wires it: the feed follows a verdict stream of its own.
    try await coordinator.addFeed("live", source: source, verdicts: ConnectivityMonitor.verdicts(from: monitor, for: destination, settle: settle))
    let stamps = Task {
        for await verdict in ConnectivityMonitor.verdicts(from: monitor, for: destination, settle: settle) {
            emit("verdict \(Monotonic.now()) \(verdict.isOnline ? "online" : "offline")")
        }
    }
    let (ready, readyContinuation) = AsyncStream<Void>.makeStream()
    let states = Task {
        var announced = false
        for await state in await coordinator.updates() {
            let now = Monotonic.now()
            emit("state \(now) off=\(state.isOffline ? 1 : 0) paused=\(state.isPaused ? 1 : 0) newer=\(describe(state.newer.load))")
            if !announced && state.hasLoaded && !state.isPaused && !state.initial.load.isLoading {
                announced = true
                readyContinuation.yield()
                readyContinuation.finish()
            }
        }
    }
    try await coordinator.start()
    for await _ in ready { break }
    emit("ready")
    for await command in stdinLines() {
        switch command {
        case "refresh":
            await coordinator.refresh()
            emit("refreshed")
        default:
            emit("error unknown command '\(command)'")
        }
    }
    await coordinator.stop()
    stamps.cancel()
    states.cancel()
    await monitor.stop()
    try? await client.shutdown()
}

/// Diagnosis (not part of the benchmark): a request the server stalls is cancelled, as going
/// offline cancels it, and the next request to the same server is timed.
func runCancelProbe(url: String) async throws {
    var logger = Logger(label: "cancel-probe")
    logger.logLevel = helperLogLevel
    let client = HTTPFeedClient()
    let source = try HTTPFeedSource(configuration: .init(url: URL(string: url)!, requestTimeout: .seconds(10)), client: client, logger: logger)
    for round in 1...1 {
        let stalled = Task { try await source.fetchInitial() }
        try await Task.sleep(for: .milliseconds(200))
        stalled.cancel()
        let cancelledAt = ContinuousClock.now
        _ = await stalled.result
        let start = ContinuousClock.now
        let page = try await source.fetchInitial()
        emit("round \(round): cancel took \(start - cancelledAt), next request \(ContinuousClock.now - start) (\(page.items.count) items)")
    }
    try await client.shutdown()
}

let arguments = CommandLine.arguments
do {
    switch arguments.count > 1 ? arguments[1] : "" {
    case "server" where arguments.count == 4:
        try await runServer(host: arguments[2], port: Int(arguments[3]) ?? 0)
    case "idle-floor":
        // The idle-cost benchmark's runtime floor: a Swift process of the same toolchain that only
        // awaits (no timers, no sockets) until stdin closes.
        for await _ in stdinLines() {}
    case "cancel-probe" where arguments.count == 3:
        try await runCancelProbe(url: arguments[2])
    case "agent" where arguments.count == 5:
        try await runAgent(url: arguments[2], settle: .milliseconds(Int(arguments[3]) ?? 0), directory: arguments[4])
    default:
        FileHandle.standardError.write(Data("usage: reconnect-helper server HOST PORT | agent URL SETTLE_MS STORE_DIR\n".utf8))
        exit(2)
    }
} catch {
    FileHandle.standardError.write(Data("reconnect-helper: \(error)\n".utf8))
    exit(1)
}
