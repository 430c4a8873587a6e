import Foundation
import SyncStore
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

    @Test func aMissingDirectory() throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("gone/store.sqlite")
        let fault = try #require(openFault(path))
        #expect(fault.kind == .noDirectory, "\(fault.detail)")
        #expect(fault.description == "the store's directory \(dir.file("gone")) does not exist: create it, or set [daemon] store elsewhere")
    }

    @Test func everyKindSaysThePathAndNoSQL() {
        for kind in StoreFault.Kind.allCases where kind != .other {
            let text = StoreFault(kind, path: "/var/lib/syncd/syncd.sqlite", detail: "SQLite error 1: PRAGMA x").description
            #expect(text.contains("/var/lib/syncd"), "\(kind): \(text)")
            #expect(!text.contains("SQLite error") && !text.contains("PRAGMA"), "\(kind): \(text)")
        }
    }
}
