import Foundation
import SyncControl
import Testing
import TestSupport

/// A store syncd cannot use, met at start: it says why in words (the condition, the path, what to
/// do), never SQL, and exits with 73, which the unit does not restart on; a damaged store is moved
/// aside and a new one made, and syncd runs. The conditions are real: a bind mount remounted
/// read-only, a tmpfs that is full, a file that is not a database, one whose pages are overwritten.
@Suite(.timeLimit(.minutes(2)))
struct StoreFaultDaemonTests {
    /// A configuration whose store is `store`; its feed's server refuses connections.
    static func configuration(store: String, in directory: TemporaryDirectory) throws -> String {
        let path = directory.file("syncd.toml")
        try """
            [daemon]
            store = "\(store)"
            control_socket = "\(directory.file("io.syncd"))"
            [[feed]]
            name = "home"
            url = "http://127.0.0.1:9/feed"
            """.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    /// syncd's exit status and what it wrote, for a store at `store`.
    static func exit(store: String, in directory: TemporaryDirectory) async throws -> (status: Int32, output: String) {
        let config = try configuration(store: store, in: directory)
        do {
            let output = try await runCommand([try BuildProducts.path("syncd"), "--config", config])
            return (0, output)
        } catch let failed as CommandFailed {
            return (failed.status, failed.stderr)
        }
    }

    static func expectWords(_ output: String, _ words: String, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(output.contains(words), "\(output)", sourceLocation: sourceLocation)
        for sql in ["SQLite error", "PRAGMA", "while executing", "SQLITE_"] {
            #expect(!output.contains(sql), "no SQL for the user: \(output)", sourceLocation: sourceLocation)
        }
    }

    @Test func aFileThatIsNotADatabaseExits73InWords() async throws {
        let directory = try TemporaryDirectory(prefix: "store-fault")
        let store = directory.file("syncd.sqlite")
        try "feeds I wanted to keep\n".write(toFile: store, atomically: true, encoding: .utf8)
        let (status, output) = try await Self.exit(store: store, in: directory)
        #expect(status == 73)
        Self.expectWords(output, "\(store) is not an SQLite database (nor a store syncd wrote): set [daemon] store to another path")
        #expect(try String(contentsOfFile: store, encoding: .utf8) == "feeds I wanted to keep\n", "a file that never was a store is left alone")
    }

    @Test(.enabled(if: Privileges.rootTestsEnabled, Comment(rawValue: Privileges.skipReason)))
    func aReadOnlyFilesystemExits73InWords() async throws {
        try Privileges.requireRoot()
        let directory = try TemporaryDirectory(prefix: "store-fault")
        let mount = directory.file("ro")
        try FileManager.default.createDirectory(atPath: mount, withIntermediateDirectories: false)
        try await runCommand(["mount", "--bind", mount, mount])
        do {
            try await runCommand(["mount", "-o", "remount,ro,bind", mount])
            let (status, output) = try await Self.exit(store: "\(mount)/syncd.sqlite", in: directory)
            #expect(status == 73)
            Self.expectWords(output, "the store \(mount)/syncd.sqlite is on a read-only filesystem: remount \(mount) read-write")
        } catch {
            try? await runCommand(["umount", mount])
            throw error
        }
        try await runCommand(["umount", mount])
    }

    @Test(.enabled(if: Privileges.rootTestsEnabled, Comment(rawValue: Privileges.skipReason)))
    func aFullDiskExits73InWords() async throws {
        try Privileges.requireRoot()
        let directory = try TemporaryDirectory(prefix: "store-fault")
        let mount = directory.file("full")
        try FileManager.default.createDirectory(atPath: mount, withIntermediateDirectories: false)
        try await runCommand(["mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", mount])
        do {
            // Filled to the last block before syncd starts.
            _ = try? await runCommand(["dd", "if=/dev/zero", "of=\(mount)/fill", "bs=1k", "count=64"], allowFailure: true)
            let (status, output) = try await Self.exit(store: "\(mount)/syncd.sqlite", in: directory)
            #expect(status == 73)
            Self.expectWords(output, "no space left on the device of the store \(mount)/syncd.sqlite: free some space there")
        } catch {
            try? await runCommand(["umount", mount])
            throw error
        }
        try await runCommand(["umount", mount])
    }

    @Test func aDamagedStoreIsMovedAsideAndSyncdRuns() async throws {
        let directory = try TemporaryDirectory(prefix: "store-fault")
        let store = directory.file("syncd.sqlite")
        // A real SQLite database (Python's sqlite3 writes it), its schema page overwritten.
        try await runCommand(["python3", "-c", """
            import sqlite3, sys
            db = sqlite3.connect(sys.argv[1])
            db.execute("CREATE TABLE t (x)")
            db.execute("INSERT INTO t VALUES (1)")
            db.commit()
            db.close()
            with open(sys.argv[1], "r+b") as f:
                f.seek(100)
                f.write(b"\\xff" * 3000)
            """, store])
        let config = try Self.configuration(store: store, in: directory)
        let daemon = try ChildProcess([try BuildProducts.path("syncd"), "--config", config], logPath: directory.file("syncd.log"))
        do {
            let client = SyncControlClient(socketPath: directory.file("io.syncd"))
            try await waitUntil("syncd answers on its control socket after moving the store aside", interval: .milliseconds(50)) {
                (try? await client.boundedStatus())?.feeds.first?.name == "home" || !daemon.isRunning
            }
            #expect(daemon.isRunning, "\(daemon.output)")
            let aside = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.hasPrefix("syncd.sqlite.corrupt-") }
            #expect(aside.count == 1, "\(aside)")
            let moved = directory.file(aside.first ?? "")
            #expect(daemon.output.contains("the store \(store) is damaged (its database pages are malformed): moved to \(moved); a new store is loaded from the servers"), "\(daemon.output)")
            #expect(!daemon.output.contains("SQLite error"), "\(daemon.output)")
            // The damaged file is kept as it was, for inspection.
            #expect(try Data(contentsOf: URL(fileURLWithPath: moved)).prefix(16) == Data("SQLite format 3\0".utf8))
        } catch {
            await daemon.stop()
            throw error
        }
        #expect(await daemon.stop() == 0, "\(daemon.output)")
    }
}
