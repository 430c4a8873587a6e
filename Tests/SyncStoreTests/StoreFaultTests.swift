import Foundation
import SyncCore
import SyncStore
import Synchronization
import Testing
import TestSupport

/// What opening a store that cannot be used throws: a ``StoreFault`` of the right kind, whose
/// words name the path and carry no SQL.
@Suite struct StoreFaultTests {
    func openFault(_ path: String) -> StoreFault? {
        do {
            _ = try SQLiteFeedStore(path: path)
            return nil
        } catch {
            return error as? StoreFault
        }
    }

    @Test func aFileThatIsNotADatabase() throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("notes.txt")
        try "not a database".write(toFile: path, atomically: true, encoding: .utf8)
        let fault = try #require(openFault(path))
        #expect(fault.kind == .notADatabase)
        #expect(fault.description.hasPrefix("\(path) is not an SQLite database"))
        #expect(fault.detail.contains("SQLite error 26"), "the library's text is kept for a debug log: \(fault.detail)")
    }

    @Test func aDatabaseWhosePagesAreOverwrittenIsDamagedAndCanBeMovedAside() async throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("store.sqlite")
        let store = try SQLiteFeedStore(path: path)
        try await store.recordMeteredUsage(feed: "home", .init(day: "2026-11-27", bytes: 1))
        await store.releaseMemory()
        let handle = try #require(FileHandle(forWritingAtPath: path))
        try handle.seek(toOffset: 100)
        try handle.write(contentsOf: Data(repeating: 0xff, count: 3000))
        try handle.close()
        let fault = try #require(openFault(path))
        #expect(fault.kind == .damaged, "\(fault.detail)")
        #expect(fault.description == "the store \(path) is damaged (its database pages are malformed)")
        let moved = try SQLiteFeedStore.moveAside(path, at: Date(timeIntervalSince1970: 1_795_822_200))
        #expect(moved == "\(path).corrupt-20261127T233000Z")
        #expect(!FileManager.default.fileExists(atPath: path))
        #expect(!FileManager.default.fileExists(atPath: path + "-wal"))
        let fresh = try SQLiteFeedStore(path: path)
        #expect(try await fresh.meteredUsage(feed: "home") == nil)
    }

    /// The issue's case: five pages in the middle of a synced store overwritten while it was
    /// closed. Without the check, opening succeeded and only a read deep in the feed failed.
    @Test func pagesOverwrittenInTheMiddleAreFoundAtOpen() async throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("store.sqlite")
        do {
            let store = try SQLiteFeedStore(path: path)
            let page = FeedPage(
                items: (0..<3000).map { FeedItem(id: String(format: "%05d", 3000 - $0), payload: Data(repeating: UInt8(ascii: "a"), count: 200)) },
                olderCursor: nil, newerCursor: "n")
            _ = try await store.commit(feed: "home", direction: .initial, page: page, at: Date())
            await store.releaseMemory()
        }
        let size = try #require(try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int)
        #expect(size > 100 * 4096, "a store of \(size) bytes")
        let handle = try #require(FileHandle(forWritingAtPath: path))
        try handle.seek(toOffset: UInt64(size / 2 / 4096 * 4096))
        try handle.write(contentsOf: Data((0..<(5 * 4096)).map { UInt8(truncatingIfNeeded: $0 &* 7919) }))
        try handle.close()

        let fault = try #require(openFault(path))
        #expect(fault.kind == .damaged)
        #expect(fault.detail.hasPrefix("quick_check: "), "\(fault.detail)")
        // Unchecked, it opens, and the damage waits for whoever reads that far; the store's owner
        // hears of it once, also when it asks after the fact.
        let unchecked = try SQLiteFeedStore(path: path, checkIntegrity: false)
        let heard = Mutex<[StoreFault]>([])
        await #expect(throws: StoreFault.self) { _ = try await unchecked.items(feed: "home", offset: 0, limit: 3000) }
        await #expect(throws: StoreFault.self) { _ = try await unchecked.items(feed: "home", offset: 0, limit: 3000) }
        unchecked.whenUnusable { fault in heard.withLock { $0.append(fault) } }
        #expect(heard.withLock { $0.map(\.kind) } == [.damaged])
        await #expect(throws: StoreFault.self) { _ = try await unchecked.items(feed: "home", offset: 0, limit: 3000) }
        #expect(heard.withLock { $0.count } == 1)
    }

    /// A store deleted, then one replaced by another file, while open: the next commit lands in
    /// the old file, and the owner hears of it.
    @Test(arguments: [false, true])
    func aStoreDeletedOrReplacedWhileOpenIsReported(replaced: Bool) async throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("store.sqlite")
        let store = try SQLiteFeedStore(path: path)
        let heard = Mutex<[StoreFault]>([])
        store.whenUnusable { fault in heard.withLock { $0.append(fault) } }
        let page = FeedPage(items: [FeedItem(id: "1", payload: Data("{}".utf8))], olderCursor: nil, newerCursor: "n")
        _ = try await store.commit(feed: "home", direction: .initial, page: page, at: Date())
        #expect(heard.withLock { $0.isEmpty })
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
        if replaced { try Data("another file".utf8).write(to: URL(fileURLWithPath: path)) }
        _ = try await store.commit(feed: "home", direction: .newer, page: FeedPage(items: [], olderCursor: nil, newerCursor: "n2"), at: Date())
        let faults = heard.withLock { $0 }
        #expect(faults.map(\.kind) == [.replaced])
        #expect(faults.first?.description == "the store \(path) was deleted or replaced while open (what is stored now goes to the old file)")
    }

    @Test func aMissingDirectory() throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("gone/store.sqlite")
        let fault = try #require(openFault(path))
        #expect(fault.kind == .noDirectory, "\(fault.detail)")
        #expect(fault.description == "the store's directory \(dir.file("gone")) does not exist: create it, or set [daemon] store elsewhere")
    }

    /// A commit on a device that fills up while the store runs: the page is refused in words,
    /// and what was stored before stays readable.
    @Test(.enabled(if: Privileges.rootTestsEnabled, Comment(rawValue: Privileges.skipReason)))
    func aCommitOnAFullDiskSaysSo() async throws {
        try Privileges.requireRoot()
        let dir = try TemporaryDirectory()
        let mount = dir.file("small")
        try FileManager.default.createDirectory(atPath: mount, withIntermediateDirectories: false)
        try await runCommand(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", mount])
        do {
            let path = "\(mount)/store.sqlite"
            let store = try SQLiteFeedStore(path: path)
            let first = FeedPage(items: [FeedItem(id: "1", payload: Data("{\"id\":1}".utf8))], olderCursor: "c1", newerCursor: "n1")
            _ = try await store.commit(feed: "home", direction: .initial, page: first, at: Date())
            _ = try? await runCommand(["dd", "if=/dev/zero", "of=\(mount)/fill", "bs=4k", "count=1024"], allowFailure: true)
            let big = FeedPage(
                items: (2..<400).map { FeedItem(id: "\($0)", payload: Data(repeating: UInt8(ascii: "x"), count: 2000)) },
                olderCursor: "c2", newerCursor: nil)
            do {
                _ = try await store.commit(feed: "home", direction: .older, pages: [big], at: Date())
                Issue.record("a commit of 800 kB went into a full 256 kB filesystem")
            } catch let fault as StoreFault {
                #expect(fault.kind == .diskFull, "\(fault.detail)")
                #expect(fault.description.hasPrefix("no space left on the device of the store \(path)"))
            }
            #expect(try await store.items(feed: "home", offset: 0, limit: 10).map(\.id) == ["1"])
        } catch {
            try? await Self.unmount(mount)
            throw error
        }
        try await Self.unmount(mount)
    }

    /// Unmounts `mount` once nothing holds it: the released store's connections (the checkpoint
    /// queue's among them) close on their own threads, a moment after its last use, and until
    /// then umount says "target is busy". Bounded by the hang guard.
    static func unmount(_ mount: String) async throws {
        let deadline = ContinuousClock.now + hangGuard
        while true {
            do {
                try await runCommand(["umount", mount])
                return
            } catch let failed as CommandFailed where failed.stderr.contains("target is busy") && ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(50))
            }
        }
    }

    @Test func everyKindSaysThePathAndNoSQL() {
        for kind in StoreFault.Kind.allCases where kind != .other {
            let text = StoreFault(kind, path: "/var/lib/syncd/syncd.sqlite", detail: "SQLite error 1: PRAGMA x").description
            #expect(text.contains("/var/lib/syncd"), "\(kind): \(text)")
            #expect(!text.contains("SQLite error") && !text.contains("PRAGMA"), "\(kind): \(text)")
        }
    }
}
