import Foundation
import GRDB
import SyncCore
import Synchronization

/// A ``FeedStore`` in an SQLite file in WAL mode (a GRDB `DatabasePool`: one writer, readers that
/// never block it).
///
/// Each page is written in one transaction together with its cursors and end flag, so a crash at
/// any point leaves the page either wholly stored or not at all; the next run continues from the
/// stored cursors and refetches at most the page that was lost. Items are keyed by (feed, id), so
/// a page that overlaps stored items adds only the new ones.
public struct SQLiteFeedStore: FeedStore {
    /// Points inside a commit's transaction, for fault-injection tests that kill the process there.
    package enum CommitStage: String, Sendable, CaseIterable {
        /// The transaction is open and nothing is written yet.
        case began
        /// The page's items are written; the cursors are not.
        case itemsWritten
        /// Items and cursors are written; the transaction has not committed.
        case cursorsWritten
    }

    /// How many items a feed keeps: the oldest beyond the limits are deleted in the transaction of
    /// the commit that goes past them.
    public struct Retention: Sendable, Hashable {
        /// At most this many items (the newest).
        public var keepItems: Int?
        /// Items stored longer ago than this are dropped, from the oldest up to the first one
        /// stored more recently (so what is kept stays one unbroken run of the feed).
        public var keepAge: Duration?
        /// Never fewer than this many items (what the presentation shows), whatever the limits.
        public var minimum: Int

        /// Limits on a feed's items; `nil` means no limit of that kind. A negative minimum counts as 0.
        public init(keepItems: Int? = nil, keepAge: Duration? = nil, minimum: Int = 0) {
            self.keepItems = keepItems
            self.keepAge = keepAge
            self.minimum = max(0, minimum)
        }
    }

    /// How the threads that run commits are scheduled.
    public enum CommitScheduling: Sendable, Hashable {
        /// As the process left them.
        case unchanged
        /// As throughput work: each thread that runs an async commit or a checkpoint of the
        /// write-ahead log takes a long scheduler slice (Linux 6.12 and later) and keeps it. It
        /// keeps its share of the CPU, but threads with the default slice (event loops,
        /// interactive programs) no longer wait behind its commits.
        ///
        /// The threads are libdispatch's, which the whole process shares: choose this where
        /// nothing else on them needs to preempt promptly. syncd does: its backfills take less
        /// time (measured: BENCHMARKS.md, "The B-trees' order, the writer's slice").
        case throughput
    }

    /// The file path of the database.
    public let path: String
    /// Feeds whose cached item count disagreed with their rows when the store was opened (with
    /// `checkIntegrity`), and was corrected: the count it said, by feed. Empty when all agreed.
    public let recountedFeeds: [String: Int]
    let pool: DatabasePool
    let commitHook: (@Sendable (CommitStage) -> Void)?
    let retention: [String: Retention]
    private let scheduling: CommitScheduling
    private let checkpointer: Checkpointer
    private let faults = FaultRecord()
    /// Wakes the followers of the change log after each commit; shared by the store's copies.
    let notifier = ChangeNotifier()
    /// Removed items kept for replay (``defaultTombstoneLimit``).
    let tombstoneLimit: Int
    /// The device and inode of the database file as opened.
    private let identity: FileIdentity?

    /// Opens (creating if needed) the store at `path` and migrates it.
    ///
    /// - Throws: ``StoreFault``, saying in words why the store cannot be used (a read-only
    ///   filesystem, a full disk, a file that is not a database, a damaged one, …).
    /// - Parameters:
    ///   - path: the database file; its directory must exist.
    ///   - retention: per feed, how many items to keep; feeds not named keep everything.
    ///   - scheduling: how the threads that run commits are scheduled.
    ///   - checkIntegrity: whether SQLite's `quick_check` runs before the store is used, so a
    ///     store damaged while it was closed is refused (``StoreFault/Kind/damaged``) instead of
    ///     failing later, in the middle of a client's read. It reads the whole file, so it costs
    ///     about what reading the file does (BENCHMARKS.md, "Store integrity check").
    ///   - tombstoneLimit: removed items the change log keeps for followers; one asking from
    ///     before the oldest kept is reset (``ItemChange/Kind/reset``).
    public init(
        path: String, retention: [String: Retention] = [:], scheduling: CommitScheduling = .unchanged, checkIntegrity: Bool = true,
        tombstoneLimit: Int = SQLiteFeedStore.defaultTombstoneLimit
    ) throws {
        try self.init(path: path, commitHook: nil, retention: retention, scheduling: scheduling, checkIntegrity: checkIntegrity, tombstoneLimit: tombstoneLimit)
    }

