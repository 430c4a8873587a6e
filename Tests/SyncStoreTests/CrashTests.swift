import Foundation
import Synchronization
import SyncCore
import SyncStore
import Testing
import TestSupport

/// A running `store-writer`, read line by line and killed with SIGKILL.
///
/// It runs as a ``ChildProcess``: its output goes to a log file that the test polls (bounded, by
/// ``waitUntil(_:timeout:interval:isolation:_:)``), and it is reaped with a bounded wait, never by
/// a read to the end of a pipe or `waitUntilExit()`, which would wait for good on a writer that
/// hangs.
private final class Writer: Sendable {
    private let process: ChildProcess
    /// Lines already handed out by ``waitForLine(_:timeout:where:)``.
    private let consumed = Mutex(0)

    init(_ arguments: [String], in directory: TemporaryDirectory) throws {
        process = try ChildProcess([try BuildProducts.path("store-writer")] + arguments, logPath: directory.file("writer-\(UUID().uuidString).log"))
    }

    /// Reads lines until one satisfies `predicate`; `nil` when the writer exits first. Waits at
    /// most `timeout` for it (throws ``WaitTimedOut``, naming `what`).
    func waitForLine(_ what: String, timeout: Duration = hangGuard, where predicate: (String) -> Bool) async throws -> String? {
        var found: String??
        try await waitUntil("the writer prints \(what)", timeout: timeout) {
            // Whether it ran is read before its output, so once it has exited all it wrote is read.
            let exited = !process.isRunning
            // Whole lines only: the writer may be halfway through one.
            let lines = process.output.split(separator: "\n", omittingEmptySubsequences: false).dropLast().map(String.init)
            while let line = consumed.withLock({ index -> String? in
                guard index < lines.count else { return nil }
                defer { index += 1 }
                return lines[index]
            }) {
                if predicate(line) {
                    found = .some(line)
                    return true
                }
            }
            if exited { found = .some(nil) }
            return exited
        }
        return found!
    }

    /// Kills it with SIGKILL and returns its exit status, once reaped (bounded).
    func kill() async -> Int32 {
        await process.stop(signal: SIGKILL)
    }

    /// Its exit status once it has ended by itself; killed, and so failing the caller's check of
    /// a clean exit, if it has not within `timeout`.
    func waitForExit(timeout: Duration = hangGuard) async -> Int32 {
        await process.stop(signal: 0, timeout: timeout)
    }

    var output: String { process.output }
}

/// The writer's synthetic feed: page K holds i(5K)...i(5K+4), newest first.
private func expectedIDs(pages: Int) -> [String] { (0..<(pages * 5)).map { "i\($0)" } }

/// Store tests that kill a writing process in the middle of a commit: the page is all there or
/// not at all, and resuming from the stored cursors leaves no gap and no duplicate.
@Suite struct CrashTests {
    @Test(arguments: SQLiteFeedStore.CommitStage.allCases, [0, 3])
    func killedInsideACommitLosesExactlyThatPage(stage: SQLiteFeedStore.CommitStage, stopPage: Int) async throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("crash.sqlite")
        let pages = 6
        let writer = try Writer([path, "home", String(pages), String(stopPage), stage.rawValue], in: dir)
        let line = try await writer.waitForLine("that it stopped") { $0.hasPrefix("stopped") }
        #expect(line == "stopped \(stopPage) \(stage.rawValue)", "\(writer.output)")
        let status = await writer.kill()
        #expect(status == 128 + SIGKILL, "the writer ended by itself (status \(status)): \(writer.output)")

        let store = try SQLiteFeedStore(path: path)
        let feed = try await store.load(feed: "home")
        let items = try await store.items(feed: "home", offset: 0, limit: 1_000).map(\.id)
        #expect(items == Array(expectedIDs(pages: stopPage)), "only the pages committed before the kill")
        #expect(feed.itemCount == stopPage * 5)
        #expect(feed.hasLoaded == (stopPage > 0))
        #expect(feed.olderCursor == (stopPage > 0 ? "c\(stopPage)" : nil), "the cursor belongs to the last whole page")

