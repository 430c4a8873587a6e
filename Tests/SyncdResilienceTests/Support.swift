import DemoFeedServer
import Foundation
import GRDB
import SyncControl
import Synchronization
import SyncdTesting
import Testing
import TestSupport

/// The resilience suite runs the real `syncd` binary. Its tests share the two cores of a CI
/// machine and time-based behaviour (kill delays, soak length), so they run one after another.
@Suite("syncd resilience", .serialized)
struct SyncdResilienceTests {}

// MARK: Seeds

/// A seed per test, printed so any run can be replayed: `SYNCD_RESILIENCE_SEED=N` overrides it.
enum Seed {
    static let environmentKey = "SYNCD_RESILIENCE_SEED"

    static func resolve(_ test: String, function: String = #function) -> UInt64 {
        let seed: UInt64
        if let raw = ProcessInfo.processInfo.environment[environmentKey], let value = UInt64(raw) {
            seed = value
        } else {
            seed = UInt64.random(in: 1...UInt64(UInt32.max))
        }
        let name = function.split(separator: "(").first.map(String.init) ?? function
        print("[\(test)] seed \(seed); replay with \(environmentKey)=\(seed) swift test --skip-build --filter 'SyncdResilienceTests.*\(name)'")
        return seed
    }
}

// MARK: The daemon under test

/// One feed as syncd is configured with it.
struct FeedSetup: Sendable {
    var name: String
    var url: String
    var pageSize = 20
    var refreshInterval = "1s"
    var backfill = 100_000_000
    var timeout = "3s"
    var maxBodyBytes = 8 << 20
    /// `revalidate` (a number of items, or `"all"` quoted), with `revalidate_interval`.
    var revalidate: (window: String, interval: String)?

    /// The feed's `[[feed]]` entry.
    var config: SyncdConfig.Feed {
        SyncdConfig.Feed(
            name: name, url: url, pageSize: pageSize, refreshInterval: refreshInterval, backfill: backfill,
            timeout: timeout, maxBodyBytes: maxBodyBytes,
            lines: revalidate.map { ["revalidate = \($0.window)", "revalidate_interval = \"\($0.interval)\""] } ?? [])
    }
}

/// A temporary directory holding syncd's configuration, store, control socket and logs, and the
/// runs of the real `syncd` executable started from it.
final class DaemonHarness: Sendable {
    let directory: TemporaryDirectory
    let test: String
    let seed: UInt64
    private let runs = Mutex<[ChildProcess]>([])

    /// syncd's configuration file, in ``directory``.
    var configPath: String { directory.file("syncd.toml") }
    /// syncd's store, in ``directory``.
    var storePath: String { directory.file("state/syncd.sqlite") }
    /// syncd's control socket, in ``directory``.
    var socketPath: String { directory.file("run/io.syncd") }

    init(
        test: String, seed: UInt64, feeds: [FeedSetup],
        retry: SyncdConfig.Retry = SyncdConfig.Retry(base: "200ms", cap: "2s", reconnectSpread: "0s")
    ) throws {
        self.test = test
        self.seed = seed
        directory = try TemporaryDirectory(prefix: "syncd-resilience")
        try SyncdConfig(
            store: storePath,
            controlSocket: socketPath,
            logLevel: "debug",
            network: SyncdConfig.Network(settle: "0s"),
            retry: retry,
            feeds: feeds.map(\.config)
        ).write(toFile: configPath)
    }

    var client: SyncControlClient { SyncControlClient(socketPath: socketPath) }

    /// syncd's status over the control socket, the call bounded by the hang guard: the client
    /// itself has no timeout, and a poll whose condition waits for good never reaches its own
    /// deadline.
    func status() async throws -> ControlStatus {
        let client = self.client
        return try await withHangGuard("GetStatus from syncd") { try await client.status() }
    }

    /// Starts a new run of `syncd`; its output goes to `syncd-N.log`.
    func start() throws -> ChildProcess {
        let syncd = try BuildProducts.path("syncd")
        return try runs.withLock { runs in
            let process = try ChildProcess([syncd, "--config", configPath], logPath: directory.file("syncd-\(runs.count).log"))
            runs.append(process)
            return process
        }
    }

