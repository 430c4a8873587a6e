import Dispatch
import GRDB
import GRDBSQLite
import Synchronization

/// Copies the store's write-ahead log back into the database file on a connection and a thread of
/// its own, so that no commit waits for it.
///
/// SQLite's automatic checkpoint runs inside the commit that takes the log past 1,000 pages: it
/// syncs the log, copies it into the database and syncs that, all before the commit returns. On a
/// slow disk that holds a backfill's writer long enough for the pages fetched ahead to fill up
/// behind it, and the network stops (BENCHMARKS.md, "The fetch chain and the checkpoint stall").
/// SQLite's documentation suggests this split: automatic checkpoints off, checkpoints "in a
/// separate thread". A passive checkpoint runs alongside the writer: it copies the committed
/// pages it finds while later commits go on appending to the log.
///
/// The log only starts again from its beginning when a writer finds every page of it copied,
/// which a writer that never pauses may never do; so once the log has grown past
/// ``Limits/restartFrames``, the writer runs the next checkpoint itself, in the commit that follows the
/// background one. That copies only what arrived meanwhile, and the next commit starts the log
/// again (and cuts its file to `journal_size_limit`).
package final class Checkpointer: Sendable {
    /// When checkpoints run, in pages of the log.
    package struct Limits: Sendable, Hashable {
        /// Pages written to the log after which a checkpoint starts in the background.
        package var thresholdFrames: Int
        /// Pages in the log past which the writer runs the next checkpoint itself.
        package var restartFrames: Int

        /// SQLite's own threshold (1,000 pages), and a log of up to ~32 MiB of 4 KiB pages
        /// before the writer makes it start again.
        package static let `default` = Limits(thresholdFrames: 1_000, restartFrames: 8_192)

        package init(thresholdFrames: Int, restartFrames: Int) {
            self.thresholdFrames = max(1, thresholdFrames)
            self.restartFrames = max(1, restartFrames)
        }
    }

    /// Checkpoints finished so far, by where they ran.
    package struct Counts: Sendable, Hashable {
        /// On the checkpointer's own connection and thread.
        package var background = 0
        /// On the writer's connection, after a commit, to let the log start again.
        package var onWriter = 0

        package init(background: Int = 0, onWriter: Int = 0) {
            self.background = background
            self.onWriter = onWriter
        }
    }

    private struct State {
        /// Log pages written since the last checkpoint was started.
        var frames = 0
        /// A checkpoint is queued or running.
        var running = false
        /// The log has grown past the restart limit: the writer checkpoints next.
        var restartWanted = false
        var completed = Counts()
    }

    private let path: String
    private let limits: Limits
    private let scheduling: SQLiteFeedStore.CommitScheduling
    private let state = Mutex(State())
    /// The checkpointing connection, opened on first use. Only the queue's work and `deinit`
    /// touch it, so the writer never waits for this lock.
    private let connection = Mutex<OpaquePointer?>(nil)
    private let queue = DispatchQueue(label: "syncd.store.checkpoint")

    init(path: String, limits: Limits, scheduling: SQLiteFeedStore.CommitScheduling) {
        self.path = path
        self.limits = limits
        self.scheduling = scheduling
    }

    deinit {
        connection.withLock { handle in
            if let handle { sqlite3_close_v2(handle) }
            handle = nil
        }
    }

    /// Checkpoints finished so far.
    var completed: Counts { state.withLock { $0.completed } }

    /// Called on the writer's connection after each write transaction (committed or not): counts
    /// the log pages it wrote and starts a checkpoint once enough have accumulated.
    func wrote(_ db: Database) {
        guard let handle = db.sqliteConnection else { return }
        var current: Int32 = 0, highest: Int32 = 0
        // Pages written to the log by this connection since the last call (the counter is reset).
        sqlite3_db_status(handle, SQLITE_DBSTATUS_CACHE_WRITE, &current, &highest, 1)
        enum Next { case nothing, background, here }
        let next: Next = state.withLock { state in
            state.frames += Int(current)
            guard !state.running else { return .nothing }
            if state.restartWanted {
                state.restartWanted = false
                state.frames = 0
                return .here
            }
            guard state.frames >= limits.thresholdFrames else { return .nothing }
            state.frames = 0
            state.running = true
            return .background
        }
        switch next {
        case .nothing:
            break
        case .here:
            // No commit can start meanwhile: after this the whole log is copied, and the next
            // commit starts it again. (An idle-moment checkpoint that started just now makes this
            // one return at once, and copies the log itself.)
            if Self.checkpoint(handle, SQLITE_CHECKPOINT_PASSIVE) != nil { state.withLock { $0.completed.onWriter += 1 } }
        case .background:
            queue.async { self.runInBackground(SQLITE_CHECKPOINT_PASSIVE) }
        }
    }

    /// Returns once the checkpoints started before the call have finished.
    func finished() async {
        await withCheckedContinuation { continuation in queue.async { continuation.resume() } }
    }

    /// Starts a checkpoint of whatever the log holds, unless one is running: for idle moments.
    ///
    /// When nothing else uses the store just then, the log's file is also cut to nothing (a long
    /// backfill leaves it at up to ~32 MiB); otherwise it is copied as far as it can be.
    func checkpointSoon() {
        let start = state.withLock { state in
            guard !state.running, state.frames > 0 else { return false }
            state.frames = 0
            state.running = true
            return true
        }
        if start { queue.async { self.runInBackground(SQLITE_CHECKPOINT_TRUNCATE) } }
    }

    private func runInBackground(_ firstMode: Int32) {
        if scheduling == .throughput { WriterScheduling.makeThroughputWork() }
        var mode = firstMode
        while true {
            let frames = connection.withLock { handle -> Int? in
                if handle == nil { handle = Self.open(path) }
                return handle.flatMap { Self.checkpoint($0, mode) }
            }
            mode = SQLITE_CHECKPOINT_PASSIVE
            let again = state.withLock { state in
                if frames != nil { state.completed.background += 1 }
                if let frames, frames >= limits.restartFrames { state.restartWanted = true }
                // Commits that landed meanwhile and filled another threshold's worth: go on.
                guard state.frames >= limits.thresholdFrames, !state.restartWanted else {
                    state.running = false
                    return false
                }
                state.frames = 0
                return true
            }
            guard again else { return }
        }
    }

    private static func open(_ path: String) -> OpaquePointer? {
        var handle: OpaquePointer?
        // A connection learns that the file is in WAL mode when it first reads it; until then a
        // checkpoint finds no log and does nothing.
        guard sqlite3_open_v2(path, &handle, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, nil) == SQLITE_OK,
              sqlite3_exec(handle, "SELECT 1 FROM sqlite_schema LIMIT 1", nil, nil, nil) == SQLITE_OK
        else {
            sqlite3_close_v2(handle)
            return nil
        }
        return handle
    }

    /// A checkpoint; the log's length in pages after it, or `nil` when it could not run (another
    /// checkpoint was running, no log, an I/O error) or, truncating, ran only as a passive one.
    ///
    /// A passive checkpoint never waits for readers or the writer. A truncating one, on a
    /// connection without a busy handler, waits for nobody either: when the writer or a reader is
    /// busy it copies what it can, as a passive one would, and leaves the file as it is.
    private static func checkpoint(_ handle: OpaquePointer, _ mode: Int32) -> Int? {
        var logFrames: Int32 = 0, copied: Int32 = 0
        guard sqlite3_wal_checkpoint_v2(handle, nil, mode, &logFrames, &copied) == SQLITE_OK, logFrames >= 0 else {
            return nil
        }
        return Int(logFrames)
    }
}