    /// ``init(path:retention:scheduling:)`` with `commitHook` called inside each commit's
    /// transaction at each ``CommitStage``: for fault-injection tests that kill the process there;
    /// and with the write-ahead log's checkpoints at other `checkpoints` limits.
    package init(
        path: String, commitHook: (@Sendable (CommitStage) -> Void)?, retention: [String: Retention] = [:],
        scheduling: CommitScheduling = .unchanged, checkpoints: Checkpointer.Limits = .default, checkIntegrity: Bool = true,
        tombstoneLimit: Int = SQLiteFeedStore.defaultTombstoneLimit
    ) throws {
        var configuration = Configuration()
        // Another process (syncctl, a test) may hold the file briefly; wait rather than fail.
        configuration.busyMode = .timeout(10)
        configuration.prepareDatabase { db in
            // In WAL mode NORMAL never corrupts and never splits a transaction; a power loss may
            // drop the last commits, which are then fetched again from the older stored cursors.
            try db.execute(sql: "PRAGMA synchronous = NORMAL")
            // Statement and savepoint journals in memory: they hold the original of each page a
            // many-row insert or a page's savepoint changes, which otherwise spills to a temporary
            // file past 64 KiB and goes through the kernel's write path for nothing.
            try db.execute(sql: "PRAGMA temp_store = MEMORY")
            // Checkpoints run beside the writer, not inside its commits (``Checkpointer``). A log
            // that has grown starts again after one, and its file is then cut back to 4 MiB.
            try db.execute(sql: "PRAGMA wal_autocheckpoint = 0")
            try db.execute(sql: "PRAGMA journal_size_limit = \(4 << 20)")
        }
        self.path = path
        do {
            self.pool = try DatabasePool(path: path, configuration: configuration)
            if checkIntegrity {
                // Before the migrations, which would write into damaged pages.
                let problems = try pool.read { try String.fetchAll($0, sql: "PRAGMA quick_check(3)") }
                if problems != ["ok"] {
                    throw StoreFault(.damaged, path: path, detail: "quick_check: " + problems.joined(separator: "; "))
                }
            }
            try Schema.migrator.migrate(pool)
            self.recountedFeeds = checkIntegrity ? try Self.recountItems(pool) : [:]
        } catch {
            throw StoreFault.classify(error, path: path)
        }
        self.commitHook = commitHook
        self.tombstoneLimit = tombstoneLimit
        self.retention = retention
        self.scheduling = scheduling
        self.checkpointer = Checkpointer(path: path, limits: checkpoints, scheduling: scheduling)
        self.identity = FileIdentity(path)
    }

    /// Corrects every feed's cached `item_count` that disagrees with its rows; returns the wrong
    /// counts by feed. Writes only when one disagrees.
    private static func recountItems(_ pool: DatabasePool) throws -> [String: Int] {
        let sql = "SELECT id, item_count FROM feed WHERE item_count != (SELECT COUNT(*) FROM item WHERE item.feed = feed.id)"
        let wrong = try pool.read { db in
            try Row.fetchAll(db, sql: sql).reduce(into: [String: Int]()) { $0[$1["id"]] = $1["item_count"] }
        }
        guard !wrong.isEmpty else { return [:] }
        try pool.write { db in
            try db.execute(sql: "UPDATE feed SET item_count = (SELECT COUNT(*) FROM item WHERE item.feed = feed.id) WHERE id IN (\(databaseQuestionMarks(count: wrong.count)))",
                           arguments: StatementArguments(Array(wrong.keys)))
        }
        return wrong
    }