    var runCount: Int { runs.withLock { $0.count } }

    /// Kills every run still alive (the cleanup path, also after a failure).
    func stopAll() async {
        for process in runs.withLock({ $0 }) where process.isRunning {
            await process.stop(signal: SIGKILL)
        }
    }

    /// Waits (bounded) until the control socket answers `GetStatus`. The bound is a hang guard:
    /// a start-up that a loaded machine slows down still passes.
    func waitUntilServing(_ process: ChildProcess, timeout: Duration = hangGuard * 2) async throws -> ControlStatus {
        let deadline = ContinuousClock.now + timeout
        var lastError: (any Error)?
        while ContinuousClock.now < deadline {
            guard process.isRunning else { throw HarnessFailure("syncd exited while starting", log: process.output) }
            do {
                return try await status()
            } catch {
                lastError = error
                try await Task.sleep(for: .milliseconds(50))
            }
        }
        throw HarnessFailure("syncd did not answer on its control socket within \(timeout) (last error: \(String(describing: lastError)))", log: process.output)
    }

    /// Copies the directory (store, logs, configuration) somewhere that outlives the test and
    /// returns where, so a failure can be examined and replayed.
    @discardableResult
    func preserve() -> String {
        let target = FileManager.default.temporaryDirectory.appendingPathComponent("syncd-resilience-\(test)-\(seed)-\(getpid())").path
        let files = FileManager.default
        try? files.removeItem(atPath: target)
        do {
            // Regular files only: the control socket cannot be copied.
            for relative in try files.subpathsOfDirectory(atPath: directory.path) {
                let source = directory.path + "/" + relative
                var info = stat()
                guard lstat(source, &info) == 0, info.st_mode & S_IFMT == S_IFREG else { continue }
                let destination = target + "/" + relative
                try files.createDirectory(atPath: (destination as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
                try files.copyItem(atPath: source, toPath: destination)
            }
        } catch {
            return "(could not preserve \(directory.path): \(error))"
        }
        return target
    }

    /// The last lines of the newest run's log.
    func logTail(lines: Int = 40) -> String {
        guard let last = runs.withLock({ $0.last }) else { return "(syncd never started)" }
        return last.output.split(separator: "\n", omittingEmptySubsequences: false).suffix(lines).joined(separator: "\n")
    }

    /// Everything needed to reproduce and examine a failure.
    func diagnostics(_ context: String = "") -> String {
        """
        \(context)
        seed \(seed) (replay: \(Seed.environmentKey)=\(seed), same filter); syncd runs: \(runCount); artifacts preserved at \(preserve())
        tail of the last syncd log:
        \(logTail())
        """
    }
}

struct HarnessFailure: Error, CustomStringConvertible {
    var message: String
    var log: String
    init(_ message: String, log: String = "") {
        self.message = message
        self.log = log
    }
    var description: String {
        log.isEmpty ? message : "\(message)\n--- syncd log (tail) ---\n\(log.split(separator: "\n").suffix(30).joined(separator: "\n"))"
    }
}

/// Runs `body`, then `cleanup` whether or not `body` threw.
func withCleanup<T>(_ body: () async throws -> T, cleanup: () async -> Void) async throws -> T {
    do {
        let result = try await body()
        await cleanup()
        return result
    } catch {
        await cleanup()
        throw error
    }
}

/// Starts a demo feed server, with fault injection (`faults`), on 127.0.0.1; a fixed port that is
/// still held is retried until `timeout` (a hang guard) has passed.
func startServer(
    _ configuration: DemoFeedServer.Configuration, faults: FaultInjector.Settings = .init(), timeout: Duration = hangGuard
) async throws -> DemoFeedServer {
    let deadline = ContinuousClock.now + timeout
    while true {
        let server = try DemoFeedServer(configuration: configuration, faults: faults)
        do {
            try await server.start()
            return server
        } catch {
            guard ContinuousClock.now < deadline else {
                throw HarnessFailure("the demo feed server could not start on port \(configuration.port) within \(timeout): \(error)")
            }
            try await Task.sleep(for: .milliseconds(100))
        }
    }
}

/// Starts a demo feed server on a port below the kernel's ephemeral range, so that it can be
/// stopped and a new server started on the same port: no port that the kernel hands out (to a
/// server on port 0 or a client's connection, of any test running beside this one) can take it in
/// between. Ports some other program holds are skipped.
func startServerOnAFixedPort(_ configuration: DemoFeedServer.Configuration, faults: FaultInjector.Settings = .init()) async throws -> DemoFeedServer {
    let range = (try? String(contentsOfFile: "/proc/sys/net/ipv4/ip_local_port_range", encoding: .utf8))?
        .split(whereSeparator: \.isWhitespace).compactMap { Int($0) } ?? []
    let ephemeralStart = range.first ?? 32_768
    var configuration = configuration
    var lastError: (any Error)?
    for _ in 0..<100 {
        configuration.port = Int.random(in: 10_000..<max(10_001, ephemeralStart))
        let server = try DemoFeedServer(configuration: configuration, faults: faults)
        do {
            try await server.start()
            return server
        } catch {
            lastError = error
        }
    }
    throw HarnessFailure("no free port below \(ephemeralStart) for the demo feed server: \(String(describing: lastError))")
}

/// Stops `server`, waiting at most `timeout`: a graceful stop waits for the requests in flight,
/// and one that never ended would otherwise hang the test.
func stopServer(_ server: DemoFeedServer, timeout: Duration = hangGuard) async throws {
    try await BoundedTask { await server.stop() }.value("the demo feed server's stop", timeout: timeout)
}

/// ``stopServer(_:timeout:)`` for cleanup, which cannot throw: a stop that does not end is
/// recorded as an issue.
func stopServerInCleanup(_ server: DemoFeedServer) async {
    do {
        try await stopServer(server)
    } catch {
        Issue.record("\(error)")
    }
}

// MARK: Reading the store

/// What a store file holds for one feed, read from a copy so the original is left exactly as
/// the killed daemon left it (WAL included) for the next run to recover.
struct StoreSnapshot {
    struct Item {
        var id: String
        var position: Int64
        var payload: Data
    }

    var exists = false
    var integrity: [String] = []
    /// Oldest first (ascending position).
    var items: [Item] = []
    var hasFeedRow = false
    var olderCursor: String?
    var newerCursor: String?
    var endReached = false
    var hasLoaded = false

    static func read(storePath: String, feed: String, scratch: String) throws -> StoreSnapshot {
        var snapshot = StoreSnapshot()
        let files = FileManager.default
        guard files.fileExists(atPath: storePath) else { return snapshot }
        try? files.removeItem(atPath: scratch)
        try files.createDirectory(atPath: scratch, withIntermediateDirectories: true)
        let copy = scratch + "/store.sqlite"
        for suffix in ["", "-wal", "-shm"] where files.fileExists(atPath: storePath + suffix) {
            try files.copyItem(atPath: storePath + suffix, toPath: copy + suffix)
        }
        snapshot.exists = true
        let queue = try DatabaseQueue(path: copy)
        try queue.read { db in
            snapshot.integrity = try String.fetchAll(db, sql: "PRAGMA integrity_check")
            guard try db.tableExists("item"), try db.tableExists("feed") else { return }
            let rows = try Row.fetchAll(db, sql: "SELECT id, position, payload FROM item WHERE feed = ? ORDER BY position ASC", arguments: [feed])
            snapshot.items = rows.map { Item(id: $0["id"], position: $0["position"], payload: $0["payload"]) }
            if let row = try Row.fetchOne(db, sql: "SELECT * FROM feed WHERE id = ?", arguments: [feed]) {
                snapshot.hasFeedRow = true
                snapshot.olderCursor = row["older_cursor"]
                snapshot.newerCursor = row["newer_cursor"]
                snapshot.endReached = row["end_reached"]
                snapshot.hasLoaded = row["has_loaded"]
            }
        }
        try queue.close()
        return snapshot
    }

    var ids: [String] { items.map(\.id) }

    /// Everything wrong with this snapshot against the server's feed (oldest first):
    /// corruption, duplicates, a stored run that is not one contiguous slice of the feed,
    /// payloads that differ from what was served, cursors that do not match the stored edges.
    func problems(against served: [DemoFeedItem]) -> [String] {
        guard exists else { return [] }
        var problems: [String] = []
        if integrity != ["ok"] { problems.append("PRAGMA integrity_check: \(integrity.prefix(5))") }
        var seen = Set<String>()
        let duplicates = items.filter { !seen.insert($0.id).inserted }.map(\.id)
        if !duplicates.isEmpty { problems.append("duplicate ids: \(duplicates.prefix(5))") }
        var positions = Set<Int64>()
        if items.contains(where: { !positions.insert($0.position).inserted }) { problems.append("two items share a position") }
        guard let first = items.first, let last = items.last else {
            if hasLoaded { problems.append("has_loaded is set but no item is stored") }
            return problems
        }
        if !hasLoaded { problems.append("items are stored but has_loaded is not set") }

        var index: [String: Int] = [:]
        for (offset, item) in served.enumerated() { index[item.id] = offset }
        guard let start = index[first.id] else {
            problems.append("the oldest stored id \(first.id) is not in the server's feed")
            return problems
        }
        for (offset, item) in items.enumerated() {
            let expected = start + offset
            guard expected < served.count, served[expected].id == item.id else {
                let want = expected < served.count ? served[expected].id : "(past the feed's end)"
                let context = items[max(0, offset - 2)..<min(items.count, offset + 3)].map(\.id)
                problems.append("not a contiguous slice of the feed: stored item #\(offset) (oldest first) is \(item.id), the feed has \(want) there; stored around it: \(context)")
                break
            }
            if item.payload != served[expected].jsonData {
                problems.append("payload of \(item.id) differs from what the server sent")
                break
            }
        }
        if let cursor = olderCursor, let maxID = Self.query(cursor, "max_id"), maxID != first.id {
            problems.append("older cursor pages below \(maxID) but the oldest stored item is \(first.id) (cursor \(cursor))")
        }
        if let cursor = newerCursor, let minID = Self.query(cursor, "min_id"), minID != last.id {
            problems.append("newer cursor pages above \(minID) but the newest stored item is \(last.id) (cursor \(cursor))")
        }
        if endReached, start != 0 {
            problems.append("end_reached is set but the oldest stored item is \(first.id), not the feed's first \(served.first?.id ?? "-")")
        }
        return problems
    }

    /// A one-line summary for progress output.
    var summary: String {
        guard exists else { return "no store yet" }
        guard let first = items.first, let last = items.last else { return "empty store (loaded: \(hasLoaded))" }
        return "\(items.count) items \(first.id)…\(last.id), end \(endReached)"
    }

    private static func query(_ url: String, _ name: String) -> String? {
        URLComponents(string: url)?.queryItems?.first { $0.name == name }?.value
    }
}

// MARK: Waiting

/// Waits until syncd reports every feed fully synced: as many items as the server has, the end
/// reached, and no direction loading or failed. `timeout` is a hang guard: pick it so that no
/// loaded machine needs that long.
func waitUntilSynced(_ harness: DaemonHarness, server: DemoFeedServer, feeds: [String], timeout: Duration) async -> (Bool, String) {
    var last = "no status"
    var done = true
    do {
        try await waitUntil("syncd reports \(feeds.joined(separator: ", ")) fully synced", timeout: timeout, interval: .milliseconds(200)) {
            guard let status = try? await harness.status() else { return false }
            var ok = true
            var lines: [String] = []
            for name in feeds {
                guard let feed = status.feed(named: name), let served = try? await server.items(feed: name) else { return false }
                lines.append("\(name): \(feed.itemCount)/\(served.count) end \(feed.endReached) initial \(feed.initial.phase) older \(feed.older.phase) newer \(feed.newer.phase)")
                if feed.itemCount != served.count || !feed.endReached || [feed.initial, feed.older, feed.newer].contains(where: { $0.phase == .failed || $0.phase == .loading }) {
                    ok = false
                }
            }
            last = lines.joined(separator: "; ")
            return ok
        }
    } catch {
        done = false
    }
    return (done, last)
}
