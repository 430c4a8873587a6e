import Foundation
import SyncCore
import SyncStore
import Testing
import TestSupport

/// A running `store-writer`, read line by line and killed with SIGKILL.
private final class Writer {
    let process = Process()
    private let output = Pipe()
    private var buffer = Data()

    init(_ arguments: [String]) throws {
        process.executableURL = URL(fileURLWithPath: try BuildProducts.path("store-writer"))
        process.arguments = arguments
        process.standardOutput = output
        process.standardError = FileHandle.standardError
        try process.run()
    }

    /// Reads lines until one satisfies `predicate`; `nil` when the writer exits first.
    func waitForLine(where predicate: (String) -> Bool) -> String? {
        while true {
            while let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                let line = String(decoding: buffer[buffer.startIndex..<newline], as: UTF8.self)
                buffer.removeSubrange(buffer.startIndex...newline)
                if predicate(line) { return line }
            }
            let chunk = output.fileHandleForReading.availableData
            if chunk.isEmpty { return nil }
            buffer.append(chunk)
        }
    }

    func kill() {
        Foundation.kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    func waitForExit() -> Int32 {
        process.waitUntilExit()
        return process.terminationStatus
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
        let line = writer.waitForLine { $0.hasPrefix("stopped") }
        #expect(line == "stopped \(stopPage) \(stage.rawValue)")
        writer.kill()
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
        #expect(resumed.waitForLine { $0.hasPrefix("begin") } == "begin \(stopPage)", "resumes at the lost page")
        #expect(resumed.waitForLine { $0 == "done" } == "done")
        #expect(resumed.waitForExit() == 0)
        let final = try await store.items(feed: "home", offset: 0, limit: 1_000).map(\.id)
        #expect(final == expectedIDs(pages: pages))
        let after = try await store.load(feed: "home")
        #expect(after.endReached && after.itemCount == pages * 5)
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
            let finished = writer.waitForLine { line in
                if line.hasPrefix("begin") { begun += 1 }
                return begun >= target || line == "done"
            }
            if finished == "done" {
                _ = writer.waitForExit()
                break
            }
            writer.kill()
            kills += 1
            let store = try SQLiteFeedStore(path: path)
            let feed = try await store.load(feed: "home")
            let items = try await store.items(feed: "home", offset: 0, limit: 100_000).map(\.id)
            #expect(feed.itemCount % 5 == 0, "whole pages only")
            #expect(items == expectedIDs(pages: feed.itemCount / 5))
            if feed.itemCount > 0 { #expect(feed.olderCursor == "c\(feed.itemCount / 5)") }
        }
        #expect(kills > 0)
        let writer = try Writer([path, "home", String(pages)])
        #expect(writer.waitForLine { $0 == "done" } == "done")
        #expect(writer.waitForExit() == 0)
        let store = try SQLiteFeedStore(path: path)
        #expect(try await store.items(feed: "home", offset: 0, limit: 100_000).map(\.id) == expectedIDs(pages: pages))
    }
}
