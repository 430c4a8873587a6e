import Foundation
import HTTPFeedSource
import SyncCore
import TestSupport
import Testing

@Suite("demo-feed executable")
struct DemoFeedExecutableTests {
    @Test("prints the bound port for --port 0, serves the feed, exits 0 on SIGTERM")
    func lifecycle() async throws {
        // Output to a file read with bounded waits, and a bounded stop: a blocking read of a pipe
        // or Foundation's `waitUntilExit()` would wait for good on a program that never prints or
        // whose exit Foundation missed, and neither ends when the test is cancelled.
        let directory = try TemporaryDirectory(prefix: "demo-feed")
        let process = try ChildProcess(
            [try BuildProducts.path("demo-feed"), "--port", "0", "--feed", "home:45", "--log-level", "error"],
            logPath: directory.file("output"))
        var line: String?
        do {
            try await waitUntil("demo-feed says where it listens, or exits") {
                // Whole lines only: the last piece may still be being written.
                line = process.output.split(separator: "\n", omittingEmptySubsequences: false).dropLast()
                    .first { $0.hasPrefix("listening on ") }.map(String.init)
                return line != nil || !process.isRunning
            }
        } catch {
            await process.stop(signal: SIGKILL)
            throw error
        }
        let base = try #require(line?.split(separator: " ").last.map(String.init), "no 'listening on' line: \(process.output)")
        #expect(line?.hasPrefix("listening on http://127.0.0.1:") == true)
        #expect(!base.hasSuffix(":0"))

        let client = HTTPFeedClient(options: .init(connectTimeout: hangGuard))
        do {
            let source = try HTTPFeedSource(
                configuration: .init(url: try #require(URL(string: base + "/feeds/home?limit=20")), requestTimeout: hangGuard),
                client: client, logger: quietLogger)
            var driver = SyncDriver(source: source)
            try await driver.initial()
            try await driver.olderToTheEnd()
            #expect(driver.log.items.count == 45)
        } catch {
            try? await client.shutdown()
            await process.stop(signal: SIGKILL)
            throw error
        }
        try await client.shutdown()

        // SIGTERM, then SIGKILL if it has not exited within the hang guard (128 + 9 then).
        let status = await process.stop(signal: SIGTERM, timeout: hangGuard)
        #expect(status == 0, "\(process.output)")
    }

    @Test("bad flags are refused with a reason and a usage exit code; demo-feed has no fault flags")
    func badFlags() async throws {
        let path = try BuildProducts.path("demo-feed")
        let faults = try BuildProducts.path("demo-feed-faults")
        let cases = [
            (faults, ["--fault", "explode=0.1"]), (path, ["--feed", "bad/name"]), (path, ["--latency-ms", "9-1"]),
            (faults, ["--feed", "bad/name"]), (path, ["--fault", "status:503=0.1"]),
        ]
        for (executable, arguments) in cases {
            // coreutils' timeout ends a program that does not exit by itself (status 124), so a
            // build that started serving despite the bad flag fails the test instead of hanging it.
            do {
                try await runCommand(["timeout", "-k", "5", "60", executable] + arguments)
                Issue.record("\(arguments): exited 0")
            } catch let failed as CommandFailed {
                #expect(failed.status == 64, "\(arguments)")
                #expect(failed.stderr.contains("Error:"), "\(arguments): \(failed.stderr)")
            }
        }
    }
}
