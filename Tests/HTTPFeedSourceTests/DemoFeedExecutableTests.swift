import Foundation
import HTTPFeedSource
import SyncCore
import TestSupport
import Testing

@Suite("demo-feed executable")
struct DemoFeedExecutableTests {
    @Test("prints the bound port for --port 0, serves the feed, exits 0 on SIGTERM")
    func lifecycle() async throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try BuildProducts.path("demo-feed"))
        process.arguments = ["--port", "0", "--feed", "home:45", "--log-level", "error"]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        defer { if process.isRunning { process.interrupt() } }

        let line = try await onDedicatedThread { readLine(from: output.fileHandleForReading) }
        let base = try #require(line?.split(separator: " ").last.map(String.init), "no 'listening on' line")
        #expect(line?.hasPrefix("listening on http://127.0.0.1:") == true)
        #expect(!base.hasSuffix(":0"))

        let client = HTTPFeedClient()
        let source = try HTTPFeedSource(
            configuration: .init(url: try #require(URL(string: base + "/feeds/home?limit=20"))), client: client, logger: quietLogger)
        var driver = SyncDriver(source: source)
        try await driver.initial()
        try await driver.olderToTheEnd()
        try await client.shutdown()
        #expect(driver.log.items.count == 45)

        process.terminate()
        let status = try await onDedicatedThread { () -> Int32 in
            process.waitUntilExit()
            return process.terminationStatus
        }
        #expect(process.terminationReason == .exit)
        #expect(status == 0)
    }

    @Test("bad flags are refused with a reason and a usage exit code")
    func badFlags() async throws {
        let path = try BuildProducts.path("demo-feed")
        for arguments in [["--fault", "explode=0.1"], ["--feed", "bad/name"], ["--latency-ms", "9-1"]] {
            let (status, message) = try await onDedicatedThread { () throws -> (Int32, String) in
                let process = Process()
                process.executableURL = URL(fileURLWithPath: path)
                process.arguments = arguments
                let errors = Pipe()
                process.standardOutput = FileHandle.nullDevice
                process.standardError = errors
                try process.run()
                let message = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
                process.waitUntilExit()
                return (process.terminationStatus, message)
            }
            #expect(status == 64, "\(arguments)")
            #expect(message.contains("Error:"), "\(arguments): \(message)")
        }
    }
}

/// Reads one line, blocking; `nil` at end of file.
private func readLine(from handle: FileHandle) -> String? {
    var bytes: [UInt8] = []
    while true {
        let chunk = handle.readData(ofLength: 1)
        guard let byte = chunk.first else { return bytes.isEmpty ? nil : String(decoding: bytes, as: UTF8.self) }
        if byte == UInt8(ascii: "\n") { return String(decoding: bytes, as: UTF8.self) }
        bytes.append(byte)
    }
}
