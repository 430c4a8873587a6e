import Synchronization

/// Lines a benchmark collects while it runs and prints in its teardown hook: `--no-progress`
/// (quiet) sends the runner's stdout and stderr to /dev/null while the measured closure runs,
/// and restores them only for the teardown hooks.
public final class SummaryLines: Sendable {
    private let lines = Mutex<[String]>([])

    /// No lines yet.
    public init() {}

    /// Keeps `line` for the next ``flush()``.
    public func append(_ line: String) { lines.withLock { $0.append(line) } }

    /// Prints (to stdout) and forgets the collected lines.
    public func flush() {
        for line in lines.withLock({ lines in defer { lines = [] }; return lines }) { print(line) }
    }
}
