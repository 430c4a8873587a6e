import Foundation
import Logging
import Synchronization

/// A swift-log handler for daemons: under systemd (`JOURNAL_STREAM` set) it writes plain lines
/// with sd-daemon(3) `<N>` priority prefixes, which journald turns into message priorities;
/// elsewhere it writes timestamped lines. Always to standard error.
public struct JournalLogHandler: LogHandler {
    /// Metadata added to every line of this handler's logger.
    public var metadata: Logger.Metadata = [:]
    /// The lowest level written.
    public var logLevel: Logger.Level
    private let label: String
    private let journal: Bool

    /// A handler for `label`; `environment` decides journal or terminal format (`JOURNAL_STREAM`).
    public init(label: String, level: Logger.Level, environment: [String: String] = ProcessInfo.processInfo.environment) {
        self.label = label
        self.logLevel = level
        self.journal = environment["JOURNAL_STREAM"].map { !$0.isEmpty } ?? false
    }

    /// One metadata value of this handler.
    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    /// Writes one line to standard error, with its `<N>` priority prefix under journald.
    public func log(event: LogEvent) {
        var merged = metadata
        if let extra = event.metadata { merged.merge(extra) { $1 } }
        let fields = merged.isEmpty ? "" : " " + merged.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
        let line: String
        if journal {
            line = "<\(Self.priority(event.level))>\(event.message)\(fields)\n"
        } else {
            let time = Date().formatted(.iso8601.time(includingFractionalSeconds: true))
            line = "\(time) \(event.level.rawValue.uppercased()) \(label): \(event.message)\(fields)\n"
        }
        FileHandle.standardError.write(Data(line.utf8))
    }

    /// syslog priorities as sd-daemon.h defines them.
    static func priority(_ level: Logger.Level) -> Int {
        switch level {
        case .trace, .debug: 7
        case .info: 6
        case .notice: 5
        case .warning: 4
        case .error: 3
        case .critical: 2
        }
    }
}
