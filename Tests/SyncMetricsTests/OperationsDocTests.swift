import Foundation
import SyncMetrics
import Testing
import TestSupport

/// docs/operations.md and the example alerting rules are what operators copy from: they are
/// checked against ``MetricCatalog`` (a renamed or added metric fails here until the guide
/// follows) and against promtool (a rule that does not load, or does not fire as its unit tests
/// say, fails here rather than in someone's Prometheus).
@Suite("operations documentation")
struct OperationsDocTests {
    /// The repository's root, found from this file so the tests run from any directory.
    static let root = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// The operators' guide.
    static let guide = "docs/operations.md"
    /// The example Prometheus rules file the guide refers to.
    static let rules = "docs/prometheus/syncd-alerts.yml"
    /// promtool's unit tests of ``rules``; its `rule_files` names the rules file beside it.
    static let rulesTests = "docs/prometheus/syncd-alerts.test.yml"

    /// The alerts the guide promises; each must exist, be documented and have a unit test.
    static let requiredAlerts = ["SyncdDown", "SyncdFeedStale", "SyncdFeedFailed", "SyncdHostOffline", "SyncdRetryStorm", "SyncdStoreLarge"]

    /// The text of the repository file at `path`.
    static func read(_ path: String) throws -> String {
        try String(contentsOf: root.appendingPathComponent(path), encoding: .utf8)
    }

    /// The absolute path of the repository file at `path`, for commands run from anywhere.
    static func absolute(_ path: String) -> String {
        root.appendingPathComponent(path).path
    }

    /// One row of the guide's metric table.
    struct Row: Equatable, CustomStringConvertible {
        /// The family name, as the first cell gives it.
        var name: String
        /// The type, as the second cell gives it.
        var kind: String
        /// The label names in the third cell (`—` for none).
        var labels: [String]

        /// As a failing comparison prints it.
        var description: String { "\(name) \(kind) [\(labels.joined(separator: ","))]" }
    }

