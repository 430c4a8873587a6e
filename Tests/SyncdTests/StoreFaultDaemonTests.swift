import Foundation
import SyncControl
import Testing
import TestSupport

/// Makes the directory `point`, mounts on it (`mount ARGUMENTS POINT`), runs `body`, and unmounts
/// it on every path: a mount left behind would outlive the test's directory.
private func withMount(_ arguments: [String], at point: String, _ body: () async throws -> Void) async throws {
    try FileManager.default.createDirectory(atPath: point, withIntermediateDirectories: false)
    try await runCommand(["mount"] + arguments + [point])
    try await withResource(point, closedBy: { _ = try await runCommand(["umount", $0]) }) { _ in try await body() }
}

/// A store syncd cannot use, met at start: it says why in words (the condition, the path, what to
/// do), never SQL, and exits with 73, which the unit does not restart on; a damaged store is moved
/// aside and a new one made, and syncd runs. The conditions are real: a bind mount remounted
/// read-only, a tmpfs that is full, a file that is not a database, one whose pages are overwritten.
@Suite(.timeLimit(.minutes(2)))
struct StoreFaultDaemonTests {
    /// A configuration whose store is `store`; its feed's server refuses connections.
    static func configuration(store: String, in directory: TemporaryDirectory) throws -> String {
        let path = directory.file("syncd.toml")
        try SyncdConfig(
            store: store,
            controlSocket: directory.file("io.syncd"),
            feeds: [SyncdConfig.Feed(name: "home", url: "http://127.0.0.1:9/feed")]
        ).write(toFile: path)
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
        try await withMount(["--bind", mount], at: mount) {
            try await runCommand(["mount", "-o", "remount,ro,bind", mount])
            let (status, output) = try await Self.exit(store: "\(mount)/syncd.sqlite", in: directory)
            #expect(status == 73)
            Self.expectWords(output, "the store \(mount)/syncd.sqlite is on a read-only filesystem: remount \(mount) read-write")
        }
    }

