import Foundation
import SyncControl
import SyncMetrics
import Testing
import TestSupport

/// The syncd binary's three ways out for its metrics, as the unit runs it (umask 0077), with a
/// feed whose server does not answer, so its requests fail and are counted.
@Suite(.timeLimit(.minutes(3)))
struct MetricsDaemonTests {
    static func configuration(_ directory: TemporaryDirectory, listen: String) -> String {
        SyncdConfig(
            store: directory.file("syncd.sqlite"),
            controlSocket: directory.file("io.syncd"),
            retry: SyncdConfig.Retry(base: "100ms", cap: "200ms"),
            metrics: SyncdConfig.Metrics(listen: listen, textfile: directory.file("syncd.prom"), textfileInterval: "1s"),
            feeds: [SyncdConfig.Feed(name: "home", url: "http://127.0.0.1:9/feeds/home")]
        ).toml
    }

    /// Starts syncd under `sh -c 'umask 077; exec …'`.
    static func start(_ directory: TemporaryDirectory, config: String, environment: [String] = []) throws -> ChildProcess {
        try config.write(toFile: directory.file("syncd.toml"), atomically: true, encoding: .utf8)
        return try ChildProcess(
            environment + ["sh", "-c", "umask 077; exec \"$0\" --config \"$1\"", try BuildProducts.path("syncd"), directory.file("syncd.toml")],
            logPath: directory.file("syncd.log"))
    }

    @Test func textfileEndpointAndSyncctlAgree() async throws {
        let directory = try TemporaryDirectory(prefix: "syncd-metrics")
        let socket = directory.file("metrics.sock")
        let daemon = try Self.start(directory, config: Self.configuration(directory, listen: socket))
        defer { Task { await daemon.stop() } }
        let textfile = directory.file("syncd.prom")

        // Failed requests (nothing listens on port 9) are counted, and the file shows them.
        try await waitUntil("the textfile counts a failed request") {
            let text = (try? String(contentsOfFile: textfile, encoding: .utf8)) ?? ""
            return text.contains(#"syncd_feed_requests_total{feed="home",direction="initial",outcome="transport"}"#)
        }
        let mode = try FileManager.default.attributesOfItem(atPath: textfile)[.posixPermissions] as? Int
        #expect(mode == 0o644, "node_exporter's user must read it whatever syncd's umask")

        let scraped = try await runCommand(["curl", "-sS", "--max-time", "20", "--unix-socket", socket, "http://syncd/metrics"])
        let listed = try await runCommand([try BuildProducts.path("syncctl"), "metrics", "--socket", directory.file("io.syncd")])
        let families = { (text: String) in Set(text.split(separator: "\n").filter { $0.hasPrefix("# TYPE ") }.map { String($0) }) }
        #expect(families(scraped) == families(listed))
        // Every family but the last success's, which waits for a first stored page.
        let expected = MetricCatalog.all.filter { $0 != MetricCatalog.feedLastSuccess }.map { "# TYPE \($0.name) \($0.kind.rawValue)" }
        #expect(families(scraped) == Set(expected), "\(scraped)")
        #expect(scraped.contains(#"syncd_build_info{version="\#(SyncdInterface.version)"} 1"#))
        #expect(scraped.contains("syncd_process_resident_memory_bytes "))
        // The retries after the first failure are counted as such.
        try await waitUntil("a retry is counted") {
            let text = try await runCommand(["curl", "-sS", "--max-time", "20", "--unix-socket", socket, "http://syncd/metrics"])
            return text.split(separator: "\n").contains { $0.hasPrefix(#"syncd_feed_retries_total{feed="home",direction="initial"}"#) && !$0.hasSuffix(" 0.0") && !$0.hasSuffix(" 0") }
        }

        let status = await daemon.stop()
        #expect(status == 0, "\(daemon.output)")
        #expect(!FileManager.default.fileExists(atPath: socket), "the endpoint's socket is removed on stop")
        // While syncd runs, a write in progress has its temporary file beside the target: only
        // once it has stopped must none be left.
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.hasSuffix(".tmp") }
        #expect(leftovers.isEmpty, "\(leftovers)")
    }

    /// An address another process holds: syncd says which and exits, never reporting ready,
    /// instead of running without the endpoint it was told to serve.
    @Test func aTakenAddressIsAClearFailure() async throws {
        let directory = try TemporaryDirectory(prefix: "syncd-metrics")
        let holder = ReservedPort(listening: true)
        defer { withExtendedLifetime(holder) {} }
        let notify = try ReadinessTests.NotifySocket(path: directory.file("notify"))
        let daemon = try Self.start(
            directory, config: Self.configuration(directory, listen: "127.0.0.1:\(holder.port)"), environment: ["NOTIFY_SOCKET=\(notify.path)"])
        try await waitUntil("syncd exits") { !daemon.isRunning }
        let status = await daemon.stop()
        #expect(status != 0)
        #expect(daemon.output.contains("cannot serve metrics on 127.0.0.1:\(holder.port)"), "\(daemon.output)")
        // Everything it sent is queued on the socket by now: it exited.
        let messages = try await notify.messages(until: "READY=1", timeout: .milliseconds(500))
        #expect(!messages.contains { $0.split(separator: "\n").contains("READY=1") }, "ready without its endpoint: \(messages)")
    }
}
