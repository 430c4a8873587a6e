import ConnectivityPolicy
import Foundation
import SyncCore
import Testing
import TestSupport
@testable import SyncMetrics

/// A reading of the Prometheus text format written here, sharing nothing with the exposition
/// code: families with their `# TYPE` and `# HELP`, and samples by name and labels.
struct ParsedExposition {
    var types: [String: String] = [:]
    var help: [String: String] = [:]
    /// Sample name and sorted `k="v"` labels → value.
    var samples: [String: Double] = [:]

    init(_ text: String) {
        for line in text.split(separator: "\n") {
            if line.hasPrefix("# TYPE ") {
                let parts = line.split(separator: " ")
                types[String(parts[2])] = String(parts[3])
            } else if line.hasPrefix("# HELP ") {
                let parts = line.split(separator: " ", maxSplits: 3)
                help[String(parts[2])] = parts.count > 3 ? String(parts[3]) : ""
            } else if !line.hasPrefix("#") {
                guard let space = line.lastIndex(of: " "), let value = Double(line[line.index(after: space)...]) else { continue }
                let series = String(line[..<space])
                samples[Self.canonical(series)] = value
            }
        }
    }

    /// `name{b="2",a="1"}` → `name{a="1",b="2"}`.
    static func canonical(_ series: String) -> String {
        guard let open = series.firstIndex(of: "{") else { return series }
        let name = series[..<open]
        let labels = series[series.index(after: open)..<series.index(before: series.endIndex)]
            .split(separator: ",").map(String.init).sorted()
        return "\(name){\(labels.joined(separator: ","))}"
    }

    func value(_ series: String) -> Double? { samples[Self.canonical(series)] }
}

@Suite("Metrics recorded and exposed")
struct SyncdMetricsTests {
    static func text(_ metrics: SyncdMetrics) -> ParsedExposition {
        ParsedExposition(String(decoding: metrics.exposition(.prometheusText), as: UTF8.self))
    }

    static let path = OnlinePath(link: "eth0", linkIndex: 2, family: .ipv4, route: IPPrefix("0.0.0.0/0")!, gateway: nil)

    /// Every family of the catalog, after one of each event; nothing that is not in the catalog.
    @Test func everyCatalogFamilyIsExposedWithItsTypeAndHelp() {
        let metrics = SyncdMetrics(version: "9.9.9")
        metrics.requestStarted(feed: "home", direction: .initial)
        metrics.requestEnded(feed: "home", direction: .initial, outcome: .success, duration: .milliseconds(20), at: Date(timeIntervalSince1970: 1000))
        metrics.update([FeedState(feed: "home", hasLoaded: true, itemCount: 40, lastSyncAt: Date(timeIntervalSince1970: 1000))])
        metrics.receivedBytes(feed: "home", total: 512)
        metrics.verdict(.online(Self.path), host: "example.org")
        metrics.store(databaseBytes: 4096, logBytes: 0)
        metrics.control(open: 1, accepted: 3, refused: ["user_limit": 1])
        metrics.process(ProcessSample(cpuSeconds: 1.5, residentBytes: 1 << 20, openDescriptors: 12, startTime: Date(timeIntervalSince1970: 500)))
        let parsed = Self.text(metrics)

        for family in MetricCatalog.all {
            let type = family.kind.rawValue
            #expect(parsed.types[family.name] == type, "\(family.name)")
            #expect(parsed.help[family.name] == family.help, "\(family.name)")
        }
        #expect(Set(parsed.types.keys) == Set(MetricCatalog.all.map(\.name)))
        #expect(parsed.value(#"syncd_build_info{version="9.9.9"}"#) == 1)
        #expect(parsed.value(#"syncd_feed_items{feed="home"}"#) == 40)
        #expect(parsed.value(#"syncd_feed_last_success_timestamp_seconds{feed="home"}"#) == 1000)
        #expect(parsed.value(#"syncd_feed_requests_total{feed="home",direction="initial",outcome="success"}"#) == 1)
        #expect(parsed.value(#"syncd_feed_request_duration_seconds_bucket{feed="home",direction="initial",le="0.025"}"#) == 1)
        #expect(parsed.value(#"syncd_feed_request_duration_seconds_bucket{feed="home",direction="initial",le="0.01"}"#) == 0)
        #expect(parsed.value(#"syncd_feed_received_bytes_total{feed="home"}"#) == 512)
        #expect(parsed.value(#"syncd_feed_direction_state{feed="home",direction="initial",state="idle"}"#) == 1)
        #expect(parsed.value(#"syncd_feed_direction_state{feed="home",direction="initial",state="loaded"}"#) == 0)
        #expect(parsed.value(#"syncd_process_cpu_seconds_total"#) == 1.5)
        #expect(parsed.value(#"syncd_feed_retries_total{feed="home",direction="older"}"#) == 0, "made at zero")
        #expect(parsed.value(#"syncd_control_refused_connections_total{reason="user_limit"}"#) == 1)
    }

