import Foundation
import SyncControl
import TestSupport
import Testing

/// The built `syncctl` binary against an in-process server.
@Suite("syncctl", .timeLimit(.minutes(3)))
struct SyncctlCommandTests {
    struct Result {
        var status: Int32
        var stdout: String
        var stderr: String
    }

    /// Runs `body`, as root, with a control server at `path` and `copy`, a copy of syncctl that
    /// `nobody` can run: the build tree under /root usually is out of its reach.
    static func withSyncctlForNobody(_ body: @Sendable (_ copy: String, _ path: String) async throws -> Void) async throws {
        try Privileges.requireRoot()
        let copy = try await BuildProducts.copy("syncctl", to: try makeSocketDirectory() + "/syncctl")
        defer { try? FileManager.default.removeItem(atPath: (copy as NSString).deletingLastPathComponent) }
        try await withControlServer { path in try await body(copy, path) }
    }

    /// Runs syncctl on its own thread (see ``runCommand(_:)``) and captures everything.
    static func syncctl(_ arguments: [String], environment: [String: String] = [:], asUser uid: Int? = nil, binary: String? = nil) async throws -> Result {
        let binary = try binary ?? BuildProducts.path("syncctl")
        let prefix = uid.map { ["setpriv", "--reuid=\($0)", "--regid=\($0)", "--clear-groups"] } ?? []
        let env = ["env", "-u", "SYNCD_SOCKET", "NO_COLOR=1"] + environment.map { "\($0.key)=\($0.value)" }
        let script = "\"$@\" >\"$OUT\" 2>\"$ERR\"; echo $?"
        let directory = try makeSocketDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let out = directory + "/out", err = directory + "/err"
        let status = try await runCommand(["env", "OUT=\(out)", "ERR=\(err)", "sh", "-c", script, "sh"] + prefix + env + [binary] + arguments)
        return Result(
            status: Int32(status.trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1,
            stdout: (try? String(contentsOfFile: out, encoding: .utf8)) ?? "",
            stderr: (try? String(contentsOfFile: err, encoding: .utf8)) ?? ""
        )
    }

    @Test func notRunningIsAClearFailure() async throws {
        let result = try await Self.syncctl(["status", "--socket", "/nonexistent/io.syncd"])
        #expect(result.status == 1)
        #expect(result.stderr == "syncd is not running (cannot connect to /nonexistent/io.syncd: No such file or directory)\n")
        let fromEnvironment = try await Self.syncctl(["status"], environment: ["SYNCD_SOCKET": "/nonexistent/x"])
        #expect(fromEnvironment.stderr.contains("/nonexistent/x"))
    }

    @Test func statusTableAndJSON() async throws {
        try await withControlServer { path in
            let table = try await Self.syncctl(["status", "--socket", path])
            #expect(table.status == 0)
            #expect(table.stdout.hasPrefix("● syncd 0.1.0\n"))
            #expect(table.stdout.contains("State: online via eth0 (2 of 2 feeds reachable)"))
            #expect(!table.stdout.contains("\u{1B}["), "NO_COLOR and a pipe: no escape sequences")

            let short = try await Self.syncctl(["status", "--socket", path, "--json=short"])
            #expect(short.stdout.split(separator: "\n").count == 1)
            let decoded = try ControlJSON.makeDecoder().decode(ControlStatus.self, from: Data(short.stdout.utf8))
            #expect(decoded == Samples.status())

            let pretty = try await Self.syncctl(["status", "--socket", path, "--json=pretty", "work"])
            #expect(pretty.stdout.split(separator: "\n").count > 10)
            #expect(try ControlJSON.makeDecoder().decode(ControlStatus.self, from: Data(pretty.stdout.utf8)).feeds.map(\.name) == ["work"])

            let unknown = try await Self.syncctl(["status", "--socket", path, "nope"])
            #expect(unknown.status == 1)
            #expect(unknown.stderr == "no feed named 'nope'\n")
        }
    }

    /// `items --follow` prints each change on a line of its own, flushed; JSON keeps the payload
    /// as sent, the table line keeps escapes out of the terminal; `--since` continues after a
    /// point; a feed syncd does not know is an error. (The fake's log ends, and the server ends
    /// such a stream with end-of-file: syncctl says syncd went away, after every line.)
    @Test func itemsFollowPrintsEachChange() async throws {
        try await withControlServer(handler: FakeHandler()) { path in
            let json = try await Self.syncctl(["items", "home", "--follow", "--json=short", "--socket", path])
            #expect(json.status == 1 && json.stderr.contains("syncd closed the connection"), "\(json.stderr)")
            let lines = json.stdout.split(separator: "\n")
            #expect(lines.count == 3)
            let first = try ControlJSON.makeDecoder().decode(ControlItemChange.self, from: Data(lines[0].utf8))
            #expect(first == ControlItemChange(kind: .inserted, point: "e1:1", id: "7", payload: ["id": "7", "title": "first"]))
            #expect(lines[2].contains(#""kind":"evicted""#) && !lines[2].contains("payload"))

            let table = try await Self.syncctl(["items", "home", "--follow", "--since", "e1:1", "--socket", path])
            #expect(table.status == 1)
            #expect(table.stdout.split(separator: "\n").map { $0.split(separator: " ").prefix(3).joined(separator: " ") } == ["updated 7 e1:2", "evicted 7 e1:3"])
            #expect(TerminalSafetyTests.isClean(table.stdout), "\(table.stdout.debugDescription)")

            let unknown = try await Self.syncctl(["items", "nope", "--follow", "--socket", path])
            #expect(unknown.status == 1 && unknown.stderr.contains("nope"))
            let misuse = try await Self.syncctl(["items", "home", "--since", "e1:1", "--socket", path])
            #expect(misuse.status != 0 && misuse.stderr.contains("--since goes with --follow"))
        }
    }

    @Test func actionsAndItems() async throws {
        let handler = FakeHandler()
        try await withControlServer(handler: handler) { path in
            let refresh = try await Self.syncctl(["refresh", "home", "--socket", path])
            #expect(refresh.status == 0)
            #expect(refresh.stdout == "Refresh: home\n")
            let retry = try await Self.syncctl(["retry", "--socket", path])
            #expect(retry.stdout == "Retry: home, work\n")
            let seen = try await Self.syncctl(["seen", "home", "--socket", path])
            #expect(seen.status == 0 && seen.stdout == "Mark seen: home\n")
            let older = try await Self.syncctl(["older", "fresh", "--socket", path])
            #expect(older.status == 1)
            #expect(older.stderr == "feed 'fresh' is not ready: first load has not succeeded\n")

            let items = try await Self.syncctl(["items", "home", "--limit", "2", "--socket", path])
            #expect(items.stdout == "ID  SUMMARY\n5   item 5\n4   item 4\n\n2 items. More: syncctl items home --after 4\n")
            let json = try await Self.syncctl(["items", "home", "--after", "4", "--limit", "1", "--json=short", "--socket", path])
            #expect(try ControlJSON.makeDecoder().decode(ControlItemPage.self, from: Data(json.stdout.utf8)).items.map(\.id) == ["3"])
        }
        #expect(handler.recordedCalls == ["refresh home", "retry *", "seen home"])
    }

    @Test(.enabled(if: Privileges.rootTestsEnabled, Comment(rawValue: Privileges.skipReason)))
    func unprivilegedUserIsToldWhy() async throws {
        try await Self.withSyncctlForNobody { copy, path in
            let denied = try await Self.syncctl(["refresh", "home", "--socket", path], asUser: 65534, binary: copy)
            #expect(denied.status == 1)
            #expect(denied.stderr == "permission denied: Refresh needs root or membership in syncd's control group\n")
            let status = try await Self.syncctl(["status", "--socket", path], asUser: 65534, binary: copy)
            #expect(status.status == 0, "\(status.stderr)")
        }
    }

    /// Not on a terminal, watch prints one still frame per change and says so when syncd leaves.
    @Test(.timeLimit(.minutes(1))) func watchOnAPipe() async throws {
        let handler = FakeHandler()
        let result = try await withControlServer(handler: handler) { path in
            async let run = Self.syncctl(["watch", "--socket", path], environment: ["COLUMNS": "70", "LINES": "30"])
            try await waitUntil("syncctl subscribed") { handler.broadcaster.subscriberCount > 0 }
            handler.broadcaster.publish(Samples.status(online: false))
            handler.broadcaster.finish()
            return try await run
        }
        // Watchers get the newest state, not every intermediate one: the online frame may have
        // been superseded before it was read, the offline one must arrive.
        #expect(result.stdout.hasSuffix("\n\n"))
        #expect(result.stdout.contains("syncd 0.1.0 · offline (no carrier)"))
        #expect(result.stdout.contains("• Hello world"))
        #expect(!result.stdout.contains("\u{1B}["))
        #expect(result.status == 1)
        #expect(result.stderr.contains("syncd closed the connection"))
    }

    /// A hostile feed's escapes never reach the terminal through items, watch or status.
    @Test(.timeLimit(.minutes(1))) func hostileFeedIsPrintedClean() async throws {
        let handler = FakeHandler(status: TerminalSafetyTests.hostileStatus(), summaryPrefix: TerminalSafetyTests.hostile)
        try await withControlServer(handler: handler) { path in
            let items = try await Self.syncctl(["items", "home", "--socket", path])
            #expect(items.status == 0)
            #expect(items.stdout.contains("evil"))
            #expect(TerminalSafetyTests.isClean(items.stdout), "\(items.stdout.debugDescription)")
            let status = try await Self.syncctl(["status", "--socket", path])
            #expect(TerminalSafetyTests.isClean(status.stdout), "\(status.stdout.debugDescription)")
            // JSON keeps every character, escaped: the same data, nothing a terminal acts on.
            let json = try await Self.syncctl(["items", "home", "--json=short", "--socket", path])
            #expect(TerminalSafetyTests.isClean(json.stdout), "\(json.stdout.debugDescription)")
            let page = try ControlJSON.makeDecoder().decode(ControlItemPage.self, from: Data(json.stdout.utf8))
            // The payload as the server sent it, every character; the summary made from it
            // keeps the escapes as data too (only whitespace is folded onto one line).
            #expect(page.items.first?.payload["title"]?.stringValue == TerminalSafetyTests.hostile + "5")
            #expect(page.items.first?.summary.hasPrefix("evil\u{1B}[2J\u{1B}]0;pwned\u{07}\u{9B}31m\u{7F}\u{202E}txt.exe") == true)

            async let watch = Self.syncctl(["watch", "--socket", path], environment: ["COLUMNS": "60", "LINES": "30"])
            try await waitUntil("syncctl subscribed") { handler.broadcaster.subscriberCount > 0 }
            handler.broadcaster.finish()
            let watched = try await watch
            #expect(watched.stdout.contains("evil"))
            #expect(TerminalSafetyTests.isClean(watched.stdout), "\(watched.stdout.debugDescription)")
        }
    }

    @Test func versionFlag() async throws {
        let result = try await Self.syncctl(["--version"])
        #expect(result.status == 0)
        #expect(result.stdout == "\(SyncdInterface.version)\n")
    }

    @Test func itemsLimitBoundsAreDocumentedAndEnforced() async throws {
        let help = try await Self.syncctl(["items", "--help"])
        #expect(help.stdout.contains("1…500"))
        try await withControlServer { path in
            for bad in ["-3", "0", "501"] {
                let result = try await Self.syncctl(["items", "home", "--limit", bad, "--socket", path])
                #expect(result.status != 0)
                #expect(result.stderr.contains("--limit must be between 1 and 500, not \(bad)."), "\(result.stderr)")
            }
            let most = try await Self.syncctl(["items", "home", "--limit", "500", "--socket", path])
            #expect(most.status == 0)
        }
    }

    /// A socket the user may not open is reported as such, not as syncd not running.
    @Test(.enabled(if: Privileges.rootTestsEnabled, Comment(rawValue: Privileges.skipReason)))
    func socketPermissionDeniedIsNotNotRunning() async throws {
        try await Self.withSyncctlForNobody { copy, path in
            chmod((path as NSString).deletingLastPathComponent, 0o700)
            let denied = try await Self.syncctl(["status", "--socket", path], asUser: 65534, binary: copy)
            #expect(denied.status == 1)
            #expect(denied.stderr.hasPrefix("permission denied: cannot connect to \(path)"), "\(denied.stderr)")
            #expect(!denied.stderr.contains("not running"))
        }
    }

    /// Through a pipe, each JSON line reaches the consumer while watch is still running, not
    /// when a 4 KiB buffer fills or the program ends.
    @Test func watchLinesArrivePromptlyThroughAPipe() async throws {
        let handler = FakeHandler()
        try await withControlServer(handler: handler) { path in
            let directory = try TemporaryDirectory()
            // Killed when released, should the test end early.
            let process = try ChildProcess(
                [try BuildProducts.path("syncctl"), "watch", "--json=short", "--socket", path],
                logPath: directory.file("stderr"), pipes: .standardOutput
            )
            // Watch runs until it is stopped, so a line held back in a buffer never comes: the
            // bound ends that wait, it does not time the line.
            let line = try await readLine(from: process.standardOutput)
            #expect(process.isRunning, "the line came before watch ended")
            let first = try #require(line.split(separator: "\n").first, "no line from syncctl watch within \(hangGuard)")
            let status = try ControlJSON.makeDecoder().decode(ControlStatus.self, from: Data(first.utf8))
            #expect(status.version == "0.1.0")
            await process.stop()
        }
    }
}
