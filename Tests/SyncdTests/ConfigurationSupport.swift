import SyncDaemon
import Testing
import TestSupport

/// The one feed a configuration must have, for the tests of the other tables' keys.
let oneFeed = """
    [[feed]]
    name = "home"
    url = "https://mastodon.example/api/v1/timelines/home"
    """

/// The `[[feed]]` tables of `feeds`, in order, a blank line between them: a configuration of
/// these feeds alone, every other table left to its defaults.
func feedTables(_ feeds: SyncdConfig.Feed...) -> String {
    feeds.map(\.toml).joined(separator: "\n")
}

/// Expects the loader to refuse `text` (read as `file`) with an error at `line` (`nil`: one of the
/// whole file) naming `key`, whose message says `message`; returns the error for further checks.
@discardableResult
func expectRefusal(
    _ text: String, file: String = "t.toml", line: Int?, key: String?, message: String,
    sourceLocation: SourceLocation = #_sourceLocation
) -> ConfigurationError? {
    do {
        _ = try DaemonConfiguration.parse(text, file: file)
        Issue.record("accepted: \(text)", sourceLocation: sourceLocation)
        return nil
    } catch {
        #expect(error.line == line, "\(error)", sourceLocation: sourceLocation)
        #expect(error.key == key, "\(error)", sourceLocation: sourceLocation)
        #expect(error.message.contains(message), "\(error)", sourceLocation: sourceLocation)
        return error
    }
}
