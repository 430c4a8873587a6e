import Foundation
import NetlinkProbe
import SyncControl
@testable import SyncDaemon
import Testing
import TestSupport

/// The real syncd gives its code pages back once syncing has gone quiet: start-up and a sync
/// leave most of the binary resident (fault-around maps 64 KiB per fault), the page-out a second
/// after the last feed change leaves a small part. Pages that another process maps too stay: with
/// several syncd processes on one binary, only what one of them alone touched goes.
@Suite struct IdleMemoryTests {
    /// Size and resident size (KiB) of every mapping of `path` in `pid`, from `/proc/PID/smaps`.
    static func mapped(_ path: String, in pid: Int32) -> (size: Int, resident: Int) {
        guard let smaps = CodePages.readProcFile("/proc/\(pid)/smaps") else { return (0, 0) }
        var size = 0, resident = 0, inside = false
        for line in smaps.split(separator: "\n") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            if let first = fields.first, first.contains("-"), !first.hasSuffix(":") {
                inside = fields.count >= 6 && fields[5...].joined(separator: " ") == path
            } else if inside, fields.count >= 2, let kib = Int(fields[1]) {
                if fields[0] == "Size:" { size += kib }
                if fields[0] == "Rss:" { resident += kib }
            }
        }
        return (size, resident)
    }

    @Test(.timeLimit(.minutes(2))) func theBinaryIsMostlyPagedOutOnceSyncingIsQuiet() async throws {
        let directory = try TemporaryDirectory(prefix: "syncd-idle-memory")
        let server = try ChildProcess(
            [try BuildProducts.path("demo-feed"), "--host", "127.0.0.1", "--port", "0", "--feed", "idle:500:0", "--limit", "50", "--log-level", "warning"],
            logPath: directory.file("demo-feed.log"))
        defer { Task { [server] in await server.stop() } }
        var base = ""
        try await waitUntil("demo-feed listens") {
            guard let line = server.output.split(separator: "\n").first(where: { $0.hasPrefix("listening on ") }) else { return false }
            base = String(line.dropFirst("listening on ".count))
            return true
        }
        try """
            [daemon]
            store = "\(directory.file("syncd.sqlite"))"
            control_socket = "\(directory.file("io.syncd"))"

            [[feed]]
            name = "idle"
            url = "\(base)/feeds/idle"
            page_size = 50
            backfill = 500
            refresh_interval = "1h"
            """.write(toFile: directory.file("syncd.toml"), atomically: true, encoding: .utf8)
        // A copy of its own: the kernel leaves pages that another process maps too, and other
        // tests run the built binary at the same time.
        let binary = try await BuildProducts.copy("syncd", to: directory.file("syncd"))
        let daemon = try ChildProcess([binary, "--config", directory.file("syncd.toml")], logPath: directory.file("syncd.log"))
        defer { Task { [daemon] in await daemon.stop() } }
        let client = SyncControlClient(socketPath: directory.file("io.syncd"))
        var synced = false
        let syncDeadline = ContinuousClock.now + .seconds(60)
        while !synced, daemon.isRunning, ContinuousClock.now < syncDeadline {
            try await Task.sleep(for: .milliseconds(100))
            synced = (try? await client.status())?.feeds.first { $0.name == "idle" }.map { $0.itemCount >= 500 } ?? false
        }
        try #require(synced, "the feed did not sync; syncd's output:\n\(daemon.output)")

        // Start-up and the sync leave well over half of the binary resident; after the page-out
        // the rest is its written data and the few pages the idle daemon runs.
        let path = URL(fileURLWithPath: binary).resolvingSymlinksInPath().path
        let deadline = ContinuousClock.now + .seconds(30)
        var last = Self.mapped(path, in: daemon.pid)
        while !(last.size > 0 && last.resident * 10 < last.size * 3), ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(200))
            last = Self.mapped(path, in: daemon.pid)
        }
        #expect(daemon.isRunning, "\(daemon.output)")
        #expect(last.size > 0 && last.resident * 10 < last.size * 3, "\(path): \(last.resident) KiB resident of \(last.size) KiB after 30 s")
    }
}