        // Resume from the stored cursors: no gap, no duplicate, nothing reloaded.
        let resumed = try Writer([path, "home", String(pages)], in: dir)
        #expect(try await resumed.waitForLine("its first page") { $0.hasPrefix("begin") } == "begin \(stopPage)", "resumes at the lost page")
        #expect(try await resumed.waitForLine("done") { $0 == "done" } == "done", "\(resumed.output)")
        #expect(await resumed.waitForExit() == 0, "\(resumed.output)")
        let final = try await store.items(feed: "home", offset: 0, limit: 1_000).map(\.id)
        #expect(final == expectedIDs(pages: pages))
        let after = try await store.load(feed: "home")
        #expect(after.endReached && after.itemCount == pages * 5)
    }

    /// Retention prunes inside the commit's transaction: killed after the prune and before the
    /// commit ends, the store has neither the page nor the prune.
    @Test func aPruneDiesWithItsCommit() async throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("crash.sqlite")
        // Page 2 makes 15 items; keeping 12 drops the 3 oldest and ends backfill, in that commit.
        let writer = try Writer([path, "home", "6", "2", SQLiteFeedStore.CommitStage.cursorsWritten.rawValue, "12"], in: dir)
        #expect(try await writer.waitForLine("that it stopped") { $0.hasPrefix("stopped") } == "stopped 2 cursorsWritten", "\(writer.output)")
        let status = await writer.kill()
        #expect(status == 128 + SIGKILL, "the writer ended by itself (status \(status)): \(writer.output)")
        let store = try SQLiteFeedStore(path: path)
        #expect(try await store.items(feed: "home", offset: 0, limit: 100).map(\.id) == expectedIDs(pages: 2))
        let feed = try await store.load(feed: "home")
        #expect(feed.itemCount == 10 && feed.olderCursor == "c2" && !feed.endReached)

        // Run to the end with retention: 12 kept, the newest, and backfill ended by it.
        let resumed = try Writer([path, "home", "3", "99", SQLiteFeedStore.CommitStage.began.rawValue, "12"], in: dir)
        #expect(try await resumed.waitForLine("done") { $0 == "done" } == "done", "\(resumed.output)")
        #expect(await resumed.waitForExit() == 0, "\(resumed.output)")
        #expect(try await store.items(feed: "home", offset: 0, limit: 100).map(\.id) == Array(expectedIDs(pages: 3).prefix(12)))
        let after = try await store.load(feed: "home")
        #expect(after.itemCount == 12 && after.endReached && after.olderCursor == nil)
    }

    /// Kills at whatever point the writer has reached, many times over the same file.
    @Test func repeatedKillsAtRandomPointsNeverLeaveAGapOrADuplicate() async throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("crash.sqlite")
        let pages = 400
        var rng = SeededRandomSource(seed: 99)
        var kills = 0
        for _ in 0..<8 {
            let writer = try Writer([path, "home", String(pages)], in: dir)
            let target = Int(rng.next() % 12) + 1
            var begun = 0
            let finished = try await writer.waitForLine("\(target) commits begun") { line in
                if line.hasPrefix("begin") { begun += 1 }
                return begun >= target || line == "done"
            }
            if finished == "done" {
                _ = await writer.waitForExit()
                break
            }
            _ = await writer.kill()
            kills += 1
            let store = try SQLiteFeedStore(path: path)
            let feed = try await store.load(feed: "home")
            let items = try await store.items(feed: "home", offset: 0, limit: 100_000).map(\.id)
            #expect(feed.itemCount % 5 == 0, "whole pages only")
            #expect(items == expectedIDs(pages: feed.itemCount / 5))
            // The last page carries no older cursor: a kill after it finds the feed complete.
            if feed.itemCount == pages * 5 {
                #expect(feed.olderCursor == nil && feed.endReached)
            } else if feed.itemCount > 0 {
                #expect(feed.olderCursor == "c\(feed.itemCount / 5)")
            }
        }
        #expect(kills > 0)
        let writer = try Writer([path, "home", String(pages)], in: dir)
        #expect(try await writer.waitForLine("done with \(pages) pages") { $0 == "done" } == "done", "\(writer.output)")
        #expect(await writer.waitForExit() == 0, "\(writer.output)")
        let store = try SQLiteFeedStore(path: path)
        #expect(try await store.items(feed: "home", offset: 0, limit: 100_000).map(\.id) == expectedIDs(pages: pages))
    }
}
