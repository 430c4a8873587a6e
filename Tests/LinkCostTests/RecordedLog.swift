import Logging
import Synchronization

/// Log messages a watcher wrote, for tests that check what it said.
final class RecordedLog: Sendable {
    private let entries = Mutex<[(level: Logger.Level, message: String)]>([])

    /// A logger (at debug level) that records here.
    var logger: Logger {
        var logger = Logger(label: "test.networkmanager") { _ in RecordingLogHandler(log: self) }
        logger.logLevel = .debug
        return logger
    }

    func record(_ level: Logger.Level, _ message: String) {
        entries.withLock { $0.append((level, message)) }
    }

    /// Messages logged at `level`, oldest first.
    func messages(at level: Logger.Level) -> [String] {
        entries.withLock { $0.filter { $0.level == level }.map(\.message) }
    }

    /// Every message, oldest first, for failure messages.
    var all: [String] { entries.withLock { $0.map { "\($0.level): \($0.message)" } } }
}

private struct RecordingLogHandler: LogHandler {
    let log: RecordedLog
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .debug
    var metadataProvider: Logger.MetadataProvider?

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        log.record(event.level, event.message.description)
    }
}

