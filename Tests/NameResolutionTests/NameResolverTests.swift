import ConnectivityPolicy
import Foundation
import NameResolution
import Synchronization
import TestSupport
import Testing

/// A lookup whose answer the test sets, counting its calls.
final class ScriptedLookup: Sendable {
    let answer = Mutex<Resolution>(.resolved([IPAddress("192.0.2.1")!]))
    let calls = Mutex(0)

    func callAsFunction(_ host: String) -> Resolution {
        calls.withLock { $0 += 1 }
        return answer.withLock { $0 }
    }
}

/// Collects a stream's elements so a test can wait for one, or for the stream's end.
final class Collected: Sendable {
    final class Values: Sendable {
        let list = Mutex<[Resolution]>([])
        let ended = Mutex(false)
        func withLock<T: Sendable>(_ body: (inout [Resolution]) -> T) -> T { list.withLock { body(&$0) } }
    }
    let values = Values()
    private let task: Task<Void, Never>

    init(_ stream: AsyncStream<Resolution>) {
        let values = self.values
        task = Task {
            for await value in stream { values.withLock { $0.append(value) } }
            values.ended.withLock { $0 = true }
        }
    }

    /// Whether the stream has finished (every element it had is in ``values`` by then).
    var ended: Bool { values.ended.withLock { $0 } }

    deinit { task.cancel() }

    /// Waits (at most ``hangGuard``) until `predicate` holds for the values.
    func wait(_ what: String, _ predicate: ([Resolution]) -> Bool, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let deadline = ContinuousClock.now + hangGuard
        while !predicate(values.withLock { $0 }) {
            guard ContinuousClock.now < deadline else {
                Issue.record("\(what): got \(values.withLock { $0 })", sourceLocation: sourceLocation)
                return
            }
            try await Task.sleep(for: .milliseconds(10))
        }
    }
}

/// Runs a resolver for the length of `body`, then cancels it and waits (bounded) for it to end.
func withRunning<T>(_ resolver: NameResolver, _ body: () async throws -> T) async throws -> T {
    let running = Task { try await resolver.run() }
    defer { running.cancel() }
    let result = try await body()
    running.cancel()
    _ = try await boundedValue(of: Task { await running.result }, "run() returns once cancelled")
    return result
}


/// The elements of `stream` until it finishes, waited for under the hang guard (the suite has no
/// time limit, and a stream that never finished would hold the test for good).
func elements(of stream: AsyncStream<Resolution>, _ what: String) async throws -> [Resolution] {
    try await withHangGuard(what) {
        var all: [Resolution] = []
        for await value in stream { all.append(value) }
        return all
    }
}

@Suite(.serialized) struct NameResolverTests {
    let a = IPAddress("192.0.2.1")!, b = IPAddress("198.51.100.2")!

    @Test func aLiteralIsNeverLookedUp() async throws {
        let lookup = ScriptedLookup()
        let resolver = NameResolver(lookup: { lookup($0) })
        try await withRunning(resolver) {
            let v6 = try await elements(of: resolver.resolutions(of: "[2001:db8::1]"), "the IPv6 literal's stream ends")
            #expect(v6.last == .resolved([IPAddress("2001:db8::1")!]))
            let v4 = try await elements(of: resolver.resolutions(of: "203.0.113.9"), "the IPv4 literal's stream ends")
            #expect(v4.last == .resolved([IPAddress("203.0.113.9")!]))
        }
        #expect(lookup.calls.withLock { $0 } == 0)
    }

    @Test func reresolveYieldsOnlyChanges() async throws {
        let lookup = ScriptedLookup()
        let resolver = NameResolver(lookup: { lookup($0) })
        try await withRunning(resolver) {
            let seen = Collected(resolver.resolutions(of: "feed.example"))
            try await seen.wait("first answer") { $0 == [.resolved([a])] }
            // The same answer again is no change.
            resolver.reresolve()
            try await waitUntil("the second lookup") { lookup.calls.withLock { $0 } >= 2 }
            #expect(seen.values.withLock { $0 }.count == 1)
            lookup.answer.withLock { $0 = .resolved([b, a]) }
            resolver.reresolve()
            try await seen.wait("moved") { $0.last == .resolved([b, a]) }
            // The stream is in order, so a repeat of the first answer, however late it was
            // collected, would stand before the move.
            #expect(seen.values.withLock { $0 } == [.resolved([a]), .resolved([b, a])])
            let failure = ResolutionFailure(host: "feed.example", code: -2, message: "Name or service not known")
            lookup.answer.withLock { $0 = .failed(failure) }
            resolver.reresolve()
            try await seen.wait("failed") { $0.last == .failed(failure) }
            #expect(resolver.current("feed.example") == .failed(failure))
            #expect(failure.description == "feed.example: Name or service not known")
        }
        #expect(resolver.statistics.requestTriggers == 3)
    }