    /// A request that follows a failure of its direction is a retry; a success ends the run.
    @Test func retriesAreRequestsAfterAFailureOfTheSameDirection() {
        let metrics = SyncdMetrics(version: "1")
        func request(_ direction: Direction, _ outcome: RequestOutcome) {
            metrics.requestStarted(feed: "f", direction: direction)
            metrics.requestEnded(feed: "f", direction: direction, outcome: outcome, duration: .milliseconds(1), at: Date())
        }
        request(.older, .timeout)
        request(.newer, .success)  // another direction: no retry
        request(.older, .http5xx)  // retry 1
        request(.older, .cancelled)  // retry 2; a cancellation keeps the failure pending
        request(.older, .success)  // retry 3
        request(.older, .success)  // not a retry
        let parsed = Self.text(metrics)
        #expect(parsed.value(#"syncd_feed_retries_total{feed="f",direction="older"}"#) == 3)
        #expect(parsed.value(#"syncd_feed_retries_total{feed="f",direction="newer"}"#) == nil, "made at zero by update(_:) only")
        #expect(parsed.value(#"syncd_feed_requests_total{feed="f",direction="older",outcome="timeout"}"#) == 1)
        #expect(parsed.value(#"syncd_feed_requests_total{feed="f",direction="older",outcome="success"}"#) == 2)
    }

    /// A verdict repeated is no change; a new reason is one, and the state set follows it.
    @Test func hostChangesCountOnlyChanges() {
        let metrics = SyncdMetrics(version: "1")
        metrics.verdict(.online(Self.path), host: "h")
        metrics.verdict(.online(Self.path), host: "h")
        metrics.verdict(.offline(.noCarrier), host: "h")
        metrics.verdict(.offline(.noRoute), host: "h")
        metrics.verdict(.limited(Limitation(.portal, detail: "http://portal")), host: "h")
        var parsed = Self.text(metrics)
        #expect(parsed.value(#"syncd_host_connectivity_changes_total{feed_host="h",reason="none"}"#) == 1)
        #expect(parsed.value(#"syncd_host_connectivity_changes_total{feed_host="h",reason="no_carrier"}"#) == 1)
        #expect(parsed.value(#"syncd_host_connectivity_changes_total{feed_host="h",reason="no_route"}"#) == 1)
        #expect(parsed.value(#"syncd_host_connectivity{feed_host="h",state="limited"}"#) == 1)
        #expect(parsed.value(#"syncd_host_connectivity{feed_host="h",state="offline"}"#) == 0)
        #expect(parsed.value(#"syncd_host_reason{feed_host="h",reason="portal"}"#) == 1)
        #expect(parsed.value(#"syncd_host_reason{feed_host="h",reason="no_route"}"#) == 0)
        metrics.verdict(.online(Self.path), host: "h")
        parsed = Self.text(metrics)
        #expect(parsed.value(#"syncd_host_connectivity_changes_total{feed_host="h",reason="none"}"#) == 2)
        #expect(parsed.value(#"syncd_host_connectivity{feed_host="h",state="online"}"#) == 1)
        #expect(parsed.value(#"syncd_host_reason{feed_host="h",reason="none"}"#) == 1)
    }

    /// Totals kept elsewhere become counters that only go up.
    @Test func mirroredTotalsOnlyGoUp() {
        let metrics = SyncdMetrics(version: "1")
        metrics.receivedBytes(feed: "f", total: 0)
        #expect(Self.text(metrics).value(#"syncd_feed_received_bytes_total{feed="f"}"#) == 0, "registered at zero")
        metrics.receivedBytes(feed: "f", total: 100)
        metrics.receivedBytes(feed: "f", total: 250)
        metrics.receivedBytes(feed: "f", total: 200)
        #expect(Self.text(metrics).value(#"syncd_feed_received_bytes_total{feed="f"}"#) == 250)
    }

    /// Each direction is in exactly one state; paused wins over the load phase.
    @Test func directionStatesAreAStateSet() {
        let metrics = SyncdMetrics(version: "1")
        let failure = LoadFailure(error: FeedError(.timeout, "t"), attempt: 2, nextRetryAt: nil)
        let retrying = LoadFailure(error: FeedError(.timeout, "t"), attempt: 2, nextRetryAt: Date())
        metrics.update([
            FeedState(feed: "f", initial: .init(load: .loaded), older: .init(load: .failed(failure), paused: true), newer: .init(load: .loading)),
            FeedState(feed: "g", initial: .init(load: .failed(failure)), older: .init(load: .failed(retrying))),
        ])
        let parsed = Self.text(metrics)
        for (feed, direction, expected) in [
            ("f", "initial", "loaded"), ("f", "older", "paused"), ("f", "newer", "loading"),
            ("g", "initial", "failed"), ("g", "older", "retrying"), ("g", "newer", "idle"),
        ] {
            for state in SyncdMetrics.directionStates {
                #expect(parsed.value(#"syncd_feed_direction_state{feed="\#(feed)",direction="\#(direction)",state="\#(state)"}"#) == (state == expected ? 1 : 0), "\(feed) \(direction) \(state)")
            }
        }
    }

