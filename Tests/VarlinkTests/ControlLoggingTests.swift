import Foundation
import Logging
import SyncControl
import Synchronization
import Testing
import TestSupport
import Varlink

/// What a caller of the control socket can make syncd write to its log.
@Suite("Control calls in the log", .timeLimit(.minutes(2)))
struct ControlLoggingTests {
    /// Every message and its metadata, rendered as a journal line would carry them.
    final class Captured: Sendable {
        private let lines = Mutex<[String]>([])
        var all: [String] { lines.withLock { $0 } }
        func append(_ line: String) { lines.withLock { $0.append(line) } }
    }

    struct CapturingHandler: LogHandler {
        let captured: Captured
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace
        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }
        func log(event: LogEvent) {
            let fields = (metadata.merging(event.metadata ?? [:]) { $1 }).map { "\($0.key)=\($0.value)" }.sorted()
            captured.append("\(event.message) \(fields.joined(separator: " "))")
        }
    }

    /// A feed name the caller made up is answered FeedNotFound and never logged; a configured
    /// one is, once the handler has matched it.
    @Test func aFeedNameIsLoggedOnlyOnceItNamesAFeed() async throws {
        let captured = Captured()
        let logger = Logger(label: "test", factory: { _ in CapturingHandler(captured: captured) })
        let hostile = "\u{1B}]0;pwned\u{07}\u{1B}[2J" + String(repeating: "x", count: 1000)
        try await withControlServer(logger: logger) { path, _ in
            let client = SyncControlClient(socketPath: path)
            await #expect(throws: SyncControlError.feedNotFound(hostile)) { try await client.refresh(feed: hostile) }
            let answer = try await client.refresh(feed: "home")
            #expect(answer == ["home"])
        }
        let lines = captured.all
        #expect(lines.contains { $0.hasPrefix("io.syncd.Refresh ") && $0.contains("feed=home") }, "\(lines)")
        #expect(!lines.contains { $0.contains("pwned") || $0.contains("\u{1B}") || $0.contains("xxxx") }, "\(lines)")
    }
}
