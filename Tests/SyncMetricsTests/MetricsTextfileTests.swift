import Foundation
import Logging
import Synchronization
import Testing
import TestSupport
@testable import SyncMetrics

/// The textfile writer with an injected clock: when it writes, what, and how.
@Suite("Metrics textfile", .timeLimit(.minutes(2)))
struct MetricsTextfileTests {
    /// What the writer's `collect` returns, and how often it was asked.
    final class Source: Sendable {
        private let state = Mutex((text: "a 1\n", asked: 0))
        var text: String {
            get { state.withLock { $0.text } }
            set { state.withLock { $0.text = newValue } }
        }
        var asked: Int { state.withLock { $0.asked } }
        func collect() -> [UInt8] { state.withLock { $0.asked += 1; return Array($0.text.utf8) } }
    }

    static func inode(_ path: String) -> UInt64? {
        var info = stat()
        return stat(path, &info) == 0 ? UInt64(info.st_ino) : nil
    }

    static func contents(_ path: String) -> String? { try? String(contentsOfFile: path, encoding: .utf8) }

    @Test func writesAtStartThenAfterChangesAtMostOncePerInterval() async throws {
        let directory = try TemporaryDirectory(prefix: "textfile")
        let path = directory.file("syncd.prom")
        let clock = ManualClock()
        let source = Source()
        let (changes, changed) = AsyncStream<Void>.makeStream()
        var configuration = MetricsTextfileConfiguration(path: path)
        configuration.interval = .seconds(10)
        let writer = MetricsTextfile(configuration: configuration, changes: changes, clock: clock, logger: Logger(label: "test")) { source.collect() }
        let running = BoundedTask { await writer.run() }
        defer { running.cancel() }

        try await waitUntil("the first write") { Self.contents(path) == "a 1\n" }
        // A change within the interval waits for the rest of it, then writes once.
        source.text = "a 2\n"
        changed.yield()
        try await clock.advance(by: .seconds(10), waking: "the textfile's interval")
        try await waitUntil("the write after the interval") { Self.contents(path) == "a 2\n" }

        // Text that did not change is not written again (the file keeps its inode).
        let inode = Self.inode(path)
        let asked = source.asked
        changed.yield()
        try await clock.advance(by: .seconds(10), waking: "the textfile's interval")
        try await waitUntil("the unchanged text was collected") { source.asked > asked }
        #expect(Self.inode(path) == inode)

        // Long after the last write, a change is written at once, with no timer.
        await clock.advance(by: .seconds(60))
        source.text = "a 3\n"
        changed.yield()
        try await waitUntil("the write of a change long after the last") { Self.contents(path) == "a 3\n" }
        #expect(clock.sleepers.isEmpty, "nothing sleeps between changes")

        // Readable by others (node_exporter runs as its own user) whatever this process's umask.
        let mode = try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int
        #expect(mode == 0o644)
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0 != "syncd.prom" }
        #expect(leftovers.isEmpty, "\(leftovers)")
        running.cancel()
        try await running.value("the writer after cancellation")
    }

    /// A burst of changes (a backfill reports one per page) makes one write, not one per
    /// change an interval apart (which kept an idle daemon writing every
    /// interval for as many intervals as the backfill had pages).
    @Test func aBurstOfChangesMakesOneWrite() async throws {
        let directory = try TemporaryDirectory(prefix: "textfile")
        let clock = ManualClock()
        let source = Source()
        let (changes, changed) = AsyncStream<Void>.makeStream()
        var configuration = MetricsTextfileConfiguration(path: directory.file("syncd.prom"))
        configuration.interval = .seconds(10)
        let writer = MetricsTextfile(configuration: configuration, changes: changes, clock: clock, logger: Logger(label: "test")) { source.collect() }
        let running = BoundedTask { await writer.run() }
        defer { running.cancel() }
        try await waitUntil("the first write") { source.asked == 1 }
        for n in 1...50 {
            source.text = "a \(n)\n"
            changed.yield()
        }
        // Once the changes end, the writer ends after writing what is pending. Every change
        // came before the interval ran out, so the one write sees them all.
        changed.finish()
        try await waitUntil("the writer waits out its interval") { !clock.sleepers.isEmpty }
        try await clock.advance(by: .seconds(10), eachTimeAsleepUntil: "the writer has written the burst and ended") { running.hasEnded }
        // One collect for the burst; a second only if the forwarding of the last changes was
        // still running when the write collected (it then finds the text unchanged).
        #expect((2...3).contains(source.asked), "\(source.asked - 1) collects for 50 changes")
        #expect(Self.contents(directory.file("syncd.prom")) == "a 50\n")
    }

    /// A directory that is missing at first: the failure is logged and the next change writes.
    @Test func aFailedWriteIsRetriedAtTheNextChange() async throws {
        let directory = try TemporaryDirectory(prefix: "textfile")
        let path = directory.file("later/syncd.prom")
        let source = Source()
        let (changes, changed) = AsyncStream<Void>.makeStream()
        var configuration = MetricsTextfileConfiguration(path: path)
        configuration.interval = .zero
        let writer = MetricsTextfile(configuration: configuration, changes: changes, clock: ManualClock(), logger: Logger(label: "test")) { source.collect() }
        let running = BoundedTask { await writer.run() }
        defer { running.cancel() }
        try await waitUntil("the first (failing) write was attempted") { source.asked == 1 }
        try FileManager.default.createDirectory(atPath: directory.file("later"), withIntermediateDirectories: false)
        changed.yield()
        try await waitUntil("the write once the directory exists") { Self.contents(path) == "a 1\n" }
    }

    /// The error names the file and what to check.
    @Test func errorsSayWhatAndWhere() {
        #expect(throws: TextfileError.self) { try MetricsTextfile<ManualClock, Void>.replace("/nonexistent-dir/x.prom", with: []) }
        do {
            try MetricsTextfile<ManualClock, Void>.replace("/nonexistent-dir/x.prom", with: [])
        } catch {
            #expect(error.description.contains("/nonexistent-dir/.x.prom."), "\(error)")
            #expect(error.description.contains("No such file or directory"), "\(error)")
            #expect(error.description.contains("[metrics] textfile"), "\(error)")
        }
    }

    /// Readers racing the writer see one whole version or another, never a part.
    @Test func readersNeverSeeAPartialFile() async throws {
        let directory = try TemporaryDirectory(prefix: "textfile")
        let path = directory.file("syncd.prom")
        // Large enough that a write takes several system calls' worth of pages.
        func version(_ n: Int) -> [UInt8] { Array(String(repeating: "syncd_x{n=\"\(n)\"} \(n)\n", count: 20_000).utf8) + Array("end \(n)\n".utf8) }
        try MetricsTextfile<ManualClock, Void>.replace(path, with: version(0))
        let writer = Task.detached {
            for n in 1...50 { try MetricsTextfile<ManualClock, Void>.replace(path, with: version(n)) }
        }
        var reads = 0
        while reads < 200 {
            let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
            let last = String(decoding: bytes.suffix(12), as: UTF8.self)
            let n = Int(last.split(separator: " ").last?.dropLast() ?? "") ?? -1
            #expect(n >= 0 && bytes == version(n), "read \(reads) saw a partial or mixed file (\(bytes.count) bytes)")
            reads += 1
        }
        try await boundedValue(of: writer, "the writer task")
    }
}