    @Test func outcomesOfErrors() {
        #expect(RequestOutcome(CancellationError()) == .cancelled)
        #expect(RequestOutcome(FeedError(.httpStatus(404), "")) == .http4xx)
        #expect(RequestOutcome(FeedError(.httpStatus(503), "")) == .http5xx)
        #expect(RequestOutcome(FeedError(.httpStatus(301), "")) == .http3xx)
        #expect(RequestOutcome(FeedError(.httpStatus(99), "")) == .httpOther)
        #expect(RequestOutcome(FeedError(.tooLarge, "")) == .tooLarge)
        #expect(RequestOutcome(POSIXError(.EIO)) == .other)
    }
}

@Suite("OpenMetrics")
struct OpenMetricsTests {
    /// Counter and info families lose their suffix in the metadata only; the text ends in `# EOF`.
    @Test func metadataIsRenamedAndSamplesKept() {
        let metrics = SyncdMetrics(version: "2.0")
        metrics.control(open: 0, accepted: 7, refused: [:])
        let prometheus = String(decoding: metrics.exposition(.prometheusText), as: UTF8.self)
        let open = String(decoding: metrics.exposition(.openMetrics), as: UTF8.self)
        #expect(open.hasSuffix("\n# EOF\n"))
        #expect(open.contains("# TYPE syncd_control_connections counter\n"))
        #expect(open.contains("# HELP syncd_control_connections Control socket connections accepted.\n"))
        #expect(open.contains("# TYPE syncd_control_open_connections gauge\n"), "a gauge keeps its name")
        #expect(open.contains("# TYPE syncd_build info\n"))
        #expect(open.contains("\nsyncd_control_connections_total 7.0\n"))
        #expect(open.contains(#"syncd_build_info{version="2.0"} 1"#))
        let samples = { (text: String) in text.split(separator: "\n").filter { !$0.hasPrefix("#") } }
        #expect(samples(open) == samples(prometheus))
        // OpenMetrics families must have distinct names once counters lose their suffix.
        let families = open.split(separator: "\n").filter { $0.hasPrefix("# TYPE ") }.map { $0.split(separator: " ")[2] }
        #expect(Set(families).count == families.count, "\(families)")
        #expect(!open.contains("# TYPE syncd_control_connections_total"))
    }

    /// Every counter of the catalog ends in `_total`, which the conversion relies on.
    @Test func everyCounterEndsInTotal() {
        for family in MetricCatalog.all where family.kind == .counter {
            #expect(family.name.hasSuffix("_total"), "\(family.name)")
        }
        for family in MetricCatalog.all where family.kind != .counter {
            #expect(!family.name.hasSuffix("_total"), "\(family.name)")
        }
    }
}

@Suite("Process figures")
struct ProcessSampleTests {
    /// The command name may hold spaces and parentheses: fields count from its last `)`.
    @Test func statWithAHostileCommandName() throws {
        let stat = "4242 (sync d) (x) S 1 4242 4242 0 -1 4194560 900 0 0 0 250 50 0 0 20 0 9 0 1000 123456789 3000 18446744073709551615 1 1 0 0 0 0 0 4096 0 0 0 0 17 1 0 0 0 0 0"
        let sample = try #require(ProcessSample.parse(stat: stat, bootTime: 1_700_000_000, openDescriptors: 9, ticksPerSecond: 100, pageSize: 4096))
        #expect(sample.cpuSeconds == 3.0)
        #expect(sample.residentBytes == 3000 * 4096)
        #expect(sample.startTime == Date(timeIntervalSince1970: 1_700_000_010))
        #expect(sample.openDescriptors == 9)
        #expect(ProcessSample.parse(stat: "4242 (x", bootTime: 0, openDescriptors: 0, ticksPerSecond: 100, pageSize: 4096) == nil)
        #expect(ProcessSample.parse(stat: "4242 (x) S 1 2", bootTime: 0, openDescriptors: 0, ticksPerSecond: 100, pageSize: 4096) == nil)
    }

    /// This process, read from /proc: its start time agrees with ps's (`etimes`, to the second),
    /// and the other figures are plausible.
    @Test func thisProcess() async throws {
        let sample = try #require(ProcessSample.current())
        // ps measures "now" somewhere between these two instants, however long it takes to run.
        let before = Date()
        let output = try await runCommand(["ps", "-o", "etimes=", "-p", "\(getpid())"]).trimmingCharacters(in: .whitespacesAndNewlines)
        let after = Date()
        let elapsed = try #require(Double(output))
        // etimes is whole seconds, rounded down: the start lies within a second before now − etimes.
        let earliest = before.addingTimeInterval(-elapsed - 1.1), latest = after.addingTimeInterval(-elapsed + 0.1)
        #expect(sample.startTime >= earliest && sample.startTime <= latest, "start \(sample.startTime), ps says between \(earliest) and \(latest)")
        #expect(sample.residentBytes > 0)
        #expect(sample.openDescriptors >= 3)
        #expect(sample.startTime <= Date())
        #expect(sample.startTime > Date(timeIntervalSinceNow: -86_400 * 365))
    }
}