    /// Moves a damaged store at `path` (and its write-ahead log and shared-memory files) aside, to
    /// `<path>.corrupt-<UTC time>`, so that a new store can be made in its place while the old one
    /// is kept for inspection. Returns the new path of the database file.
    public static func moveAside(_ path: String, at date: Date = Date()) throws -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyyMMdd'T'HHmmss'Z'"
        let target = "\(path).corrupt-\(formatter.string(from: date))"
        // The log and shared memory first: a database file without them is still whole.
        for suffix in ["-wal", "-shm"] where FileManager.default.fileExists(atPath: path + suffix) {
            try FileManager.default.moveItem(atPath: path + suffix, toPath: target + suffix)
        }
        try FileManager.default.moveItem(atPath: path, toPath: target)
        return target
    }

    /// The stored cursors and state of `feed`, read without blocking the writer.
    public func load(feed: String) async throws -> PersistedFeed {
        try await read { db in try Self.persisted(db, feed: feed) }
    }

    /// Writes the page's new items, its cursors and end flag, and any retention cut in one transaction.
    public func commit(feed: String, direction: Direction, page: FeedPage, at date: Date) async throws -> CommitOutcome {
        let hook = commitHook, retention = retention[feed], tombstoneLimit = tombstoneLimit
        return try await writeTransaction { db in
            try Self.commit(db, feed: feed, direction: direction, page: page, at: date, retention: retention, tombstoneLimit: tombstoneLimit, hook: hook)
        }
    }

    /// Commits `pages` in one transaction: each as ``commit(feed:direction:page:at:)`` would, in
    /// order; all of them land with the cursors of the last, or none does.
    ///
    /// A backfill's pages share most of a transaction's cost (the feed row, the B-trees' edge
    /// pages written to the WAL again, the commit itself): four in one cost about a fifth less
    /// than four alone.
    public func commit(feed: String, direction: Direction, pages: [FeedPage], at date: Date) async throws -> [CommitOutcome] {
        let hook = commitHook, retention = retention[feed], tombstoneLimit = tombstoneLimit
        return try await writeTransaction { db in
            try pages.map { page in
                try Self.commit(db, feed: feed, direction: direction, page: page, at: date, retention: retention, tombstoneLimit: tombstoneLimit, hook: hook)
            }
        }
    }

    /// ``load(feed:)``, blocking: for small tools that have no async context.
    public func loadSynchronously(feed: String) throws -> PersistedFeed {
        try pool.read { db in try Self.persisted(db, feed: feed) }
    }

    /// The same commit, blocking: for small tools that have no async context. It runs on the
    /// calling thread, whose scheduling it leaves alone.
    public func commitSynchronously(feed: String, direction: Direction, page: FeedPage, at date: Date) throws -> CommitOutcome {
        let hook = commitHook, retention = retention[feed], checkpointer = checkpointer, tombstoneLimit = tombstoneLimit
        let outcome = try pool.writeWithoutTransaction { db in
            try Self.transaction(db, checkpointer: checkpointer) { db in
                try Self.commit(db, feed: feed, direction: direction, page: page, at: date, retention: retention, tombstoneLimit: tombstoneLimit, hook: hook)
            }
        }
        notifier.committed()
        return outcome
    }

    /// A commit's write transaction, on a thread scheduled as ``CommitScheduling`` says.
    ///
    /// - Throws: ``StoreFault`` in words (a full disk, a read-only filesystem, damaged pages).
    func writeTransaction<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws -> T {
        let scheduling = scheduling, checkpointer = checkpointer, faults = faults
        let result: T
        do {
            result = try await pool.writeWithoutTransaction { db in
                if scheduling == .throughput { WriterScheduling.makeThroughputWork() }
                faults.writeStarted.withLock { $0 = .now }
                defer { faults.writeStarted.withLock { $0 = nil } }
                return try Self.transaction(db, checkpointer: checkpointer, body)
            }
        } catch {
            let fault = fault(error)
            if let fault = fault as? StoreFault { faults.lastWrite.withLock { $0 = fault } }
            throw fault
        }
        faults.lastWrite.withLock { $0 = nil }
        notifier.committed()
        // Committed, but to the file that was opened: the path must still name it. One stat per
        // commit, and nothing while idle.
        if let identity, FileIdentity(path) != identity {
            faults.report(StoreFault(.replaced, path: path, detail: "the path names \(FileIdentity(path).map { "\($0)" } ?? "nothing"); opened as \(identity)"))
        }
        return result
    }

    /// How long the write running now has run; `nil` when none runs. A write that runs for long
    /// is a store that hangs (a frozen filesystem, a disk that stopped answering).
    public var writeRunningFor: Duration? {
        faults.writeStarted.withLock { $0 }.map { .now - $0 }
    }

    /// Why the last write failed (a commit, or the usage's record), while the store refuses
    /// them: `nil` once a write succeeds again, and before any failed.
    public var lastWriteFault: StoreFault? { faults.lastWrite.withLock { $0 } }

    /// A read that does not block the writer.
    ///
    /// - Throws: ``StoreFault`` in words (damaged pages, an I/O error).
    func read<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws -> T {
        do {
            return try await pool.read(body)
        } catch {
            throw fault(error)
        }
    }

    /// `error` as a ``StoreFault`` of this store; cancellation stays what it is. Damage is
    /// reported to ``whenUnusable(_:)``'s handler.
    private func fault(_ error: any Error) -> any Error {
        guard !(error is CancellationError) else { return error }
        let fault = StoreFault.classify(error, path: path)
        if fault.kind == .damaged { faults.report(fault) }
        return fault
    }

    /// Calls `handler`, once, when a commit or read of this store (or of a copy of it) finds its
    /// pages damaged, or a commit finds that the path no longer names the file it opened (deleted
    /// or replaced): at once when one did already. Such a store stays so, and its owner decides
    /// what to do (syncd stops; its next start opens the path anew, moving a damaged store aside).
    /// Replaces any handler set before.
    public func whenUnusable(_ handler: @escaping @Sendable (StoreFault) -> Void) {
        faults.setHandler(handler)
    }

    /// `body` in a transaction, as GRDB's `write` runs it; then the checkpointer hears how much
    /// of the log it wrote, whether it committed or not.
    private static func transaction<T>(_ db: Database, checkpointer: Checkpointer, _ body: (Database) throws -> T) throws -> T {
        defer { checkpointer.wrote(db) }
        var result: T?
        try db.inTransaction {
            result = try body(db)
            return .commit
        }
        return result!
    }

    /// Frees what SQLite holds between syncs: the page caches and prepared statements of the
    /// writer and of a reader; each refills as it is used again. The write-ahead log is copied
    /// into the database too, and its file emptied when nothing else uses the store.
    ///
    /// A backfill leaves each connection a page cache of up to 2 MiB; between refreshes minutes
    /// apart it only takes memory. The connections stay open: closing readers goes through a
    /// concurrent dispatch queue, whose first worker starts libdispatch's pool monitor, which
    /// then wakes the process every second for good.
    public func releaseMemory() async {
        // An idle moment: the log's last pages are copied back too, and waited for, so that what
        // the checkpoint touched is released with the rest.
        checkpointer.checkpointSoon()
        _ = try? await pool.writeWithoutTransaction { $0.releaseMemory() }
        _ = try? await pool.read { $0.releaseMemory() }
        await checkpointer.finished()
    }

    /// Checkpoints of the write-ahead log finished so far, by where they ran: for tests.
    package var checkpoints: Checkpointer.Counts { checkpointer.completed }

    /// Returns once the checkpoints started in the background so far have finished: for tests.
    package func checkpointsFinished() async { await checkpointer.finished() }

    /// Stored items of `feed`, newest first, as the server sent them; a negative offset or limit counts as 0.
    public func items(feed: String, offset: Int, limit: Int) async throws -> [FeedItem] {
        try await read { db in
            try Self.items(
                db, sql: "SELECT id, payload FROM item WHERE feed = ? ORDER BY position DESC LIMIT ? OFFSET ?",
                arguments: [feed, max(0, limit), max(0, offset)])
        }
    }

    /// The items a query of `id, payload` selects, in its order, each payload the bytes stored.
    ///
    /// Read from the statement's row, where GRDB's `Data` takes a value's bytes as they are
    /// (`sqlite3_column_blob`). A copied row would hold a TEXT payload as a `String`, made from a
    /// C string: cut at a NUL, bad UTF-8 repaired, and validated for nothing.
    static func items(_ db: Database, sql: String, arguments: StatementArguments) throws -> [FeedItem] {
        try Array(Row.fetchCursor(db, sql: sql, arguments: arguments).map { FeedItem(id: $0["id"], payload: $0["payload"]) })
    }

    /// The usage last recorded for `feed`, read without blocking the writer.
    public func meteredUsage(feed: String) async throws -> MeteredUsage? {
        try await read { db in
            try Row.fetchOne(db, sql: "SELECT day, bytes FROM metered_usage WHERE feed = ?", arguments: [feed])
                .map { MeteredUsage(day: $0["day"], bytes: $0["bytes"]) }
        }
    }

    /// Replaces `feed`'s recorded usage with `usage`.
    public func recordMeteredUsage(feed: String, _ usage: MeteredUsage) async throws {
        try await writeTransaction { db in
            try db.execute(
                sql: "INSERT INTO metered_usage (feed, day, bytes) VALUES (?, ?, ?) ON CONFLICT(feed) DO UPDATE SET day = excluded.day, bytes = excluded.bytes",
                arguments: [feed, usage.day, usage.bytes])
        }
    }

    /// What ``adopt(source:feed:)`` found.
    public enum SourceChange: Sendable, Hashable {
        /// The feed was stored from this source already (or is new).
        case unchanged
        /// A store written before sources were recorded: this one is recorded, nothing reset.
        case recorded
        /// The feed was stored from another source, whose cursors were dropped.
        case changed(from: String)
    }

    /// Records `source` (the configured URL) as where `feed`'s cursors come from.
    ///
    /// The configured URL is the authority: when the feed was stored from another source, its
    /// cursors, end flag and gap are dropped in one transaction, so the next load is a first load
    /// from the new source. Items are kept.
    public func adopt(source: String, feed: String) async throws -> SourceChange {
        try await pool.write { db in
            guard let row = try Row.fetchOne(db, sql: "SELECT source, has_loaded FROM feed WHERE id = ?", arguments: [feed]) else {
                try db.execute(sql: "INSERT INTO feed (id, source) VALUES (?, ?)", arguments: [feed, source])
                return .unchanged
            }
            let stored: String? = row["source"]
            if let stored, stored.isExactly(source) { return .unchanged }
            let loaded: Bool = row["has_loaded"]
            guard let stored, loaded else {
                try db.execute(sql: "UPDATE feed SET source = ? WHERE id = ?", arguments: [source, feed])
                return stored == nil && loaded ? .recorded : .unchanged
            }
            try db.execute(sql: """
                UPDATE feed SET source = ?, older_cursor = NULL, newer_cursor = NULL, end_reached = 0, has_loaded = 0,
                    gap_cursor = NULL, gap_floor = NULL, gap_pages = 0, gap_items = 0, revision = revision + 1
                WHERE id = ?
                """, arguments: [source, feed])
            return .changed(from: stored)
        }
    }

    /// Every feed stored, by identifier.
    public func feeds() async throws -> [String] {
        try await read { db in try String.fetchAll(db, sql: "SELECT id FROM feed ORDER BY id") }
    }

    // MARK: Transactions

    static func persisted(_ db: Database, feed: String) throws -> PersistedFeed {
        let select = try db.cachedStatement(sql: "SELECT * FROM feed WHERE id = ?")
        guard let row = try Row.fetchOne(select, arguments: [feed]) else {
            return .fresh
        }
        let count: Int = row["item_count"]
        let lastSync: Double? = row["last_sync_at"]
        let gapCursor: String? = row["gap_cursor"]
        return PersistedFeed(
            olderCursor: row["older_cursor"],
            newerCursor: row["newer_cursor"],
            endReached: row["end_reached"],
            hasLoaded: row["has_loaded"],
            itemCount: count,
            lastSyncAt: lastSync.map { Date(timeIntervalSince1970: $0) },
            revision: row["revision"],
            gap: gapCursor.map { FeedGap(cursor: $0, pages: row["gap_pages"], items: row["gap_items"]) }
        )
    }

    static func commit(
        _ db: Database,
        feed: String,
        direction: Direction,
        page: FeedPage,
        at date: Date,
        retention: Retention?,
        tombstoneLimit: Int,
        hook: (@Sendable (CommitStage) -> Void)?
    ) throws -> CommitOutcome {
        hook?(.began)
        // Every statement is a cached one: a commit runs the same few for each page, and
        // preparing them anew (parse, plan, authorizer) cost more than the work they do.
        try db.cachedStatement(sql: "INSERT INTO feed (id) VALUES (?) ON CONFLICT(id) DO NOTHING").execute(arguments: [feed])
        let current = try persisted(db, feed: feed)
        // Only an open gap has a floor.
        var floor = current.gap == nil ? nil : try Int.fetchOne(db.cachedStatement(sql: "SELECT gap_floor FROM feed WHERE id = ?"), arguments: [feed])
        let wasEmpty = current.itemCount == 0
        let gapPage = direction == .newer && current.gap != nil

        // Unix seconds, as the schema keeps every time (Schema.readable).
        let seconds = date.timeIntervalSince1970
        var placement = Placement(db: db, feed: feed, storedAt: seconds, numbers: try ChangeNumbers(db))
        var overlapped = false
        var reachedFloor = false
        var inserted = 0
        var updated = 0
        /// Places the page's new items around those stored already (anchors), in runs.
        func placeByAnchors() throws {
            // The page's items that are stored already, with their positions: they anchor the new
            // ones (a page shift brings stored items and new ones in one page).
            var (stored, replaced) = try storedPositions(db, feed: feed, items: page.items, numbers: &placement.numbers)
            updated += replaced
            var upper: Int?
            var run: [FeedItem] = []
            var inPage = DistinctIDs()
            func flush(lower: Int?) throws {
                defer { run = [] }
                guard !run.isEmpty else { return }
                let region: Placement.Region
                if let upper {
                    region = .below(upper)
                } else if let lower {
                    region = .above(lower)
                } else if direction == .older {
                    region = .bottom
                } else if gapPage, let floor {
                    region = .above(floor)
                } else {
                    region = .top(room: direction == .newer && !wasEmpty && page.continuation != nil)
                }
                let placed = try placement.place(run, in: region)
                inserted += placed.inserted
                if let shift = placed.shift {
                    // Positions at or above the shift point moved up: keep the anchors in step.
                    for (key, position) in stored where position >= shift.from { stored[key] = position + shift.by }
                    if let low = floor, low >= shift.from { floor = low + shift.by }
                    if let high = upper, high >= shift.from { upper = high + shift.by }
                }
            }
            for item in page.items {
                guard inPage.insert(item.id) else { continue }
                let key = ExactID(item.id)
                if let position = stored[key] {
                    overlapped = true
                    if gapPage, let floor, position <= floor { reachedFloor = true }
                    try flush(lower: position)
                    // Read again: making room for the run above may have moved this item.
                    upper = stored[key]
                } else {
                    run.append(item)
                }
            }
            try flush(lower: nil)
        }
        // An older page goes below everything stored unless some of its items are stored
        // already; while backfilling none are, so it is written without looking its ids up
        // first, and looked up only when the insert finds one of them.
        if direction == .older, let placed = try placeBelowEverything(page, placement: &placement, db: db) {
            inserted = placed
        } else {
            try placeByAnchors()
        }
        hook?(.itemsWritten)

        var cursors = FeedLog.cursors(after: page, direction: direction, current: current, feedWasEmpty: wasEmpty)
        let pruned = try retention.map { try prune(db, feed: feed, by: $0, at: date, numbers: &placement.numbers, tombstoneLimit: tombstoneLimit) } ?? 0
        if pruned > 0 {
            // The oldest items are gone on purpose: loading older pages again would only refill
            // what retention drops (and leave a hole where the cursor skips it), so the kept run
            // is the whole feed as far as syncing goes.
            cursors.older = nil
            cursors.endReached = true
        }
        // Tombstones in the page: those stored go now, in the page's transaction.
        let removed = try remove(db, feed: feed, ids: page.deletedIDs, numbers: &placement.numbers, tombstoneLimit: tombstoneLimit)
        let gap = FeedLog.gap(
            after: page, direction: direction, current: current, feedWasEmpty: wasEmpty,
            overlapped: overlapped, reachedFloor: reachedFloor, inserted: inserted)
        if gap.opened {
            floor = placement.topBefore
        } else if gap.gap == nil {
            floor = nil
        }
        try db.cachedStatement(sql: """
                UPDATE feed SET older_cursor = ?, newer_cursor = ?, end_reached = ?, has_loaded = 1,
                    last_sync_at = ?, revision = revision + 1, item_count = item_count + ?,
                    gap_cursor = ?, gap_floor = ?, gap_pages = ?, gap_items = ?
                WHERE id = ?
                """)
            .execute(arguments: [
                cursors.older, cursors.newer, cursors.endReached, seconds, inserted - pruned - removed,
                gap.gap?.cursor, floor, gap.gap?.pages ?? 0, gap.gap?.items ?? 0, feed,
            ])
        try placement.numbers.save(db)
        hook?(.cursorsWritten)
        // What the UPDATE just wrote, without reading it back. The time as a load reads it: a
        // Double of Unix seconds holds a date to ~0.24 µs, coarser than `Date` itself.
        let after = PersistedFeed(
            olderCursor: cursors.older, newerCursor: cursors.newer, endReached: cursors.endReached, hasLoaded: true,
            itemCount: current.itemCount + inserted - pruned - removed, lastSyncAt: Date(timeIntervalSince1970: seconds),
            revision: current.revision + 1, gap: gap.gap)
        return CommitOutcome(
            feed: after, pageItemCount: page.items.count, inserted: inserted, overlapped: overlapped, updated: updated, deleted: removed)
    }

    /// Writes `page`'s items (each id once) below everything stored, in a savepoint that is rolled
    /// back when any of them turns out to be stored already; returns how many went in, or `nil`
    /// after such a rollback.
    private static func placeBelowEverything(_ page: FeedPage, placement: inout Placement, db: Database) throws -> Int? {
        // A backfill's pages come in id order, which finds repeats without hashing every id.
        var seen = DistinctIDs()
        let items = page.items.filter { seen.insert($0.id) }
        guard !items.isEmpty else { return 0 }
        var inserted: Int?
        try db.inSavepoint {
            let placed = try placement.place(items, in: .bottom)
            guard placed.inserted == items.count else { return .rollback }
            inserted = placed.inserted
            return .commit
        }
        return inserted
    }

    /// Deletes the oldest items beyond `retention`'s limits, never the newest `minimum`; returns
    /// how many went.
    private static func prune(
        _ db: Database, feed: String, by retention: Retention, at date: Date, numbers: inout ChangeNumbers, tombstoneLimit: Int
    ) throws -> Int {
        // Positions below the cut go. The newest `minimum` items are above any cut.
        var cut: Int?
        if let keep = retention.keepItems {
            cut = try position(db, feed: feed, rank: max(keep, retention.minimum))
        }
        if let age = retention.keepAge {
            // In Unix seconds, as stored_at.
            let limit = date.timeIntervalSince1970 - Double(age.components.seconds) - Double(age.components.attoseconds) / 1e18
            // Up to the oldest item stored since the limit: only a tail of old items goes.
            var byAge = try Int.fetchOne(
                db.cachedStatement(sql: "SELECT MIN(position) FROM item WHERE feed = ? AND stored_at >= ?"), arguments: [feed, limit])
            if byAge == nil { byAge = Int.max }
            if retention.minimum > 0, let protected = try position(db, feed: feed, rank: retention.minimum) {
                byAge = min(byAge ?? Int.max, protected)
            } else if retention.minimum > 0 {
                byAge = nil  // fewer items than the minimum: nothing goes
            }
            if let byAge { cut = max(cut ?? Int.min, byAge) }
        }
        guard let cut else { return 0 }
        try recordEvictions(db, feed: feed, below: cut, numbers: &numbers, limit: tombstoneLimit)
        try db.cachedStatement(sql: "DELETE FROM item WHERE feed = ? AND position < ?").execute(arguments: [feed, cut])
        return db.changesCount
    }

    /// The position of the `rank`th newest item (1 is the newest); `nil` when there are fewer.
    private static func position(_ db: Database, feed: String, rank: Int) throws -> Int? {
        guard rank > 0 else { return nil }
        return try Int.fetchOne(
            db.cachedStatement(sql: "SELECT position FROM item WHERE feed = ? ORDER BY position DESC LIMIT 1 OFFSET ?"),
            arguments: [feed, rank - 1])
    }

    /// Positions of those of `items` that the feed stores, keyed by exact id (SQLite compares
    /// TEXT byte for byte, as the store's primary key does); each stored item the page brings
    /// changed is replaced in place (``FeedLog/replaces(_:stored:)``: a page from a stale cache
    /// changes nothing, an unchanged item is not written). Returns the positions and
    /// how many items were replaced.
    private static func storedPositions(
        _ db: Database, feed: String, items: [FeedItem], numbers: inout ChangeNumbers
    ) throws -> (positions: [ExactID: Int], updated: Int) {
        var result: [ExactID: Int] = [:]
        var updated = 0
        // One primary-key probe per id: as cheap as a chunked IN list, with one fixed statement.
        let lookup = try RawStatement(db, sql: "SELECT position, payload, version FROM item WHERE feed = ? AND id = ?")
        try lookup.bind(1, feed)
        var replace: RawStatement?
        for item in items {
            defer { lookup.reset() }
            try lookup.bind(2, item.id)
            guard try lookup.step() else { continue }
            result[ExactID(item.id)] = lookup.int(0)
            guard FeedLog.replaces(item, stored: FeedItem(id: item.id, payload: lookup.bytes(1), version: lookup.text(2))) else { continue }
            if replace == nil {
                replace = try RawStatement(db, sql: "UPDATE item SET payload = ?, version = ?, seq = ? WHERE feed = ? AND id = ?")
                try replace!.bind(4, feed)
            }
            defer { replace!.reset() }
            try replace!.bind(1, text: item.payload)
            try replace!.bind(2, item.version)
            try replace!.bind(3, Int(numbers.take(1)))
            try replace!.bind(5, item.id)
            _ = try replace!.step()
            updated += db.changesCount
        }
        return (result, updated)
    }



    /// Items written by one INSERT statement at most.
    ///
    /// One statement per item spends as much in starting and resetting the statement as in the
    /// row, so several rows go in one statement; how many matters little (BENCHMARKS.md, "Several
    /// rows per INSERT, journals in memory"). In this store it pays only with the journals in
    /// memory (`temp_store`, set when a connection opens): a many-row statement keeps a statement
    /// journal, and spilled to a file it costs more than it saves.
    /// 16 keeps the statement small and leaves at most 15 rows of a run to the one-row statement.
    static let rowsPerInsert = 16

    /// Parameters per row of ``insertSQL(rows:)``: feed, id, position, payload, stored_at, version,
    /// and the change log's number (as `seq` and `created_seq`).
    static let columnsPerRow = 7

    /// `rows` items; a row already stored under its (feed, id) is left alone. Parameters go
    /// ``columnsPerRow`` per row: feed, id, position, payload, stored_at, version, seq.
    static func insertSQL(rows: Int) -> String {
        "INSERT INTO item (feed, id, position, payload, stored_at, version, seq, created_seq) VALUES "
            + (1...rows).map { row in
                let seq = (row - 1) * columnsPerRow + 7
                return "(?, ?, ?, ?, ?, ?, ?\(seq), ?\(seq))"
            }.joined(separator: ", ")
            + " ON CONFLICT(feed, id) DO NOTHING"
    }

    static let insertOneSQL = insertSQL(rows: 1)
    static let insertManySQL = insertSQL(rows: rowsPerInsert)
}