    @Test(.enabled(if: Privileges.rootTestsEnabled, Comment(rawValue: Privileges.skipReason)))
    func aFullDiskExits73InWords() async throws {
        try Privileges.requireRoot()
        let directory = try TemporaryDirectory(prefix: "store-fault")
        let mount = directory.file("full")
        try await withMount(["-t", "tmpfs", "-o", "size=16k", "tmpfs"], at: mount) {
            // Filled to the last block before syncd starts.
            _ = try? await runCommand(["dd", "if=/dev/zero", "of=\(mount)/fill", "bs=1k", "count=64"], allowFailure: true)
            let (status, output) = try await Self.exit(store: "\(mount)/syncd.sqlite", in: directory)
            #expect(status == 73)
            Self.expectWords(output, "no space left on the device of the store \(mount)/syncd.sqlite: free some space there")
        }
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

/// A store damaged while syncd was stopped, and one damaged while it runs, against the demo
/// feed server in a namespace: the next start moves it aside and the feed is loaded again to the
/// server's count.
@Suite(.enabled(if: Privileges.rootTestsEnabled, Comment(rawValue: Privileges.skipReason)))
struct StoreDamageDaemonTests {
    typealias Rig = EndToEndTests.Rig

    /// Overwrites five of the items' pages from the middle of the database file with bytes no
    /// page has; SQLite's dbstat (through Python's sqlite3) says which pages hold items, so the
    /// damage is to data, not to free pages.
    static func damage(_ path: String) async throws {
        try await runCommand(["python3", "-c", """
            import sqlite3, sys
            path = sys.argv[1]
            # Whatever the log still holds goes into the file first, as syncd's own checkpoints
            # put it there when it is quiet: the damage is then to pages SQLite reads.
            db = sqlite3.connect(path)
            busy, _, _ = db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            if busy:
                sys.exit("the checkpoint was blocked: the damage would not reach what SQLite reads")
            size = db.execute("PRAGMA page_size").fetchone()[0]
            pages = [row[0] for row in db.execute("SELECT pageno FROM dbstat WHERE name = 'item' AND pagetype = 'leaf' ORDER BY pageno")]
            db.close()
            middle = len(pages) // 2
            with open(path, "r+b") as f:
                for page in pages[middle:middle + 5]:
                    f.seek((page - 1) * size)
                    f.write(bytes((n * 7919) & 0xff for n in range(size)))
            """, path])
    }

    /// Starts syncd again on the rig's configuration (what the unit's restart does), waits until
    /// its feed holds the server's `items` to the end (or it exits), and checks that the store
    /// equals the server's feed. The caller stops it.
    static func restart(_ rig: Rig, expecting items: Int) async throws -> ChildProcess {
        let restarted = try ChildProcess(
            ["ip", "netns", "exec", rig.topology.client.name, try BuildProducts.path("syncd"), "--config", rig.directory.file("syncd.toml")],
            logPath: rig.directory.file("syncd-restarted.log"))
        let client = SyncControlClient(socketPath: rig.directory.file("io.syncd"))
        try await waitUntil("the restarted syncd loads the feed into a new store", interval: .milliseconds(100)) {
            guard restarted.isRunning else { return true }
            let feed = (try? await client.boundedStatus())?.feeds.first
            return feed?.itemCount == items && feed?.endReached == true
        }
        #expect(restarted.isRunning, "\(restarted.output)")
        #expect(try await rig.storedIDs() == EndToEndTests.ids(1...items), "the new store equals the server's feed")
        return restarted
    }

    @Test func aStoreDamagedWhileStoppedIsMovedAsideAndReloaded() async throws {
        try await Rig.whileSynced(3000) { rig, store in
            #expect(await rig.daemon.stop() == 0, "\(rig.daemon.output)")
            try await Self.damage(store)

            let restarted = try await Self.restart(rig, expecting: 3000)
            #expect(restarted.output.contains("the store \(store) is damaged (its database pages are malformed): moved to \(store).corrupt-"), "\(restarted.output)")
            #expect(await restarted.stop() == 0, "\(restarted.output)")
        }
    }

    @Test func aStoreDamagedWhileRunningStopsSyncdAndTheNextStartReloadsIt() async throws {
        try await Rig.whileSynced(3000) { rig, store in
            // Once quiet, syncd copies its log into the file and empties it, and lets its page
            // caches go: what is read next comes from the file.
            try await rig.waitForQuietCheckpoint(of: store)
            try await Self.damage(store)
            // A client reads the whole feed, as `syncctl items` does: the damaged pages are met.
            let read = try? await rig.storedIDs()
            #expect(read == nil, "a walk through damaged pages returned \(read?.count ?? 0) ids")
            try await waitUntil("syncd stops after finding its store damaged") { !rig.daemon.isRunning }
            #expect(await rig.daemon.stop() == 74, "EX_IOERR, which the unit restarts on: \(rig.daemon.output)")
            #expect(rig.daemon.output.contains("the store \(store) is damaged (its database pages are malformed), found while running: syncd stops; its next start moves the store aside"), "\(rig.daemon.output)")
            #expect(!rig.daemon.output.contains("SQLite error"), "\(rig.daemon.output)")

            // What the unit does next: start it again.
            let restarted = try await Self.restart(rig, expecting: 3000)
            #expect(restarted.output.contains("moved to \(store).corrupt-"), "\(restarted.output)")
            #expect(await restarted.stop() == 0, "\(restarted.output)")
        }
    }

    @Test func aStoreDeletedWhileRunningStopsSyncdAtTheNextCommit() async throws {
        try await Rig.whileSynced(500) { rig, store in
            for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: store + suffix) }
            // A refresh commits a page (empty: nothing is new), into the deleted file.
            _ = try? await runCommand([try BuildProducts.path("syncctl"), "refresh", "--socket", rig.directory.file("io.syncd")])
            try await waitUntil("syncd stops after its next commit went to a deleted file") { !rig.daemon.isRunning }
            #expect(await rig.daemon.stop() == 74, "\(rig.daemon.output)")
            #expect(rig.daemon.output.contains("the store \(store) was deleted or replaced while open (what is stored now goes to the old file), found while running: syncd stops; its next start opens \(store) anew"), "\(rig.daemon.output)")

            let restarted = try await Self.restart(rig, expecting: 500)
            #expect(FileManager.default.fileExists(atPath: store))
            #expect(await restarted.stop() == 0, "\(restarted.output)")
        }
    }

