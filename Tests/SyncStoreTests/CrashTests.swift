import Foundation
import Synchronization
import SyncCore
import SyncStore
import Testing
import TestSupport

/// A running `store-writer`, read line by line and killed with SIGKILL.
///
/// Every wait happens on a thread of its own (``onDedicatedThread(_:)``): the crash cases run in
/// parallel, and a blocked cooperative thread each would stall the whole test process.
private final class Writer: Sendable {
    let process = Process()
    private let output = Pipe()
    private let buffer = Mutex(Data())

    init(_ arguments: [String]) throws {
        process.executableURL = URL(fileURLWithPath: try BuildProducts.path("store-writer"))
        process.arguments = arguments
        process.standardOutput = output
        process.standardError = FileHandle.standardError
        try process.run()
    }

    /// The next line the writer printed; `nil` once it has exited and everything was read.
    func nextLine() async throws -> String? {
        try await onDedicatedThread { [self] in
            while true {
                let line = buffer.withLock { buffer -> String? in
                    guard let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) else { return nil }
                    defer { buffer.removeSubrange(buffer.startIndex...newline) }
                    return String(decoding: buffer[buffer.startIndex..<newline], as: UTF8.self)
                }
                if let line { return line }
                let chunk = output.fileHandleForReading.availableData
                if chunk.isEmpty { return nil }
                buffer.withLock { $0.append(chunk) }
            }
        }
    }

    /// Reads lines until one satisfies `predicate`; `nil` when the writer exits first.
    func waitForLine(where predicate: (String) -> Bool) async throws -> String? {
        while let line = try await nextLine() {
            if predicate(line) { return line }
        }
        return nil
    }

    func kill() async throws {
        Foundation.kill(process.processIdentifier, SIGKILL)
        _ = try await waitForExit()
    }

    func waitForExit() async throws -> Int32 {
        try await onDedicatedThread { [process] in
            process.waitUntilExit()
            return process.terminationStatus
        }
    }
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
        let writer = try Writer([path, "home", String(pages), String(stopPage), stage.rawValue])
        let line = try await writer.waitForLine { $0.hasPrefix("stopped") }
        #expect(line == "stopped \(stopPage) \(stage.rawValue)")
        try await writer.kill()
        #expect(writer.process.terminationReason == .uncaughtSignal)

        let store = try SQLiteFeedStore(path: path)
        let feed = try await store.load(feed: "home")
        let items = try await store.items(feed: "home", offset: 0, limit: 1_000).map(\.id)
        #expect(items == Array(expectedIDs(pages: stopPage)), "only the pages committed before the kill")
        #expect(feed.itemCount == stopPage * 5)
        #expect(feed.hasLoaded == (stopPage > 0))
        #expect(feed.olderCursor == (stopPage > 0 ? "c\(stopPage)" : nil), "the cursor belongs to the last whole page")

        // Resume from the stored cursors: no gap, no duplicate, nothing reloaded.
        let resumed = try Writer([path, "home", String(pages)])
        #expect(try await resumed.waitForLine { $0.hasPrefix("begin") } == "begin \(stopPage)", "resumes at the lost page")
        #expect(try await resumed.waitForLine { $0 == "done" } == "done")
        #expect(try await resumed.waitForExit() == 0)
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
        let writer = try Writer([path, "home", "6", "2", SQLiteFeedStore.CommitStage.cursorsWritten.rawValue, "12"])
        #expect(try await writer.waitForLine { $0.hasPrefix("stopped") } == "stopped 2 cursorsWritten")
        try await writer.kill()
        let store = try SQLiteFeedStore(path: path)
        #expect(try await store.items(feed: "home", offset: 0, limit: 100).map(\.id) == expectedIDs(pages: 2))
        let feed = try await store.load(feed: "home")
        #expect(feed.itemCount == 10 && feed.olderCursor == "c2" && !feed.endReached)

        // Run to the end with retention: 12 kept, the newest, and backfill ended by it.
        let resumed = try Writer([path, "home", "3", "99", SQLiteFeedStore.CommitStage.began.rawValue, "12"])
        #expect(try await resumed.waitForLine { $0 == "done" } == "done")
        #expect(try await resumed.waitForExit() == 0)
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
            let writer = try Writer([path, "home", String(pages)])
            let target = Int(rng.next() % 12) + 1
            var begun = 0
            let finished = try await writer.waitForLine { line in
                if line.hasPrefix("begin") { begun += 1 }
                return begun >= target || line == "done"
            }
            if finished == "done" {
                _ = try await writer.waitForExit()
                break
            }
            try await writer.kill()
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
        let writer = try Writer([path, "home", String(pages)])
        #expect(try await writer.waitForLine { $0 == "done" } == "done")
        #expect(try await writer.waitForExit() == 0)
        let store = try SQLiteFeedStore(path: path)
        #expect(try await store.items(feed: "home", offset: 0, limit: 100_000).map(\.id) == expectedIDs(pages: pages))
    }
}