/// A store's faults, shared by its copies: the last write's, and where the first that makes it
/// unusable goes (to the handler when one is set later).
private final class FaultRecord: Sendable {
    /// Why the last write failed; `nil` once one succeeds.
    let lastWrite = Mutex<StoreFault?>(nil)
    /// When the write running now started.
    let writeStarted = Mutex<ContinuousClock.Instant?>(nil)

    private struct State {
        var handler: (@Sendable (StoreFault) -> Void)?
        var fault: StoreFault?
        var told = false
    }

    private let state = Mutex(State())

    func report(_ fault: StoreFault) {
        let handler = state.withLock { state -> (@Sendable (StoreFault) -> Void)? in
            guard state.fault == nil else { return nil }
            state.fault = fault
            guard let handler = state.handler else { return nil }
            state.told = true
            return handler
        }
        handler?(fault)
    }

    func setHandler(_ handler: @escaping @Sendable (StoreFault) -> Void) {
        let pending = state.withLock { state -> StoreFault? in
            state.handler = handler
            guard let fault = state.fault, !state.told else { return nil }
            state.told = true
            return fault
        }
        if let pending { handler(pending) }
    }
}

/// A file's device and inode: what tells the file a path names now from the one opened there.
private struct FileIdentity: Sendable, Hashable, CustomStringConvertible {
    let device: UInt64
    let inode: UInt64

    /// The file at `path` now; `nil` when there is none.
    init?(_ path: String) {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        device = UInt64(info.st_dev)
        inode = UInt64(info.st_ino)
    }

    var description: String { "device \(device), inode \(inode)" }
}