    /// The disk fills during a backfill: the status says so at the top (and the feed's row), the
    /// daemon keeps running, and once there is room again the backfill finishes and the
    /// problem goes from the status.
    @Test func aDiskThatFillsDuringABackfillIsShownAndOutlived() async throws {
        try Privileges.requireRoot()
        let scratch = try TemporaryDirectory(prefix: "store-full")
        let mount = scratch.file("small")
        try await withMount(["-t", "tmpfs", "-o", "size=400k", "tmpfs"], at: mount) {
            let store = "\(mount)/syncd.sqlite"
            let rig = try await Rig(initialItems: 6000, store: store)
            try await rig.using { rig in
                let full = try await rig.waitForStatus("the store refusing pages for want of space") { $0.store?.kind == .diskFull }
                #expect(full.store?.path == store)
                #expect(rig.daemon.isRunning)
                // A commit that gets through (a checkpoint freed a page) clears the problem until
                // the next one fails, so the rendering is checked on a status that has it.
                var text = ""
                try await waitUntil("syncctl status names the full disk", interval: .milliseconds(200)) {
                    text = try await runCommand([try BuildProducts.path("syncctl"), "status", "--socket", rig.directory.file("io.syncd")])
                    return text.contains("Store: no space left on the device of the store \(store): free some space there")
                }
                #expect(!text.contains("SQLite error"), "\(text)")

                try await runCommand(["mount", "-o", "remount,size=64m", mount])
                let done = try await rig.waitForStatus("the backfill finished once there was room") { s in
                    s.feeds.first?.itemCount == 6000 && s.feeds.first?.endReached == true && s.store == nil
                }
                #expect(done.store == nil)
                #expect(try await rig.storedIDs() == EndToEndTests.ids(1...6000))
            }
        }
    }

