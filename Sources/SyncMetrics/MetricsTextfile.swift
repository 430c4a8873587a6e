import Foundation
import Logging
import ServiceLifecycle
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Writes the metrics to a file for node_exporter's textfile collector, for a daemon that
/// should not open a port.
///
/// A swift-service-lifecycle `Service`. ``run()`` writes once at start, then after each change
/// it is told of, at most once per ``Configuration/interval`` (changes in between make one
/// write), and only when the text differs from the last written. Each write goes to a hidden
/// temporary file in the same directory, which is flushed to disk and renamed over the target,
/// so a reader sees the old file or the new one, never part of one. Nothing wakes it between
/// changes. A failed write is logged (once until a write works again) and retried at the next
/// change.
public struct MetricsTextfile<C: Clock, Change: Sendable>: Service where C.Duration == Duration {
    /// Where and how often.
    public typealias Configuration = MetricsTextfileConfiguration

    /// Where and how often.
    public let configuration: Configuration
    private let changes: AsyncStream<Change>
    private let collect: @Sendable () async -> [UInt8]
    private let clock: C
    private let logger: Logger

    /// A writer of what `collect` makes (the Prometheus text format) after each element of `changes`.
    public init(configuration: Configuration, changes: AsyncStream<Change>, clock: C, logger: Logger, collect: @escaping @Sendable () async -> [UInt8]) {
        self.configuration = configuration
        self.changes = changes
        self.collect = collect
        self.clock = clock
        self.logger = logger
    }

    /// Writes until graceful shutdown or cancellation.
    public func run() async {
        await cancelWhenGracefulShutdown { await self.follow() }
    }

    private func follow() async {
        var written: [UInt8]?
        var failing = false
        func write() async {
            let text = await collect()
            guard text != written else { return }
            do {
                try Self.replace(configuration.path, with: text)
                written = text
                if failing { logger.notice("metrics textfile written again", metadata: ["path": "\(configuration.path)"]) }
                failing = false
            } catch {
                if !failing { logger.warning("cannot write the metrics textfile", metadata: ["path": "\(configuration.path)", "error": "\(error)"]) }
                failing = true
            }
        }
        await write()
        // Changes that come while a write waits for its interval make that one write (a
        // backfill reports a change per page): a change marks the file stale and wakes the
        // writer; a wake-up for changes the last write already saw finds it fresh.
        let (pending, signal) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        let stale = StaleFlag()
        let changes = self.changes
        await withDiscardingTaskGroup { group in
            group.addTask {
                for await _ in changes {
                    stale.value.store(true, ordering: .sequentiallyConsistent)
                    signal.yield()
                }
                signal.finish()
            }
            var last = clock.now
            for await _ in pending where stale.value.load(ordering: .sequentiallyConsistent) {
                let due = last.advanced(by: configuration.interval)
                if clock.now < due {
                    do { try await clock.sleep(until: due, tolerance: nil) } catch { break }
                }
                // Cleared before the collect: a change after this point makes another write.
                stale.value.store(false, ordering: .sequentiallyConsistent)
                await write()
                last = clock.now
            }
            group.cancelAll()
        }
    }

    /// Replaces the file at `path` with `bytes` in one rename, after flushing them to disk.
    static func replace(_ path: String, with bytes: [UInt8]) throws(TextfileError) {
        let url = URL(fileURLWithPath: path)
        let temporary = url.deletingLastPathComponent().appendingPathComponent(".\(url.lastPathComponent).\(getpid()).tmp").path
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw TextfileError(path: temporary, operation: "create", errno: errno) }
        var failure: TextfileError?
        // Readable by node_exporter's user whatever the daemon's umask (the unit's is 0077).
        if fchmod(fd, 0o644) != 0 { failure = TextfileError(path: temporary, operation: "set permissions of", errno: errno) }
        var offset = 0
        while failure == nil, offset < bytes.count {
            let count = bytes[offset...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno != EINTR { failure = TextfileError(path: temporary, operation: "write", errno: errno) }
            } else {
                offset += count
            }
        }
        if failure == nil, fsync(fd) != 0 { failure = TextfileError(path: temporary, operation: "flush", errno: errno) }
        close(fd)
        if failure == nil, rename(temporary, path) != 0 { failure = TextfileError(path: path, operation: "rename onto", errno: errno) }
        if let failure {
            unlink(temporary)
            throw failure
        }
    }
}

/// Whether a change came since the last collect, shared by the writer and what follows changes.
private final class StaleFlag: Sendable {
    let value = Atomic<Bool>(false)
}

/// A write of the metrics textfile that failed.
public struct TextfileError: Error, CustomStringConvertible, Sendable {
    /// The file.
    public var path: String
    /// What was being done.
    public var operation: String
    /// The system's error number.
    public var errno: Int32

    /// In words, with the path and what to do.
    public var description: String {
        "cannot \(operation) \(path): \(String(cString: strerror(errno))) (check that [metrics] textfile names a writable directory)"
    }
}

/// Where ``MetricsTextfile`` writes and how often.
public struct MetricsTextfileConfiguration: Sendable, Hashable {
    /// The file (`…/syncd.prom`: node_exporter reads only names ending in `.prom`).
    public var path: String
    /// The shortest time between two writes.
    public var interval: Duration = .seconds(15)

    /// Writes to `path` at most every 15 seconds.
    public init(path: String) {
        self.path = path
    }
}
