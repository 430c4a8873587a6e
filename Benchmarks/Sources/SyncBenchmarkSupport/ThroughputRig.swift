import Foundation
import HTTPFeedSource
import Logging
import NetlinkProbe
import SyncCoordinator
import SyncCore
import SyncStore

/// Sync throughput: one feed of `items` items, paged `pageSize` at a time by the reference server
/// (`demo-feed`, a process of its own on 127.0.0.1), synced into a fresh SQLite store
/// (a) by syncd's real stack — `HTTPFeedSource` + `SyncCoordinator` + `SQLiteFeedStore`, backfill
/// depth `items` — until the feed's state shows every item stored and the end reached, and
/// (b) by a straightforward Python baseline (`Baselines/sync_baseline.py`: requests + sqlite3,
/// following `rel="next"`, one transaction per page), against the same server in the same run.
public actor ThroughputRig {
    public struct Run: Sendable {
        public var items: Int
        public var seconds: Double
        /// CPU time syncd had used when everything was stored (0 for runs that do not measure it).
        public var cpuSeconds: Double = 0
        public var itemsPerSecond: Double { Double(items) / seconds }
    }

    public let items: Int
    public let pageSize: Int
    /// How the server writes its pages: `json` (a bare array), `envelope` (a JSON object with a
    /// body cursor) or `atom`; the `Link` header, which the floor client follows, is the same.
    public let format: String
    private let server: LineProcess
    private let baseURL: String
    private let directory: String
    public let requestsVersion: String
    public private(set) var pairs: [(syncd: Run, python: Run)] = []

    /// - Parameter python: whether the Python baseline will run (its `requests` is checked).
    public init(items: Int = 100_000, pageSize: Int = 100, python: Bool = true, format: String = "json") async throws {
        self.items = items
        self.pageSize = pageSize
        self.format = format
        requestsVersion = python ? try Self.checkPythonRequests() : "not used"
        server = try LineProcess(
            executable: try HelperPaths.executable("demo-feed"),
            arguments: [
                "--host", "127.0.0.1", "--port", "0", "--feed", "bulk:\(items):0",
                "--limit", "\(pageSize)", "--max-limit", "\(pageSize)", "--log-level", "warning",
            ])
        let lines = LineReader(server, name: "demo-feed")
        let listening = try await lines.next { $0.hasPrefix("listening on ") }
        baseURL = String(listening.dropFirst("listening on ".count))
        directory = NSTemporaryDirectory() + "sync-throughput-\(getpid())"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }

    public var serverPID: Int32 { server.pid }

    public func shutdown() {
        server.finish()
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// `requests` must be importable by the system python3; installs it with pip when it is not.
    static func checkPythonRequests() throws -> String {
        let probe = ["python3", "-c", "import requests, sqlite3; print(requests.__version__, sqlite3.sqlite_version)"]
        if let version = try? runCommand(probe) { return version.trimmingCharacters(in: .whitespacesAndNewlines) }
        FileHandle.standardError.write(Data("sync-throughput: the Python baseline needs 'requests'; installing it: python3 -m pip install requests\n".utf8))
        _ = try? runCommand(["python3", "-m", "pip", "install", "--quiet", "requests"], allowFailure: true)
        guard let version = try? runCommand(probe) else {
            throw SyncRigError("the Python baseline needs the 'requests' package for python3 and pip could not install it: run `python3 -m pip install requests`")
        }
        return version.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// One run of each, in alternating order so neither always runs on a warmer machine.
    public func measurePair(index: Int, record: Bool = true) async throws -> (syncd: Run, python: Run) {
        let syncd: Run
        let python: Run
        if index % 2 == 0 {
            syncd = try await runSyncd(index)
            python = try runPython(index)
        } else {
            python = try runPython(index)
            syncd = try await runSyncd(index)
        }
        if record {
            pairs.append((syncd, python))
            // Decomposition, after the pair: the same stack on the two other stores.
            for kind in [StoreKind.memory] { variants[kind, default: []].append(try await runSyncd(index, store: kind)) }
            daemonRuns.append(try await runDaemon(index))
            if storeOnly == nil { storeOnly = try await measureStoreOnly() }
        }
        return (syncd, python)
    }

    public private(set) var variants: [StoreKind: [Run]] = [:]
    /// The release `syncd` binary syncing the same feed, from exec to the store showing it all.
    public private(set) var daemonRuns: [Run] = []
    /// SQLiteFeedStore alone (no network): seconds for the first and the last 100 of the pages.
    public private(set) var storeOnly: (first: Double, last: Double, total: Double)?

    /// Commits the feed's pages (fetched beforehand, untimed) straight into a fresh SQLiteFeedStore.
    func measureStoreOnly() async throws -> (first: Double, last: Double, total: Double) {
        let client = HTTPFeedClient()
        let source = try HTTPFeedSource(configuration: .init(url: feedURL), client: client)
        var pages: [FeedPage] = [try await source.fetchInitial()]
        while let cursor = pages.last?.olderCursor, pages.count < 100_000 {
            pages.append(try await source.fetchOlder(cursor: cursor))
        }
        try? await client.shutdown()
        let path = "\(directory)/store-only.sqlite"
        defer { Self.removeDatabase(path) }
        let store = try SQLiteFeedStore(path: path)
        var durations: [Double] = []
        for (index, page) in pages.enumerated() {
            let start = ContinuousClock.now
            _ = try await store.commit(feed: "bulk", direction: index == 0 ? .initial : .older, page: page, at: Date())
            durations.append((ContinuousClock.now - start).seconds)
        }
        let slice = min(100, durations.count)
        return (durations.prefix(slice).reduce(0, +), durations.suffix(slice).reduce(0, +), durations.reduce(0, +))
    }

    private var feedURL: URL { URL(string: "\(baseURL)/feeds/bulk?\(formatQuery)limit=\(pageSize)")! }

    /// `format=…&` for a format other than the bare array.
    private var formatQuery: String { format == "json" ? "" : "format=\(format)&" }

    /// The `[[feed]]` keys that read the format: the envelope's items and body cursor; Atom is
    /// recognised by its body.
    private var formatKeys: String {
        format == "envelope" ? "items = \"/data\"\ncursor = \"/next_cursor\"\ncursor_param = \"max_id\"\nnewer = \"head\"\n" : ""
    }

    /// The store under syncd's stack: the product's, or in memory to separate SQLite's share.
    public enum StoreKind: String, Sendable, CaseIterable {
        case sqlite = "SQLiteFeedStore"
        case memory = "InMemoryFeedStore (no SQLite)"
    }

    func runSyncd(_ index: Int, store kind: StoreKind = .sqlite) async throws -> Run {
        let path = "\(directory)/syncd-\(index).sqlite"
        defer { Self.removeDatabase(path) }
        var logger = Logger(label: "sync-throughput")
        logger.logLevel = .warning
        let store: any FeedStore = switch kind {
        case .sqlite: try SQLiteFeedStore(path: path)
        case .memory: InMemoryFeedStore()
        }
        let client = HTTPFeedClient()
        let source = try HTTPFeedSource(configuration: .init(url: feedURL), client: client, logger: logger)
        let coordinator = SyncCoordinator(store: store, configuration: SyncConfiguration(backfillDepth: items), logger: logger)
        try await coordinator.addFeed("bulk", source: source)
        let updates = await coordinator.updates()
        let target = items
        let start = ContinuousClock.now
        try await coordinator.start()
        let outcome: Result<Int, SyncRigError> = await withTaskGroup(of: Result<Int, SyncRigError>?.self) { group in
            group.addTask {
                for await state in updates {
                    if state.itemCount >= target && state.endReached { return .success(state.itemCount) }
                    for direction in Direction.allCases {
                        if let failure = state[direction].load.failure {
                            return .failure(SyncRigError("syncd \(direction) load failed: \(failure.error)"))
                        }
                    }
                }
                return .failure(SyncRigError("the state stream ended"))
            }
            group.addTask {
                try? await Task.sleep(for: .seconds(600))
                return Task.isCancelled ? nil : .failure(SyncRigError("syncd did not finish within 600 s"))
            }
            defer { group.cancelAll() }
            while let next = await group.next() {
                if let next { return next }
            }
            return .failure(SyncRigError("no outcome"))
        }
        let elapsed = ContinuousClock.now - start
        await coordinator.stop()
        try? await client.shutdown()
        let stored = try await store.load(feed: "bulk").itemCount
        switch outcome {
        case .success:
            guard stored == items else { throw SyncRigError("syncd stored \(stored) items, expected \(items)") }
            return Run(items: stored, seconds: elapsed.seconds)
        case .failure(let error):
            throw error
        }
    }

    /// The whole daemon: the release `syncd` binary on a TOML configuration with the one feed
    /// (backfill to its full depth), timed from exec until its store, read from this process,
    /// holds every item with the end reached. Includes what the in-process stack leaves out:
    /// start-up, the netlink monitor, the status reporter and the control socket.
    ///
    /// With `metrics`, the daemon also serves its metrics on a Unix socket (nobody scrapes it)
    /// and writes the metrics textfile at its default interval.
    func runDaemon(_ index: Int, metrics: Bool = false) async throws -> Run {
        let directory = "\(self.directory)/daemon-\(index)\(metrics ? "-metrics" : "")"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let config = """
            [daemon]
            store = "\(directory)/syncd.sqlite"
            control_socket = "\(directory)/io.syncd"
            log_level = "warning"

            [[feed]]
            name = "bulk"
            url = "\(baseURL)/feeds/bulk\(format == "json" ? "" : "?format=\(format)")"
            page_size = \(pageSize)
            refresh_interval = "1h"
            backfill = \(items)

            """ + formatKeys + (metrics ? """

            [metrics]
            listen = "\(directory)/metrics.sock"
            textfile = "\(directory)/syncd.prom"
            """ : "")
        try config.write(toFile: "\(directory)/syncd.toml", atomically: true, encoding: .utf8)
        let executable = try HelperPaths.executable("syncd")
        let start = ContinuousClock.now
        // Its output and errors to a log in the run's directory, shown if it exits early.
        let syncd = try ChildProcess(
            [executable, "--config", "\(directory)/syncd.toml"], logPath: "\(directory)/syncd.log", environment: childEnvironment())
        let pid = syncd.pid
        return try await syncd.stopping(with: SIGTERM) {
            let path = "\(directory)/syncd.sqlite", socket = "\(directory)/io.syncd", items = self.items
            // The watcher looks every 2 ms, on a thread of its own at nice 19: it must see the end
            // soon (every 10 ms it saw it 5 ms late on average) without taking the cores from the
            // two processes it watches. A task sleeping 2 ms at the default priority did: syncd
            // took 0.42-0.48 s against 0.36-0.40 s looking every 10 ms (three runs each).
            // `nil` when syncd exited first.
            let seen: (count: Int, seconds: Double)? = try await withCheckedThrowingContinuation { continuation in
                Thread {
                    _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, 19)
                    continuation.resume(with: Result {
                        // The control socket appears after the store is opened and migrated: only then
                        // is it opened here, so the two processes never race to create the schema.
                        var store: SQLiteFeedStore?
                        let deadline = start + .seconds(600)
                        while true {
                            usleep(2_000)
                            guard syncd.isRunning else { return nil }
                            if store == nil, FileManager.default.fileExists(atPath: socket) {
                                store = try SQLiteFeedStore(path: path)
                            }
                            if let feed = try? store?.loadSynchronously(feed: "bulk"), feed.itemCount >= items, feed.endReached {
                                return (feed.itemCount, (ContinuousClock.now - start).seconds)
                            }
                            guard ContinuousClock.now < deadline else { throw SyncRigError("the syncd daemon did not sync the feed within 600 s") }
                        }
                    })
                }.start()
            }
            guard let seen else {
                throw SyncRigError("syncd exited with status \(await syncd.waitForExit()): \(syncd.output.suffix(2000))")
            }
            return Run(items: seen.count, seconds: seen.seconds, cpuSeconds: procCPUSeconds(pid: pid))
        }
    }

    func runPython(_ index: Int) throws -> Run {
        let path = "\(directory)/python-\(index).sqlite"
        defer { Self.removeDatabase(path) }
        let script = HelperPaths.packageDirectory + "/Baselines/sync_baseline.py"
        // `env -u LD_PRELOAD`: the runner's malloc interposer stays out of the baseline.
        let output = try runCommand(["-u", "LD_PRELOAD", "python3", script, feedURL.absoluteString, path])
        struct Report: Decodable { var items: Int; var seconds: Double }
        guard let line = output.split(separator: "\n").last,
            let report = try? JSONDecoder().decode(Report.self, from: Data(line.utf8))
        else { throw SyncRigError("unexpected output from sync_baseline.py: \(output)") }
        guard report.items == items else { throw SyncRigError("the Python baseline stored \(report.items) items, expected \(items)") }
        return Run(items: report.items, seconds: report.seconds)
    }

    static func removeDatabase(_ path: String) {
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
    }

    /// One floor walk, one whole-daemon sync and one with metrics on, of the same feed from the
    /// same server; the order rotates with `index` so none always runs first or last.
    public func measureFloorPair(index: Int) async throws -> FloorPair {
        let expectedPages = (items + pageSize - 1) / pageSize
        let server = self.server.pid
        var pair = FloorPair()
        let order = [0, 1, 2].map { ($0 + index) % 3 }
        for step in order {
            let before = procCPUSeconds(pid: server)
            switch step {
            case 0:
                let walk = try await FloorClient.walk(feedURL)
                // The last page is the one without `next`: a full feed of whole pages ends with it.
                guard walk.pages >= expectedPages else { throw SyncRigError("the floor client walked \(walk.pages) pages, expected at least \(expectedPages)") }
                pair.floor = walk
                pair.floorServerCPU = procCPUSeconds(pid: server) - before
            case 1:
                pair.daemon = try await runDaemon(index)
                pair.daemonServerCPU = procCPUSeconds(pid: server) - before
            default:
                pair.daemonWithMetrics = try await runDaemon(index, metrics: true)
            }
        }
        return pair
    }

    /// One floor walk and the daemon's syncs, with the CPU time each cost the server.
    public struct FloorPair: Sendable {
        public var floor = FloorClient.Walk(pages: 0, bodyBytes: 0, seconds: 0)
        /// CPU time the server spent during the floor walk.
        public var floorServerCPU: Double = 0
        public var daemon = Run(items: 0, seconds: 0)
        /// CPU time the server spent while syncd synced (start-up included).
        public var daemonServerCPU: Double = 0
        /// The same sync with the metrics endpoint and textfile on.
        public var daemonWithMetrics = Run(items: 0, seconds: 0)
    }

    public func summary() -> String {
        let lines = pairs.enumerated().map { index, pair in
            String(
                format: "  run %d: syncd %.2f s (%.0f items/s)   python %.2f s (%.0f items/s)   ratio %.2f×",
                index + 1, pair.syncd.seconds, pair.syncd.itemsPerSecond, pair.python.seconds, pair.python.itemsPerSecond,
                pair.syncd.itemsPerSecond / pair.python.itemsPerSecond)
        }
        let ratios = pairs.map { $0.syncd.itemsPerSecond / $0.python.itemsPerSecond }.sorted()
        let median = ratios.isEmpty ? 0 : ratios[ratios.count / 2]
        var decomposition: [String] = []
        let pythonRates = pairs.map(\.python.itemsPerSecond).sorted()
        let pythonMedian = pythonRates.isEmpty ? 1 : pythonRates[pythonRates.count / 2]
        for kind in [StoreKind.memory] {
            let runs = variants[kind] ?? []
            guard !runs.isEmpty else { continue }
            let rates = runs.map(\.itemsPerSecond).sorted()
            decomposition.append(String(
                format: "  syncd stack on %@: median %.0f items/s (%@), %.2f× the python median",
                kind.rawValue as NSString, rates[rates.count / 2],
                runs.map { String(format: "%.2f s", $0.seconds) }.joined(separator: ", ") as NSString,
                rates[rates.count / 2] / pythonMedian))
        }
        if !daemonRuns.isEmpty {
            let rates = daemonRuns.map(\.itemsPerSecond).sorted()
            decomposition.append(String(
                format: "  the syncd daemon (release binary, exec to all stored): median %.0f items/s (%@), %.2f× the python median",
                rates[rates.count / 2],
                daemonRuns.map { String(format: "%.2f s", $0.seconds) }.joined(separator: ", ") as NSString,
                rates[rates.count / 2] / pythonMedian))
        }
        if let storeOnly {
            decomposition.append(String(
                format: "  SQLiteFeedStore alone, no network: %.2f s for all pages; first 100 pages %.3f s, last 100 pages %.3f s (%.1f× slower per page)",
                storeOnly.total, storeOnly.first, storeOnly.last, storeOnly.last / max(storeOnly.first, 1e-9)))
        }
        return """
        sync-throughput summary: \(items) items, \(items / pageSize) pages of \(pageSize), demo-feed on 127.0.0.1 (gzip), python requests/sqlite \(requestsVersion)
        \(lines.joined(separator: "\n"))
          median ratio syncd/python: \(String(format: "%.2f", median))× (target ≥ 3×: \(median >= 3 ? "met" : "missed"))
        decomposition (same run, same server):
        \(decomposition.joined(separator: "\n"))
        """
    }
}