    /// A store whose filesystem is frozen (fsfreeze, on an ext4 image of the test's own): a
    /// commit hangs, syncd says so and stops feeding the watchdog, so systemd would restart it;
    /// once the filesystem thaws, the write ends and the watchdog is fed again.
    @Test func aHungStoreStopsFeedingTheWatchdog() async throws {
        try Privileges.requireRoot()
        let scratch = try TemporaryDirectory(prefix: "store-frozen")
        let image = scratch.file("store.img"), mount = scratch.file("fs")
        try await runCommand(["truncate", "-s", "64M", image])
        try await runCommand(["mkfs.ext4", "-q", image])
        try await withMount(["-o", "loop", image], at: mount) {
            var frozen = false
            do {
                let notify = try ReadinessTests.NotifySocket(path: scratch.file("notify"))
                // Pinged every 100 ms; a write may run 1 s.
                let rig = try await Rig(
                    initialItems: 300, environment: ["NOTIFY_SOCKET=\(notify.path)", "WATCHDOG_USEC=200000"],
                    store: "\(mount)/syncd.sqlite", daemonKeys: #"store_stall_limit = "1s""#)
                try await rig.using { rig in
                    try await rig.waitUntilSynced(300)
                    var heard = try await notify.messages(until: "WATCHDOG=1", timeout: hangGuard)
                    #expect(heard.last?.contains("WATCHDOG=1") == true, "the watchdog is fed: \(heard)")

                    try await runCommand(["fsfreeze", "-f", mount])
                    frozen = true
                    // Thawed before any stop: a process blocked on a frozen filesystem cannot end.
                    defer { if frozen { _ = try? runCommand(["fsfreeze", "-u", mount]) } }
                    // A refresh commits its (empty) page: the write blocks on the frozen filesystem.
                    _ = try? await runCommand([try BuildProducts.path("syncctl"), "refresh", "--socket", rig.directory.file("io.syncd")])
                    func lines() -> [Substring] { heard.flatMap { $0.split(separator: "\n") } }
                    let deadline = ContinuousClock.now + hangGuard
                    while !lines().contains(where: { $0.hasPrefix("STATUS=store stalled") }) && ContinuousClock.now < deadline {
                        heard += try await notify.messages(until: "STATUS=never", timeout: .milliseconds(300))
                    }
                    let stalledAt = try #require(lines().lastIndex { $0.hasPrefix("STATUS=store stalled") }, "no stall reported: \(rig.daemon.output)")
                    #expect(rig.daemon.output.contains("the store \(mount)/syncd.sqlite has not finished a write for"), "\(rig.daemon.output)")

                    try await runCommand(["fsfreeze", "-u", mount])
                    frozen = false
                    while !lines().contains(where: { $0.hasPrefix("STATUS=store answering again") }) && ContinuousClock.now < deadline {
                        heard += try await notify.messages(until: "STATUS=never", timeout: .milliseconds(300))
                    }
                    let all = lines()
                    let againAt = try #require(all.lastIndex { $0.hasPrefix("STATUS=store answering again") }, "no recovery: \(rig.daemon.output)")
                    #expect(!all[stalledAt..<againAt].contains("WATCHDOG=1"), "the watchdog was fed while the store hung")
                    heard += try await notify.messages(until: "WATCHDOG=1", timeout: hangGuard)
                    #expect(lines()[(againAt + 1)...].contains("WATCHDOG=1"), "fed again after the thaw")
                }
            } catch {
                if frozen { _ = try? await runCommand(["fsfreeze", "-u", mount]) }
                throw error
            }
        }
    }
}

/// syncd once quiet does not wake: every thread of the process sleeps through a window of five
/// seconds with at most a wake-up or two (a connection's idle timer may end in it). A timer left
/// running or a poll on syncd's path shows here. (A `Task.sleep`, which in the release build
/// starts libdispatch's once-a-second timer thread, does not show in this debug build: the
/// IdleCost benchmark measures that one.)
@Suite(.enabled(if: Privileges.rootTestsEnabled, Comment(rawValue: Privileges.skipReason)))
struct IdleWakeupTests {
    /// Context switches of every thread of `pid`, from `/proc/PID/task/*/status`.
    static func switches(_ pid: Int32) -> Int {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
        return tasks.reduce(0) { total, task in
            let status = (try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/status", encoding: .utf8)) ?? ""
            return total + status.split(separator: "\n").reduce(0) { sum, line in
                guard line.hasPrefix("voluntary_ctxt_switches:") || line.hasPrefix("nonvoluntary_ctxt_switches:") else { return sum }
                return sum + (Int(line.split(separator: "\t").last ?? "") ?? 0)
            }
        }
    }

    @Test func aQuietSyncdSleeps() async throws {
        try await Rig.whileSynced(120) { rig, store in
            try await rig.waitForQuietCheckpoint(of: store)
            let before = Self.switches(rig.daemon.pid)
            try await Task.sleep(for: .seconds(5))
            let woken = Self.switches(rig.daemon.pid) - before
            #expect(woken <= 2, "syncd's threads woke \(woken) times in 5 s of quiet")
        }
    }

    typealias Rig = EndToEndTests.Rig
}

extension EndToEndTests.Rig {
    /// As root: syncd in a rig whose feed has `items` items, once it has synced them all, for
    /// `body` with the rig and the path of syncd's store; both stopped after it.
    static func whileSynced(_ items: Int, _ body: (EndToEndTests.Rig, String) async throws -> Void) async throws {
        try Privileges.requireRoot()
        let rig = try await EndToEndTests.Rig(initialItems: items)
        try await rig.using { rig in
            try await rig.waitUntilSynced(items)
            try await body(rig, rig.directory.file("syncd.sqlite"))
        }
    }
}