    @Test(arguments: [false, true])
    func aChangedResolverFileResolvesAgain(byRename: Bool) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("resolver-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("resolv.conf").path
        try "nameserver 192.0.2.53\n".write(toFile: file, atomically: false, encoding: .utf8)
        let lookup = ScriptedLookup()
        let resolver = NameResolver(configuration: .init(refreshInterval: .seconds(3600), watchedFiles: [file]), lookup: { lookup($0) })
        try await withRunning(resolver) {
            let seen = Collected(resolver.resolutions(of: "feed.example"))
            try await seen.wait("first answer") { $0.count == 1 }
            lookup.answer.withLock { $0 = .resolved([b]) }
            if byRename {
                // resolvconf and systemd-resolved replace the file.
                try "nameserver 192.0.2.54\n".write(toFile: file, atomically: true, encoding: .utf8)
            } else {
                // A bind-mounted file (ip netns exec) can only be written in place.
                let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: file))
                try handle.write(contentsOf: Data("nameserver 192.0.2.55\n".utf8))
                try handle.close()
            }
            try await seen.wait("re-resolved after the file changed") { $0.last == .resolved([b]) }
        }
        #expect(resolver.statistics.fileTriggers >= 1)
        #expect(resolver.statistics.periodicTriggers == 0)
    }

    @Test func namesAreResolvedAgainPeriodically() async throws {
        let lookup = ScriptedLookup()
        let resolver = NameResolver(configuration: .init(refreshInterval: .milliseconds(100), watchedFiles: []), lookup: { lookup($0) })
        try await withRunning(resolver) {
            let seen = Collected(resolver.resolutions(of: "feed.example"))
            try await seen.wait("first answer") { $0.count == 1 }
            lookup.answer.withLock { $0 = .resolved([b]) }
            try await seen.wait("periodic round found the move") { $0.last == .resolved([b]) }
        }
        #expect(resolver.statistics.periodicTriggers >= 1)
    }

    @Test func theSystemResolver() async throws {
        // getaddrinfo may ask the configured name servers, each with its own timeouts: a wider
        // guard than for work on this machine alone.
        let resolve = { (host: String) in
            try await boundedValue(of: Task { await NameResolver.resolve(host) }, "getaddrinfo answers for \(host)", timeout: hangGuard * 4)
        }
        guard case .resolved(let local) = try await resolve("localhost") else {
            Issue.record("localhost did not resolve")
            return
        }
        #expect(local.contains { $0.isLoopback })
        guard case .failed(let failure) = try await resolve("no-such-host.invalid") else {
            Issue.record(".invalid resolved")
            return
        }
        #expect(failure.host == "no-such-host.invalid" && !failure.message.isEmpty)
    }

    @Test func cancellingRunEndsItsThreadAndItsStreams() async throws {
        let resolver = NameResolver(lookup: { _ in .resolved([IPAddress("192.0.2.1")!]) })
        let running = Task { try await resolver.run() }
        defer { running.cancel() }
        let seen = Collected(resolver.resolutions(of: "feed.example"))
        try await seen.wait("first answer") { $0.count == 1 }
        guard let tid = resolver.threadID else {
            Issue.record("the resolver's thread did not say who it is")
            return
        }
        #expect(ProcessThreads.name(of: tid) == "syncd-resolver")
        running.cancel()
        _ = try await boundedValue(of: Task { await running.result }, "run() returns once cancelled")
        try await waitUntil("the stream ends with run()") { seen.ended }
        #expect(seen.values.withLock { $0 }.count == 1, "nothing after the first answer: \(seen.values.withLock { $0 })")
        // The thread resumes run() as its last act; give it the moment to return.
        #expect(try await ProcessThreads.waitUntilGone(tid), "the resolver's thread is gone")
    }
}
