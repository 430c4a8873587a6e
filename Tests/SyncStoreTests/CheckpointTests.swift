import Foundation
import SyncCore
import SyncStore
import Testing
import TestSupport

/// The write-ahead log is copied back into the database file beside the writer, not inside its
/// commits.
///
/// The oracle is the database file alone, copied without its log and opened by Python's sqlite3
/// (``DatabaseFileAlone``): what it holds is what the checkpoints copied.
@Suite struct CheckpointTests {
    let date = Date(timeIntervalSinceReferenceDate: 12_345.678)

    /// `count` items of about 200 bytes each, older than `start`.
    func olderPage(from start: Int, count: Int) -> FeedPage {
        let ids = (start - count + 1...start).reversed().map { String(format: "%08d", $0) }
        let filler = String(repeating: "x", count: 180)
        let items = ids.map { FeedItem(id: $0, payload: Data("{\"id\":\"\($0)\",\"text\":\"\(filler)\"}".utf8)) }
        return FeedPage(items: items, olderCursor: ids.last, newerCursor: nil)
    }

    @Test func aGrowingLogIsCopiedBackInTheBackgroundWithoutACommitDoingIt() async throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("feeds.sqlite")
        let store = try SQLiteFeedStore(
            path: path, commitHook: nil, checkpoints: .init(thresholdFrames: 20, restartFrames: 1_000_000))
        var next = 100_000, committed = 0
        // ~20 KiB a page: the threshold of 20 log pages is passed within a few commits.
        for _ in 0..<20 {
            let page = olderPage(from: next, count: 100)
            _ = try await store.commit(feed: "home", direction: .older, page: page, at: date)
            next -= 100
            committed += 100
        }
        await store.checkpointsFinished()
        let counts = store.checkpoints
        #expect(counts.background >= 1)
        #expect(counts.onWriter == 0, "no commit ran a checkpoint")
        let file = try await DatabaseFileAlone.read(path, copyTo: dir.file("copy.sqlite"))
        #expect(file?.integrity == "ok")
        #expect((file?.items ?? 0) > 0 && (file?.items ?? 0) <= committed, "\(String(describing: file)) of \(committed)")
        #expect(try await store.load(feed: "home").itemCount == committed)
    }

    @Test func commitsLeaveTheLogToTheCheckpointer() async throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("feeds.sqlite")
        // No checkpoint at all: neither threshold is reached.
        let store = try SQLiteFeedStore(
            path: path, commitHook: nil, checkpoints: .init(thresholdFrames: 1_000_000, restartFrames: 1_000_000))
        var next = 100_000
        // ~5 MiB of items: SQLite's own automatic checkpoint would have copied the log back
        // after ~4 MiB, inside a commit.
        for _ in 0..<25 {
            let pages = (0..<10).map { index in olderPage(from: next - 100 * index, count: 100) }
            _ = try await store.commit(feed: "home", direction: .older, pages: pages, at: date)
            next -= 1_000
        }
        let log = try FileManager.default.attributesOfItem(atPath: path + "-wal")[.size] as? Int ?? 0
        #expect(log > 5 << 20)
        let file = try await DatabaseFileAlone.read(path, copyTo: dir.file("copy.sqlite"))
        #expect(file == nil || file?.items == 0, "\(String(describing: file))")
        #expect(store.checkpoints == .init())
    }

    @Test func anIdleStoreCopiesTheRestOfItsLogAndCutsItsFile() async throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("feeds.sqlite")
        let store = try SQLiteFeedStore(path: path)
        for start in [1_000, 990, 980] {
            _ = try await store.commit(feed: "home", direction: .older, page: olderPage(from: start, count: 10), at: date)
        }
        // Three small commits stay in the log: the database file has none of them yet.
        let before = try await DatabaseFileAlone.read(path, copyTo: dir.file("before.sqlite"))
        #expect(before == nil || before?.items == 0)
        await store.releaseMemory()
        await store.checkpointsFinished()
        #expect(store.checkpoints.background == 1)
        let after = try await DatabaseFileAlone.read(path, copyTo: dir.file("after.sqlite"))
        #expect(after?.items == 30 && after?.integrity == "ok", "\(String(describing: after))")
        // Nothing else used the store: the log's file was cut to nothing.
        let log = try FileManager.default.attributesOfItem(atPath: path + "-wal")[.size] as? Int
        #expect(log == 0)
        // And the store goes on, the log growing again from its start.
        _ = try await store.commit(feed: "home", direction: .older, page: olderPage(from: 970, count: 10), at: date)
        #expect(try await store.items(feed: "home", offset: 0, limit: 100).count == 40)
    }

    @Test func aLogPastTheRestartLimitIsCopiedByTheWriterNext() async throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("feeds.sqlite")
        let store = try SQLiteFeedStore(path: path, commitHook: nil, checkpoints: .init(thresholdFrames: 1, restartFrames: 1))
        _ = try await store.commit(feed: "home", direction: .older, page: olderPage(from: 1_000, count: 10), at: date)
        await store.checkpointsFinished()
        #expect(store.checkpoints == .init(background: 1, onWriter: 0))
        // The background checkpoint found the log past the limit: the next commit copies it all
        // before it returns, its own pages included.
        _ = try await store.commit(feed: "home", direction: .older, page: olderPage(from: 990, count: 10), at: date)
        #expect(store.checkpoints.onWriter == 1)
        let file = try await DatabaseFileAlone.read(path, copyTo: dir.file("copy.sqlite"))
        #expect(file?.items == 20 && file?.integrity == "ok", "\(String(describing: file))")
    }
}