    /// The rows of the guide's metric table: those whose first cell is a backquoted `syncd_` name.
    static func metricTable(_ text: String) throws -> [Row] {
        let backquoted = try Regex("`([^`]+)`")
        return text.split(separator: "\n").filter { $0.hasPrefix("| `syncd_") }.map { line in
            let cells = line.split(separator: "|", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
            let name = cells[1].trimmingCharacters(in: CharacterSet(charactersIn: "`"))
            let labels = cells.count > 3 ? cells[3].matches(of: backquoted).compactMap { $0.output[1].substring.map(String.init) } : []
            return Row(name: name, kind: cells.count > 2 ? cells[2] : "", labels: labels)
        }
    }

    /// Every `syncd_…` name in `text`, where it is not part of a longer word.
    static func mentionedNames(_ text: String) throws -> Set<String> {
        let name = try Regex("(?:^|[^A-Za-z0-9_])(syncd_[a-z0-9_]+)")
        return Set(text.matches(of: name).compactMap { $0.output[1].substring.map(String.init) })
    }

    /// Whether `name` means a family of the catalog: the family's own name, a histogram's
    /// sample name (`_bucket`, `_sum`, `_count`), or a prefix ending in `_` (`syncd_process_…`)
    /// that some family starts with.
    static func isCatalogued(_ name: String) -> Bool {
        let families = MetricCatalog.all
        if families.contains(where: { $0.name == name }) { return true }
        for suffix in ["_bucket", "_sum", "_count"] where name.hasSuffix(suffix) {
            let family = String(name.dropLast(suffix.count))
            if families.contains(where: { $0.name == family && $0.kind == .histogram }) { return true }
        }
        return name.hasSuffix("_") && families.contains { $0.name.hasPrefix(name) }
    }

    /// The alert names the rules file defines.
    static func alertNames(_ rulesText: String) throws -> [String] {
        let alert = try Regex(#"(?m)^\s*- alert:\s*([A-Za-z0-9_]+)\s*$"#)
        return rulesText.matches(of: alert).compactMap { $0.output[1].substring.map(String.init) }
    }

    /// promtool on `PATH`, where scripts/install-deps puts it (the Debian `prometheus` package).
    static func promtool() -> String? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin"
        return path.split(separator: ":").map { "\($0)/promtool" }.first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    /// promtool, or a failure that says how to get it: CI installs it, so a missing promtool is
    /// a broken setup, not a reason to skip.
    static func requirePromtool() throws -> String {
        try #require(promtool(), "promtool is not on PATH: run scripts/install-deps (it installs the prometheus package; CI does the same)")
    }

    // MARK: The guide and the catalog

    /// The table lists every family, in the catalog's order, with the catalog's type and labels,
    /// and nothing else.
    @Test func metricTableIsTheCatalog() throws {
        let rows = try Self.metricTable(try Self.read(Self.guide))
        let expected = MetricCatalog.all.map { Row(name: $0.name, kind: $0.kind.rawValue, labels: $0.labels) }
        #expect(rows == expected, "docs/operations.md's metric table differs from MetricCatalog.all")
        for family in MetricCatalog.all where !rows.contains(where: { $0.name == family.name }) {
            Issue.record("\(family.name) is missing from docs/operations.md's metric table")
        }
    }

    /// No metric the guide or the rules name is one syncd does not export.
    @Test(arguments: [OperationsDocTests.guide, OperationsDocTests.rules, OperationsDocTests.rulesTests])
    func mentionedMetricsExist(_ path: String) throws {
        let names = try Self.mentionedNames(try Self.read(path))
        #expect(!names.isEmpty, "\(path) names no syncd metric: the search for names is broken")
        for name in names.sorted() where !Self.isCatalogued(name) {
            Issue.record("\(path) mentions \(name), which is not in MetricCatalog.all")
        }
    }

    /// The name check itself tells catalogued names from others, so a pass above means something.
    @Test func nameCheckRejectsUnknownNames() throws {
        #expect(Self.isCatalogued("syncd_feed_items"))
        #expect(Self.isCatalogued("syncd_feed_request_duration_seconds_bucket"))
        #expect(Self.isCatalogued("syncd_process_"))
        #expect(!Self.isCatalogued("syncd_feed_items_bucket"), "_bucket of a gauge is no sample name")
        #expect(!Self.isCatalogued("syncd_feed_requests"))
        #expect(!Self.isCatalogued("syncd_nothing_"))
        #expect(try Self.mentionedNames("x `syncd_a` (syncd_b{c}) my_syncd_d\nsyncd_e") == ["syncd_a", "syncd_b", "syncd_e"])
    }

    /// Each alert the rules file defines is explained in the guide and has a unit test; the
    /// required ones exist; the guide leaves the measured series count to BENCHMARKS.md.
    @Test func alertsAreDocumentedAndTested() throws {
        let guide = try Self.read(Self.guide)
        let tests = try Self.read(Self.rulesTests)
        let alerts = try Self.alertNames(try Self.read(Self.rules))
        for name in Self.requiredAlerts {
            #expect(alerts.contains(name), "\(Self.rules) defines no alert \(name)")
        }
        for name in alerts {
            #expect(guide.contains("`\(name)`"), "docs/operations.md does not explain \(name)")
            #expect(tests.contains("alertname: \(name)\n"), "\(Self.rulesTests) has no test of \(name)")
        }
        #expect(guide.contains(Self.rules.replacingOccurrences(of: "docs/", with: "")), "docs/operations.md does not refer to the rules file")
        // The series count is a measured figure, with where it was measured.
        #expect(guide.contains("\nMeasured: ") && guide.contains("(BENCHMARKS.md, \"Metrics\")"), "docs/operations.md gives no measured series count")
    }

    // MARK: promtool

    /// The rules file loads: its YAML, PromQL and templates are valid.
    @Test func promtoolAcceptsTheRules() async throws {
        let promtool = try Self.requirePromtool()
        let output = try await runCommand([promtool, "check", "rules", Self.absolute(Self.rules)])
        #expect(output.contains("SUCCESS"), "promtool check rules said: \(output)")
    }

    /// Every alert fires, and stays quiet, as the unit tests say.
    @Test func promtoolUnitTestsPass() async throws {
        let promtool = try Self.requirePromtool()
        let output = try await runCommand([promtool, "test", "rules", Self.absolute(Self.rulesTests)])
        #expect(output.contains("SUCCESS"), "promtool test rules said: \(output)")
    }

    /// The unit tests can fail: a copy whose expected alert names another feed than the one that
    /// fails is refused, for that alert. Without this, a test file promtool ignored would pass.
    @Test func promtoolUnitTestsCanFail() async throws {
        let promtool = try Self.requirePromtool()
        let tests = try Self.read(Self.rulesTests)
        let expected = "feed: gone\n"
        #expect(tests.components(separatedBy: expected).count == 2, "the test file should expect feed \"gone\" once (SyncdFeedFailed)")
        let directory = try TemporaryDirectory(prefix: "syncd-alerts")
        try String(contentsOfFile: Self.absolute(Self.rules), encoding: .utf8)
            .write(toFile: directory.file("syncd-alerts.yml"), atomically: true, encoding: .utf8)
        try tests.replacingOccurrences(of: expected, with: "feed: elsewhere\n")
            .write(toFile: directory.file("syncd-alerts.test.yml"), atomically: true, encoding: .utf8)
        do {
            let output = try await runCommand([promtool, "test", "rules", directory.file("syncd-alerts.test.yml")])
            Issue.record("promtool test rules passed a test file that expects the wrong feed: \(output)")
        } catch let failure as CommandFailed {
            // 1 is promtool's "a test failed"; a kill after the time limit would be 137.
            #expect(failure.status == 1, "\(failure)")
            #expect(failure.stderr.contains("alertname: SyncdFeedFailed"), "promtool failed for another reason: \(failure.stderr)")
            #expect(failure.stderr.contains(#"feed="elsewhere""#), "promtool failed for another reason: \(failure.stderr)")
        }
    }
}
