import Foundation
import SyncControl
import Synchronization
import Testing
import TestSupport

/// syncd's metrics as the real consumers read them: a Prometheus scraping the endpoint, promtool
/// checking the exposition, node_exporter's textfile collector reading the file, and
/// `syncctl status`'s exit code as a health check sees it. Every consumer runs in the rig's client
/// namespace, where syncd runs, so its loopback ports are the rig's own and cannot collide with
/// another test's.
@Suite(.enabled(if: Privileges.rootTestsEnabled, Comment(rawValue: Privileges.skipReason)))
struct PrometheusScrapeTests {
    typealias Rig = EndToEndTests.Rig

    /// Ports on the client namespace's loopback (a namespace of the test's own).
    static let metricsPort = 9559
    static let prometheusPort = 9090
    static let nodeExporterPort = 9100

    /// `[metrics]` with the HTTP endpoint, for the rig's `tables`.
    static let listenTable = """
        [metrics]
        listen = "127.0.0.1:\(metricsPort)"
        """

    static var endpoint: String { "http://127.0.0.1:\(metricsPort)/metrics" }

    // MARK: 1. A real Prometheus

    @Test func prometheusScrapesSyncdWhileTheFeedHostGoesAwayAndComesBack() async throws {
        try Privileges.requireRoot()
        // The far address: a host with a route of its own, which a blackhole takes away alone.
        let host = Rig.farAddress
        let rig = try await Rig(initialItems: 120, feeds: [("demo", host)], tables: Self.listenTable)
        try await Self.withRig(rig) { started in
            let prometheus = try await Prometheus.start(rig, started)
            let socket = rig.directory.file("io.syncd")
            _ = try await rig.waitForStatus("the first full sync") { s in
                s.connectivity.isOnline && s.feed(named: "demo").map { $0.itemCount == 120 && $0.endReached } == true
            }
            let health = try await Self.syncctl(rig, ["status", "--socket", socket])
            #expect(health.status == 0, "syncctl status once synced: \(health)")
            let synced = try await Self.statusJSON(rig)
            let feed = try #require(synced.feed(named: "demo"))

            // The feed's first verdict reaches the feed directly and the metrics through the
            // verdict stream, so the host's series may come a scrape after the items.
            try await Self.poll(
                rig, "Prometheus to have scraped syncd (up 1, no scrape error) with syncd_feed_items{feed=\"demo\"} = \(feed.itemCount) and the host online",
                also: [prometheus.process]
            ) {
                let up = try await prometheus.value(#"up{job="syncd"}"#)
                let target = try await prometheus.target()
                let items = try await prometheus.value(#"syncd_feed_items{feed="demo"}"#)
                let online = try await prometheus.value(#"syncd_host_connectivity{feed_host="\#(host)",state="online"}"#)
                let none = try await prometheus.value(#"syncd_host_reason{feed_host="\#(host)",reason="none"}"#)
                if up == 1, target.health == "up", target.lastError.isEmpty, items == Double(feed.itemCount), online == 1, none == 1 { return nil }
                return "up \(String(describing: up)), target \(target), syncd_feed_items \(String(describing: items)), online \(String(describing: online)), reason none \(String(describing: none))"
            }
            let succeeded = try await prometheus.value(#"sum(syncd_feed_requests_total{feed="demo",outcome="success"})"#)
            #expect((succeeded ?? 0) > 0, "successful requests counted: \(String(describing: succeeded))")
            if let lastSync = feed.lastSync {
                let scraped = try await prometheus.value(#"syncd_feed_last_success_timestamp_seconds{feed="demo"}"#)
                // Within a second: the status's JSON dates and the sample's float need not carry the same digits.
                #expect(scraped.map { abs($0 - lastSync.timeIntervalSince1970) < 1 } == true,
                        "last success \(String(describing: scraped)) against the status's lastSync \(lastSync.timeIntervalSince1970)")
            } else {
                Issue.record("a synced feed without lastSync: \(feed)")
            }
            let changesBefore = try await prometheus.value(#"sum(syncd_host_connectivity_changes_total{feed_host="\#(host)"})"#) ?? 0

            // The host goes behind a blackhole: the kernel would not send to it.
            try await rig.topology.client.ip("route", "add", "blackhole", "\(host)/32")
            #expect(!(await FeedConnectivityTests.kernelRoutes(rig, to: host)), "the kernel still routes to \(host)")
            var away: ControlConnectivity?
            try await Self.poll(rig, "the status and Prometheus to agree the feed host is not online, for the same reason", also: [prometheus.process]) {
                let status = try await Self.statusJSON(rig)
                guard let connectivity = status.feed(named: "demo")?.connectivity, let state = Self.stateName(connectivity), state != "online" else {
                    return "status: \(String(describing: status.feed(named: "demo")?.connectivity))"
                }
                let states = try await prometheus.query(#"syncd_host_connectivity{feed_host="\#(host)"} == 1"#).compactMap { $0.labels["state"] }
                let reasons = try await prometheus.query(#"syncd_host_reason{feed_host="\#(host)"} == 1"#).compactMap { $0.labels["reason"] }
                guard states == [state], reasons == [connectivity.reason?.rawValue ?? "?"] else {
                    return "status \(connectivity); Prometheus: state \(states), reason \(reasons)"
                }
                away = connectivity
                return nil
            }
            // A blackhole is a reject route: offline, blocked.
            #expect(away.map(Self.stateName) == "offline" && away?.reason == .blocked, "\(String(describing: away))")

            // It comes back: online again, and the counter has seen the way out and the way back.
            try await rig.topology.client.ip("route", "del", "blackhole", "\(host)/32")
            #expect(await FeedConnectivityTests.kernelRoutes(rig, to: host), "the kernel does not route to \(host) again")
            try await Self.poll(rig, "the status and Prometheus to report the feed host online again, with the changes counted", also: [prometheus.process]) {
                let status = try await Self.statusJSON(rig)
                guard status.feed(named: "demo")?.connectivity?.isOnline == true else {
                    return "status: \(String(describing: status.feed(named: "demo")?.connectivity))"
                }
                let online = try await prometheus.value(#"syncd_host_connectivity{feed_host="\#(host)",state="online"}"#)
                let none = try await prometheus.value(#"syncd_host_reason{feed_host="\#(host)",reason="none"}"#)
                let changes = try await prometheus.value(#"sum(syncd_host_connectivity_changes_total{feed_host="\#(host)"})"#) ?? 0
                let blocked = try await prometheus.value(#"syncd_host_connectivity_changes_total{feed_host="\#(host)",reason="blocked"}"#) ?? 0
                guard online == 1, none == 1, changes >= changesBefore + 2, blocked >= 1 else {
                    return "online \(String(describing: online)), reason none \(String(describing: none)), changes \(changes) (before \(changesBefore)), to blocked \(blocked)"
                }
                return nil
            }
            let target = try await prometheus.target()
            #expect(target.health == "up" || target.lastError.contains("deadline exceeded"), "the target at the end: \(target)")
            prometheus.recordScrapeErrors()
        }
    }

    // MARK: 2. promtool and OpenMetrics

    @Test func promtoolAcceptsTheExpositionAndTheOpenMetricsFormIsWellFormed() async throws {
        try Privileges.requireRoot()
        let rig = try await Rig(initialItems: 120, tables: Self.listenTable)
        try await Self.withRig(rig) { _ in
            _ = try await rig.waitForStatus("the first full sync") { s in
                s.feed(named: "demo").map { $0.itemCount == 120 && $0.endReached } == true
            }
            var text: (contentType: String, body: String) = ("", "")
            try await Self.poll(rig, "the metrics endpoint to answer \(Self.endpoint)") {
                text = try await Self.get(rig, Self.endpoint)
                return nil
            }
            #expect(text.contentType == "text/plain; version=0.0.4; charset=utf-8")
            #expect(Self.samples(text.body).contains { $0.name == "syncd_feed_items" && $0.labels == ["feed": "demo"] && $0.value == 120 },
                    "the endpoint's syncd_feed_items:\n\(text.body)")
            try await Self.promtoolAccepts(text.body, from: "the endpoint", in: rig)

            let viaSyncctl = try await Self.syncctl(rig, ["metrics", "--socket", rig.directory.file("io.syncd")])
            #expect(viaSyncctl.status == 0, "\(viaSyncctl)")
            #expect(Self.samples(viaSyncctl.stdout).contains { $0.name == "syncd_feed_items" && $0.labels == ["feed": "demo"] && $0.value == 120 },
                    "syncctl metrics' syncd_feed_items:\n\(viaSyncctl.stdout)")
            try await Self.promtoolAccepts(viaSyncctl.stdout, from: "syncctl metrics", in: rig)

            // What Prometheus asks for first.
            let open = try await Self.get(rig, Self.endpoint, accept: "application/openmetrics-text; version=1.0.0")
            #expect(open.contentType.hasPrefix("application/openmetrics-text; version=1.0.0"), "Content-Type: \(open.contentType)")
            #expect(open.body.hasSuffix("\n# EOF\n"), "the OpenMetrics exposition must end with # EOF:\n\(open.body.suffix(300))")
            for problem in Self.openMetricsProblems(open.body) {
                Issue.record("OpenMetrics exposition: \(problem)")
            }
        }
    }

    // MARK: 3. node_exporter's textfile collector

    @Test func nodeExporterReadsTheTextfileAndNoReaderSeesAHalfWrittenOne() async throws {
        try Privileges.requireRoot()
        // A directory of the textfile's own: node_exporter reads every *.prom in it.
        let textDirectory = try TemporaryDirectory(prefix: "syncd-textfile")
        let path = textDirectory.file("syncd.prom")
        let rig = try await Rig(initialItems: 120, tables: """
            [metrics]
            textfile = "\(path)"
            textfile_interval = "1s"
            """)
        try await Self.withRig(rig) { started in
            started.keep(textDirectory)
            let exporter = started.add(try ChildProcess(
                ["ip", "netns", "exec", rig.topology.client.name, "prometheus-node-exporter",
                 "--collector.disable-defaults", "--collector.textfile", "--collector.textfile.directory=\(textDirectory.path)",
                 "--web.listen-address=127.0.0.1:\(Self.nodeExporterPort)"],
                logPath: rig.directory.file("node-exporter.log")))
            _ = try await rig.waitForStatus("the first full sync") { s in
                s.feed(named: "demo").map { $0.itemCount == 120 && $0.endReached } == true
            }
            try await Self.nodeExporterShows(items: 120, rig: rig, exporter: exporter)

            // Items come in rounds; syncd rewrites the file after each (at most once a second)
            // while a reader reads it over and over.
            // Families never leave the registry: every complete later version has these.
            let families = Self.familyNames(try String(contentsOfFile: path, encoding: .utf8))
            #expect(families.contains("syncd_feed_items") && families.contains("syncd_build_info"), "\(families)")
            let reader = TextfileReader(path: path, families: families)
            let reading = BoundedTask { try await reader.run() }
            var count = 120
            for round in 1...6 {
                count += 7
                try await Rig.admin(rig.topology, "POST", "/admin/feeds/demo/items?count=7")
                _ = try await rig.client.bounded("Refresh") { try await $0.refresh(feed: "demo") }
                _ = try await rig.waitForStatus("round \(round): \(count) items stored") { s in
                    s.feed(named: "demo").map { $0.itemCount == count && $0.newer.phase == .loaded } == true
                }
                let expected = count
                try await Self.poll(rig, "round \(round): the reader to see the textfile with syncd_feed_items{feed=\"demo\"} = \(expected)") {
                    reader.sawItems(expected) ? nil : "the reader's last complete read: \(reader.latestItems.map(String.init) ?? "none")"
                }
            }
            try await Self.poll(rig, "the reader to read the textfile at least 300 times") {
                reader.reads >= 300 ? nil : "\(reader.reads) reads"
            }
            reader.stop()
            try await reading.value("the textfile reader")
            let summary = reader.summary
            #expect(summary.brokenCount == 0, "reads of a half-written textfile (\(summary.brokenCount) of \(summary.reads)):\n\(summary.broken.prefix(3).joined(separator: "\n---\n"))")
            #expect(summary.distinct >= 7, "the reader saw \(summary.distinct) versions of the file in \(summary.reads) reads")
            try await Self.nodeExporterShows(items: count, rig: rig, exporter: exporter)

            // A clean stop leaves the file and nothing else.
            #expect(await rig.daemon.stop(signal: SIGTERM) == 0, "\(rig.daemon.output)")
            let left = try FileManager.default.contentsOfDirectory(atPath: textDirectory.path).sorted()
            #expect(left == ["syncd.prom"], "left in the textfile directory after syncd stopped: \(left)")
        }
    }

    /// Waits until node_exporter's `/metrics` has syncd's item count from the file and no
    /// textfile error.
    static func nodeExporterShows(items: Int, rig: Rig, exporter: ChildProcess) async throws {
        let url = "http://127.0.0.1:\(nodeExporterPort)/metrics"
        try await poll(rig, "node_exporter to serve syncd_feed_items{feed=\"demo\"} = \(items) from the textfile, with node_textfile_scrape_error 0", also: [exporter]) {
            let samples = Self.samples(try await Self.get(rig, url).body)
            let scraped = samples.first { $0.name == "syncd_feed_items" && $0.labels["feed"] == "demo" }?.value
            let error = samples.first { $0.name == "node_textfile_scrape_error" }?.value
            return scraped == Double(items) && error == 0 ? nil : "syncd_feed_items \(String(describing: scraped)), node_textfile_scrape_error \(String(describing: error))"
        }
    }

    // MARK: 4. Health exit codes

    @Test func statusExitCodesFromTheRealDaemon() async throws {
        try Privileges.requireRoot()
        // A second feed on the same server whose path names no feed: 404, a permanent failure.
        let rig = try await Rig(initialItems: 50, tables: """
            [[feed]]
            name = "missing"
            url = "http://\(VethTopology.serverAddress):8080/feeds/nothere"
            page_size = 50
            timeout = "5s"
            """)
        try await Self.withRig(rig) { _ in
            let socket = rig.directory.file("io.syncd")
            let synced = try await rig.waitForStatus("demo synced and missing failed for good") { s in
                s.feed(named: "demo").map { $0.itemCount == 50 && $0.endReached } == true
                    && s.feed(named: "missing").map { $0.initial.phase == .failed && $0.initial.nextRetryAt == nil } == true
            }
            #expect(synced.feed(named: "demo")?.lastSync != nil)
            // The baseline as `syncctl status --json=short` encodes it, as the stale check reads it.
            let lastSync = try #require(try await Self.statusJSON(rig).feed(named: "demo")?.lastSync)

            let healthy = try await Self.syncctl(rig, ["status", "demo", "--socket", socket])
            #expect(healthy.status == 0, "demo synced: \(healthy)")
            let all = try await Self.syncctl(rig, ["status", "--socket", socket])
            #expect(all.status == 3, "a feed failed: \(all)")
            let missing = try await Self.syncctl(rig, ["status", "missing", "--socket", socket])
            #expect(missing.status == 3, "missing failed: \(missing)")
            #expect(missing.stdout.contains("404"), "\(missing)")

            // The metrics say the same as the status.
            let metrics = Self.samples(try await Self.syncctl(rig, ["metrics", "--socket", socket]).stdout)
            #expect(metrics.first { $0.name == "syncd_feed_requests_total" && $0.labels == ["feed": "missing", "direction": "initial", "outcome": "http_4xx"] }?.value == 1)
            #expect(metrics.first { $0.name == "syncd_feed_direction_state" && $0.labels == ["feed": "missing", "direction": "initial", "state": "failed"] }?.value == 1)

            // No refresh_interval is configured and nothing asks for one: no page is stored after
            // the sync, so once a second has passed since the last one, demo is stale for a
            // one-second limit (and not for an hour's).
            var stale: Exit?
            try await Self.poll(rig, "syncctl status demo --stale-after 1s to exit 2 (stale)") {
                let result = try await Self.syncctl(rig, ["status", "demo", "--stale-after", "1s", "--json=short", "--socket", socket])
                guard result.status == 2 else {
                    #expect(result.status == 0, "before it is stale, demo is healthy: \(result)")
                    return "\(result)"
                }
                stale = result
                return nil
            }
            let staleStatus = try ControlJSON.makeDecoder().decode(ControlStatus.self, from: Data(try #require(stale).stdout.utf8))
            #expect(staleStatus.feed(named: "demo")?.lastSync == lastSync, "a page was stored after the sync")
            let notYet = try await Self.syncctl(rig, ["status", "demo", "--stale-after", "1h", "--socket", socket])
            #expect(notYet.status == 0, "\(notYet)")
            let failedOutranksStale = try await Self.syncctl(rig, ["status", "--stale-after", "1s", "--socket", socket])
            #expect(failedOutranksStale.status == 3, "\(failedOutranksStale)")

            let nobody = try await Self.syncctl(rig, ["status", "--socket", "/nonexistent/io.syncd"])
            #expect(nobody.status == 1, "\(nobody)")
            #expect(nobody.stderr.contains("not running"), "\(nobody)")
        }
    }

    // MARK: Processes

    /// What a test started beside the rig, stopped (bounded) when the test ends, whichever way it ends.
    final class Started: Sendable {
        private let processes = Mutex<[ChildProcess]>([])
        private let directories = Mutex<[String]>([])
        private let kept = Mutex<[TemporaryDirectory]>([])

        @discardableResult
        func add(_ process: ChildProcess) -> ChildProcess {
            processes.withLock { $0.append(process) }
            return process
        }

        /// Removes `path` once every process has stopped.
        func removeAtEnd(_ path: String) { directories.withLock { $0.append(path) } }

        /// Keeps `directory` until every process has stopped.
        func keep(_ directory: TemporaryDirectory) { kept.withLock { $0.append(directory) } }

        func stopAll() async {
            for process in processes.withLock({ $0 }).reversed() { await process.stop() }
            for path in directories.withLock({ $0 }) { try? FileManager.default.removeItem(atPath: path) }
            kept.withLock { $0 = [] }
        }
    }

    /// Runs `body`, then stops what it started, syncd and the feed server: on every path.
    static func withRig(_ rig: Rig, _ body: (Started) async throws -> Void) async throws {
        let started = Started()
        func end() async {
            await started.stopAll()
            await rig.daemon.stop()
            await rig.feedServer.stop()
        }
        do {
            try await body(started)
        } catch {
            await end()
            throw error
        }
        await end()
    }

    /// A Prometheus in the rig's client namespace, scraping syncd's endpoint every second.
    final class Prometheus: Sendable {
        let rig: Rig
        let process: ChildProcess
        /// Every scrape error seen on the target.
        private let errors = Mutex<Set<String>>([])

        private init(rig: Rig, process: ChildProcess) {
            self.rig = rig
            self.process = process
        }

        /// Starts it with a data directory in the rig's (removed when it has stopped) and waits
        /// until it is ready.
        static func start(_ rig: Rig, _ started: Started) async throws -> Prometheus {
            let data = rig.directory.file("prometheus-data")
            try FileManager.default.createDirectory(atPath: data, withIntermediateDirectories: true)
            started.removeAtEnd(data)
            let config = rig.directory.file("prometheus.yml")
            try """
                global:
                  scrape_interval: 1s
                  scrape_timeout: 1s
                  evaluation_interval: 1s
                scrape_configs:
                  - job_name: syncd
                    static_configs:
                      - targets: ["127.0.0.1:\(PrometheusScrapeTests.metricsPort)"]
                """.write(toFile: config, atomically: true, encoding: .utf8)
            let process = started.add(try ChildProcess(
                ["ip", "netns", "exec", rig.topology.client.name, "prometheus",
                 "--config.file=\(config)", "--storage.tsdb.path=\(data)",
                 "--web.listen-address=127.0.0.1:\(PrometheusScrapeTests.prometheusPort)"],
                logPath: rig.directory.file("prometheus.log")))
            let prometheus = Prometheus(rig: rig, process: process)
            try await PrometheusScrapeTests.poll(rig, "Prometheus to answer /-/ready", also: [process]) {
                _ = try await PrometheusScrapeTests.get(rig, prometheus.url("/-/ready"))
                return nil
            }
            return prometheus
        }

        func url(_ path: String) -> String { "http://127.0.0.1:\(PrometheusScrapeTests.prometheusPort)\(path)" }

        /// An instant query's samples.
        func query(_ expression: String) async throws -> [Sample] {
            let encoded = expression.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? expression
            let body = try await PrometheusScrapeTests.get(rig, url("/api/v1/query?query=\(encoded)")).body
            guard let object = try JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any],
                  object["status"] as? String == "success",
                  let data = object["data"] as? [String: Any], let result = data["result"] as? [[String: Any]]
            else { throw Unexpected("Prometheus's answer to \(expression): \(body)") }
            return try result.map { series in
                guard let metric = series["metric"] as? [String: String], let pair = series["value"] as? [Any], pair.count == 2,
                      let text = pair[1] as? String, let value = Double(text)
                else { throw Unexpected("a series in Prometheus's answer to \(expression): \(series)") }
                return Sample(name: metric["__name__"] ?? "", labels: metric.filter { $0.key != "__name__" }, value: value)
            }
        }

        /// The value of a query that has one series; `nil` for none.
        func value(_ expression: String) async throws -> Double? {
            let samples = try await query(expression)
            guard samples.count <= 1 else { throw Unexpected("\(expression) has \(samples.count) series: \(samples)") }
            return samples.first?.value
        }

        /// The syncd target's health and last scrape error, as `/api/v1/targets` has them.
        func target() async throws -> (health: String, lastError: String) {
            let body = try await PrometheusScrapeTests.get(rig, url("/api/v1/targets")).body
            let object = try JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any]
            let targets = (object?["data"] as? [String: Any])?["activeTargets"] as? [[String: Any]] ?? []
            guard let target = targets.first(where: { ($0["labels"] as? [String: String])?["job"] == "syncd" }) else {
                throw Unexpected("no syncd target in \(body)")
            }
            let lastError = target["lastError"] as? String ?? "?"
            if !lastError.isEmpty { errors.withLock { _ = $0.insert(lastError) } }
            return (target["health"] as? String ?? "?", lastError)
        }

        /// Records every scrape error seen that says something about the exposition: a scrape
        /// that timed out (a loaded machine) or found nothing listening yet (Prometheus started
        /// first) says nothing about it.
        func recordScrapeErrors() {
            for error in errors.withLock({ $0 }).sorted()
            where !error.contains("deadline exceeded") && !error.contains("connection refused") {
                Issue.record("Prometheus reported a scrape error for syncd: \(error)")
            }
        }
    }

    // MARK: Commands

    /// A command's exit status and output.
    struct Exit: CustomStringConvertible, Sendable {
        var status: Int32
        var stdout: String
        var stderr: String
        var description: String { "exit \(status); stdout: \(stdout.prefix(3000)); stderr: \(stderr.prefix(3000))" }
    }

    /// Runs a command to its end (bounded by `runCommand`'s limit) and returns its exit status
    /// and output, whatever the status; its output goes through files in `directory`.
    static func run(_ arguments: [String], input: String? = nil, in directory: String) async throws -> Exit {
        let id = UUID().uuidString
        let out = "\(directory)/out-\(id)", err = "\(directory)/err-\(id)"
        defer {
            unlink(out)
            unlink(err)
        }
        let status = try await runCommand(
            ["env", "OUT=\(out)", "ERR=\(err)", "sh", "-c", "\"$@\" >\"$OUT\" 2>\"$ERR\"; echo $?", "sh"] + arguments, input: input)
        return Exit(
            status: Int32(status.trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1,
            stdout: (try? String(contentsOfFile: out, encoding: .utf8)) ?? "",
            stderr: (try? String(contentsOfFile: err, encoding: .utf8)) ?? "")
    }

    static func syncctl(_ rig: Rig, _ arguments: [String]) async throws -> Exit {
        try await run(["env", "-u", "SYNCD_SOCKET", "NO_COLOR=1", try BuildProducts.path("syncctl")] + arguments, in: rig.directory.path)
    }

    /// `syncctl status --json=short`, decoded.
    static func statusJSON(_ rig: Rig) async throws -> ControlStatus {
        let result = try await syncctl(rig, ["status", "--json=short", "--socket", rig.directory.file("io.syncd")])
        do {
            return try ControlJSON.makeDecoder().decode(ControlStatus.self, from: Data(result.stdout.utf8))
        } catch {
            throw Unexpected("syncctl status --json=short: \(result): \(error)")
        }
    }

    /// `promtool check metrics` on `text`: exit 0 and nothing to say.
    static func promtoolAccepts(_ text: String, from source: String, in rig: Rig) async throws {
        let result = try await run(["promtool", "check", "metrics"], input: text, in: rig.directory.path)
        #expect(result.status == 0 && result.stdout.isEmpty && result.stderr.isEmpty, "promtool check metrics on \(source): \(result)")
    }

    /// A GET from inside the client namespace (where syncd and the consumers listen): the
    /// response's Content-Type and body. Python's own timeout bounds it; an error status throws.
    static func get(_ rig: Rig, _ url: String, accept: String? = nil) async throws -> (contentType: String, body: String) {
        let script = """
            import sys, urllib.request
            headers = {"Accept": sys.argv[2]} if len(sys.argv) > 2 else {}
            with urllib.request.urlopen(urllib.request.Request(sys.argv[1], headers=headers), timeout=\(hangGuard.components.seconds)) as r:
                sys.stdout.write(r.headers.get("Content-Type", "") + "\\n" + r.read().decode())
            """
        let out = try await rig.topology.client.exec(["python3", "-c", script, url] + (accept.map { [$0] } ?? []))
        guard let newline = out.firstIndex(of: "\n") else { return (out, "") }
        return (String(out[..<newline]), String(out[out.index(after: newline)...]))
    }

    /// Polls `check` until it returns `nil`; its other answers say what it saw, and the last one
    /// is in the failure. An error counts as not yet (a server still starting). Fails at once
    /// when syncd or one of `also` exits, with its output.
    static func poll(
        _ rig: Rig, _ what: String, timeout: Duration = hangGuard * 2, also: [ChildProcess] = [],
        _ check: () async throws -> String?
    ) async throws {
        var last = "nothing yet"
        do {
            try await waitUntil(what, timeout: timeout, interval: .milliseconds(200)) {
                for process in [rig.daemon] + also where !process.isRunning {
                    throw Unexpected("a process exited while waiting for \(what); last seen: \(last); its output:\n\(process.output.suffix(4000))")
                }
                do {
                    guard let unmet = try await check() else { return true }
                    last = unmet
                } catch let error as Unexpected {
                    last = error.description
                } catch {
                    last = "\(error)"
                }
                return false
            }
        } catch let timedOut as WaitTimedOut {
            throw WaitTimedOut(description: "\(timedOut.description); last seen: \(last)")
        }
    }

    struct Unexpected: Error, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }

    // MARK: Exposition

    /// A sample: name, labels, value.
    struct Sample: Sendable, CustomStringConvertible {
        var name: String
        var labels: [String: String]
        var value: Double
        var description: String { "\(name)\(labels) \(value)" }
    }

    /// The state a connectivity is in, as `syncd_host_connectivity`'s `state` label names it.
    static func stateName(_ connectivity: ControlConnectivity) -> String? {
        switch connectivity {
        case .online: "online"
        case .limited: "limited"
        case .offline: "offline"
        }
    }

    /// The samples of a text exposition (Prometheus or OpenMetrics); lines it cannot read are skipped.
    static func samples(_ text: String) -> [Sample] {
        text.split(separator: "\n").compactMap { sample(String($0)) }
    }

    /// One sample line, `name{label="value",…} value [timestamp]`; `nil` when the line is not one.
    static func sample(_ line: String) -> Sample? {
        guard let first = line.first, first.isLetter || first == "_" || first == ":" else { return nil }
        var index = line.startIndex
        func isNameCharacter(_ c: Character) -> Bool { c.isASCII && (c.isLetter || c.isNumber || c == "_" || c == ":") }
        while index < line.endIndex, isNameCharacter(line[index]) { index = line.index(after: index) }
        let name = String(line[..<index])
        var labels: [String: String] = [:]
        if index < line.endIndex, line[index] == "{" {
            index = line.index(after: index)
            while index < line.endIndex, line[index] != "}" {
                let keyStart = index
                while index < line.endIndex, isNameCharacter(line[index]), line[index] != ":" { index = line.index(after: index) }
                let key = String(line[keyStart..<index])
                guard !key.isEmpty, index < line.endIndex, line[index] == "=" else { return nil }
                index = line.index(after: index)
                guard index < line.endIndex, line[index] == "\"" else { return nil }
                index = line.index(after: index)
                var value = ""
                while index < line.endIndex, line[index] != "\"" {
                    if line[index] == "\\" {
                        index = line.index(after: index)
                        guard index < line.endIndex else { return nil }
                        value.append(line[index] == "n" ? "\n" : line[index])
                    } else {
                        value.append(line[index])
                    }
                    index = line.index(after: index)
                }
                guard index < line.endIndex else { return nil }
                index = line.index(after: index)
                labels[key] = value
                if index < line.endIndex, line[index] == "," { index = line.index(after: index) }
            }
            guard index < line.endIndex else { return nil }
            index = line.index(after: index)
        }
        guard index < line.endIndex, line[index] == " " else { return nil }
        let rest = line[line.index(after: index)...].split(separator: " ", omittingEmptySubsequences: false)
        guard (1...2).contains(rest.count), let value = number(String(rest[0])) else { return nil }
        if rest.count == 2, Double(rest[1]) == nil { return nil }
        return Sample(name: name, labels: labels, value: value)
    }

    static func number(_ text: String) -> Double? {
        switch text {
        case "+Inf", "Inf": .infinity
        case "-Inf": -.infinity
        case "NaN": .nan
        default: text.allSatisfy({ $0.isASCII && ($0.isNumber || "+-.eE".contains($0)) }) ? Double(text) : nil
        }
    }

    /// What is wrong with a textfile as read: `nil` when it is a complete exposition (ends with
    /// a newline, has `syncd_build_info`, every line a comment or a sample).
    static func textfileProblem(_ text: String) -> String? {
        guard text.hasSuffix("\n") else { return "does not end with a newline" }
        guard text.contains("syncd_build_info") else { return "has no syncd_build_info" }
        for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).dropLast().enumerated() {
            if line.hasPrefix("# HELP ") || line.hasPrefix("# TYPE ") { continue }
            if sample(String(line)) == nil { return "line \(number + 1) is not a sample: \(line)" }
        }
        return nil
    }

    /// The names in an exposition's `# TYPE` lines.
    static func familyNames(_ text: String) -> Set<String> {
        Set(text.split(separator: "\n").compactMap { line in
            let words = line.split(separator: " ")
            return words.count == 4 && words[0] == "#" && words[1] == "TYPE" ? String(words[2]) : nil
        })
    }

    /// Where an OpenMetrics exposition breaks the format: family names unique, each family's
    /// samples together after its `# TYPE` and named as its type allows, `# EOF` last.
    static func openMetricsProblems(_ text: String) -> [String] {
        var problems: [String] = []
        var lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        guard lines.last == "", lines.dropLast().last == "# EOF" else { return ["does not end with \"# EOF\\n\""] }
        lines.removeLast(2)
        let suffixes: [String: [String]] = [
            "counter": ["_total", "_created"], "gauge": [""], "info": ["_info"],
            "histogram": ["_bucket", "_count", "_sum", "_created"], "unknown": [""],
        ]
        var seen: [String: String] = [:]
        var family: (name: String, type: String)?
        for line in lines {
            if line.hasPrefix("# TYPE ") {
                let words = line.split(separator: " ").map(String.init)
                guard words.count == 4 else { problems.append("a malformed TYPE line: \(line)"); continue }
                if let earlier = seen[words[2]] {
                    problems.append("the family name \(words[2]) is used twice (as \(earlier), then as \(words[3])); OpenMetrics requires unique family names")
                }
                seen[words[2]] = words[3]
                family = (words[2], words[3])
            } else if line.hasPrefix("#") {
                if !line.hasPrefix("# HELP ") && !line.hasPrefix("# UNIT ") { problems.append("an unknown comment: \(line)") }
            } else if let sample = sample(line) {
                guard let family else { problems.append("a sample before any TYPE: \(line)"); continue }
                let allowed = (suffixes[family.type] ?? [""]).map { family.name + $0 }
                if !allowed.contains(sample.name) {
                    problems.append("\(sample.name) is not a sample name of the \(family.type) family \(family.name) it follows")
                }
            } else {
                problems.append("not a sample: \(line)")
            }
        }
        return problems
    }

    /// Reads the metrics textfile over and over, on a thread of its own, keeping what it saw.
    final class TextfileReader: Sendable {
        struct Summary: Sendable {
            var reads = 0
            var distinct = 0
            /// Reads that were not a complete exposition, and the first few of them.
            var brokenCount = 0
            var broken: [String] = []
        }

        private struct State {
            var reads = 0
            var contents = Set<String>()
            var broken: [String] = []
            var brokenCount = 0
            var itemsSeen = Set<Int>()
            var latestItems: Int?
        }

        let path: String
        /// Families every complete version has.
        let families: Set<String>
        private let state = Mutex(State())
        private let stopped = Atomic<Bool>(false)

        init(path: String, families: Set<String>) {
            self.path = path
            self.families = families
        }

        /// What is wrong with `text` as a version of the file: ``textfileProblem(_:)``, or
        /// families missing (a file cut at a line's end).
        func problem(_ text: String) -> String? {
            if let problem = PrometheusScrapeTests.textfileProblem(text) { return problem }
            let missing = families.subtracting(PrometheusScrapeTests.familyNames(text))
            return missing.isEmpty ? nil : "lacks the families \(missing.sorted())"
        }

        var reads: Int { state.withLock { $0.reads } }
        var latestItems: Int? { state.withLock { $0.latestItems } }
        var summary: Summary {
            state.withLock { Summary(reads: $0.reads, distinct: $0.contents.count, brokenCount: $0.brokenCount, broken: $0.broken) }
        }

        func sawItems(_ count: Int) -> Bool { state.withLock { $0.itemsSeen.contains(count) } }

        func stop() { stopped.store(true, ordering: .releasing) }

        /// Reads until ``stop()``, or for at most three hang guards.
        func run() async throws {
            let path = self.path
            try await onDedicatedThread { [self] in
                let deadline = ContinuousClock.now + hangGuard * 3
                while !stopped.load(ordering: .acquiring) && ContinuousClock.now < deadline {
                    // The file exists from syncd's first write on (before the sync this test waited
                    // for), and a rename replaces it without a moment of absence.
                    let text = FileManager.default.contents(atPath: path).map { String(decoding: $0, as: UTF8.self) }
                    let problem = text.map(problem) ?? "could not be read"
                    let items = text.flatMap { text in
                        PrometheusScrapeTests.samples(text).first { $0.name == "syncd_feed_items" && $0.labels["feed"] == "demo" }.map { Int($0.value) }
                    }
                    state.withLock { state in
                        state.reads += 1
                        if let problem {
                            state.brokenCount += 1
                            if state.broken.count < 10 { state.broken.append("\(problem):\n\(text ?? "")") }
                        } else if let text {
                            state.contents.insert(text)
                            if let items {
                                state.itemsSeen.insert(items)
                                state.latestItems = items
                            }
                        }
                    }
                    usleep(2_000)
                }
            }
        }
    }
}
