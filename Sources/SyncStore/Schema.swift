import GRDB

/// The store's schema, as migrations: a database written by an older syncd is upgraded in place.
enum Schema {
    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        // One migration that merges the four versions (GRDB's merged migrations): a new store
        // gets the current schema in one transaction, a store written by an older syncd takes the
        // steps it has not taken, in order. Four transactions for a new store, each with its
        // foreign-key check, would be a noticeable share of every first start (BENCHMARKS.md,
        // "Start-up, and a slower machine").
        migrator.registerMigration(Version.v4.identifier, merging: Set(Version.allCases.dropLast().map(\.identifier))) { db, applied in
            if applied.isEmpty {
                try db.execute(sql: current)
                return
            }
            for version in Version.allCases where !applied.contains(version.identifier) {
                try db.execute(sql: version.steps)
            }
        }
        // After the merged versions. It merges v5, taken first by a store that lacks it, so a new
        // store still takes two transactions. Foreign keys stay on (immediate checks): neither
        // step alters a table and no key column changes, so SQLite checks nothing, where GRDB's
        // deferred check would read every item again after the update (about a tenth of the
        // migration's time).
        migrator.registerMigration(readable.identifier, foreignKeyChecks: .immediate, merging: [meteredUsage.identifier]) { db, applied in
            if !applied.contains(meteredUsage.identifier) {
                try db.execute(sql: meteredUsage.steps)
            }
            try db.execute(sql: readable.steps)
        }
        migrator.registerMigration(itemVersions.identifier, foreignKeyChecks: .immediate) { db in try db.execute(sql: itemVersions.steps) }
        migrator.registerMigration(changeLog.identifier, foreignKeyChecks: .immediate) { db in try db.execute(sql: changeLog.steps) }
        return migrator
    }

    /// Times in Unix seconds and payloads as TEXT, so that SQLite's own date and JSON functions
    /// read the store as it is: `datetime(stored_at, 'unixepoch')`, `json_extract(payload, …)`.
    ///
    /// Times were seconds since 2001 (Foundation's reference date), which `'unixepoch'` reads as
    /// 1995. They stay REAL, which keeps fractions of a second (a Double of Unix seconds now
    /// resolves 0.24 µs). Payloads were BLOBs, which SQLite 3.45 and later take for JSONB in the
    /// JSON functions. A CAST to TEXT keeps every byte (SQLite does not check UTF-8), and the
    /// store reads a payload's bytes as they are, whatever the value's type.
    ///
    /// The declared type stays BLOB, which keeps a TEXT value as it is: declaring TEXT would
    /// rebuild the item table (as v4 does) for a name in the schema only. One pass over every row,
    /// in place: each item's record is rewritten, no index (none holds either column), no B-tree
    /// restructured, so it costs less than a rebuild (BENCHMARKS.md, "Store schema v6"); the
    /// write-ahead log grows to the item table's size until the next commits copy it back.
    static let readable = (
        identifier: "v6: Unix times and text payloads",
        steps: """
            UPDATE feed SET last_sync_at = last_sync_at + 978307200.0;
            UPDATE item SET stored_at = stored_at + 978307200.0, payload = CAST(payload AS TEXT);
            """
    )

    /// Each item's version as the server states it (the feed descriptor's `updated`), so that an
    /// edit replaces a stored item only when it is newer; NULL for feeds without one. A column
    /// added with no default rewrites no row.
    static let itemVersions = (
        identifier: "v7: item versions",
        steps: "ALTER TABLE item ADD COLUMN version TEXT;"
    )

    /// The change log: every insert, update and removal of an item gets a per-store sequence
    /// number, in the transaction that makes it (``ItemChange``).
    ///
    /// - `item.seq`: the item's last insert or update; `created_seq` its insert. Items stored
    ///   before the log are numbered here, by rowid (one pass over every row, as v6's): every
    ///   item has its own number, so a replay is one keyset walk. Indexed by feed, so a client's
    ///   replay reads only what changed since its point.
    /// - `item_tombstone`: removed items (deleted by the server, evicted by retention), kept up to
    ///   a bound; `store_info.floor` is the newest sequence number dropped from it, below which
    ///   a replay cannot say what was removed.
    /// - `store_info`: `head`, the last number given; `epoch`, made at random here, so a client
    ///   holding a point of another store (a rebuilt one) is told to start again.
    static let changeLog = (
        identifier: "v8: change log",
        steps: """
            ALTER TABLE item ADD COLUMN seq INTEGER NOT NULL DEFAULT 0;
            ALTER TABLE item ADD COLUMN created_seq INTEGER NOT NULL DEFAULT 0;
            UPDATE item SET seq = rowid, created_seq = rowid;
            CREATE INDEX item_changes ON item(feed, seq);
            CREATE TABLE item_tombstone (
                seq INTEGER PRIMARY KEY,
                feed TEXT NOT NULL,
                id TEXT NOT NULL,
                kind TEXT NOT NULL
            );
            CREATE INDEX item_tombstone_feed ON item_tombstone(feed, seq);
            CREATE TABLE store_info (key TEXT PRIMARY KEY NOT NULL, value ANY) WITHOUT ROWID;
            INSERT INTO store_info (key, value) VALUES
                ('head', (SELECT coalesce(max(rowid), 0) FROM item)), ('floor', 0), ('epoch', lower(hex(randomblob(16))));
            """
    )

    /// Bytes each feed received over metered links on its latest day, which a restart keeps
    /// counting against the feed's budget. One row per feed, replaced as it grows; the day is
    /// `YYYY-MM-DD` in the budget's time zone.
    static let meteredUsage = (
        identifier: "v5: metered bytes per day",
        steps: """
            CREATE TABLE metered_usage (
                feed TEXT PRIMARY KEY NOT NULL,
                day TEXT NOT NULL,
                bytes INTEGER NOT NULL
            );
            """
    )

    /// The schema as it now is, for a new store: what the four versions' steps leave, columns in
    /// the same order. v5 adds a table and v6 changes values only, in the migration after.
    static let current = """
        CREATE TABLE feed (
            \(feedColumnsV1),
            item_count INTEGER NOT NULL DEFAULT 0,
            gap_cursor TEXT,
            gap_floor INTEGER,
            gap_pages INTEGER NOT NULL DEFAULT 0,
            gap_items INTEGER NOT NULL DEFAULT 0,
            source TEXT
        );
        \(itemTableV4(named: "item"))
        CREATE INDEX item_order ON item(feed, position DESC);
        """

    /// The feed table's columns as v1 made them. Written once for v1's step and the current
    /// schema, so that a new store and an upgraded one cannot come to differ in them.
    private static let feedColumnsV1 = """
        id TEXT PRIMARY KEY NOT NULL,
        older_cursor TEXT,
        newer_cursor TEXT,
        end_reached INTEGER NOT NULL DEFAULT 0,
        has_loaded INTEGER NOT NULL DEFAULT 0,
        last_sync_at REAL,
        revision INTEGER NOT NULL DEFAULT 0
        """

    /// The item table as v4 rebuilds it, under `name`: v4 builds it beside the old one, a new
    /// store builds it in place, and both must get the same columns and key.
    private static func itemTableV4(named name: String) -> String {
        """
        CREATE TABLE \(name) (
            feed TEXT NOT NULL REFERENCES feed(id) ON DELETE CASCADE,
            id TEXT NOT NULL,
            position INTEGER NOT NULL,
            payload BLOB NOT NULL,
            stored_at REAL,
            PRIMARY KEY (feed, id DESC)
        );
        """
    }

    /// The schema's versions, each the steps from the one before; a store records the versions
    /// it has taken in GRDB's `grdb_migrations` table.
    enum Version: CaseIterable {
        case v1, v2, v3, v4

        /// The name recorded for the version.
        var identifier: String {
            switch self {
            case .v1: "v1: feeds and items"
            case .v2: "v2: item count per feed"
            case .v3: "v3: gaps and sources"
            case .v4: "v4: indexes in backfill order"
            }
        }

        /// The statements that take a store from the version before to this one.
        var steps: String {
            switch self {
            case .v1:
                """
                CREATE TABLE feed (
                    \(Schema.feedColumnsV1)
                );
                -- position orders a feed: larger is newer. Older pages go below the minimum,
                -- newer pages above the maximum, so no existing row ever moves.
                CREATE TABLE item (
                    feed TEXT NOT NULL REFERENCES feed(id) ON DELETE CASCADE,
                    id TEXT NOT NULL,
                    position INTEGER NOT NULL,
                    payload BLOB NOT NULL,
                    PRIMARY KEY (feed, id)
                );
                CREATE INDEX item_order ON item(feed, position);
                """
            // COUNT(*) walks every item of a feed: kept as a column, updated in the same
            // transaction as the page, a commit costs the same at 100 items as at 100,000.
            case .v2:
                """
                ALTER TABLE feed ADD COLUMN item_count INTEGER NOT NULL DEFAULT 0;
                UPDATE feed SET item_count = (SELECT COUNT(*) FROM item WHERE item.feed = feed.id);
                """
            // Page-numbered feeds: a refresh that got more new items than a page leaves a gap,
            // kept with the page that opened it so a restart continues it. gap_floor is the
            // position of the newest item stored before the gap opened: gap pages go just above
            // it. source is the configured URL the cursors belong to: a changed URL makes them
            // meaningless. stored_at (seconds since 2001, as last_sync_at was until v6) serves
            // retention by age.
            case .v3:
                """
                ALTER TABLE feed ADD COLUMN gap_cursor TEXT;
                ALTER TABLE feed ADD COLUMN gap_floor INTEGER;
                ALTER TABLE feed ADD COLUMN gap_pages INTEGER NOT NULL DEFAULT 0;
                ALTER TABLE feed ADD COLUMN gap_items INTEGER NOT NULL DEFAULT 0;
                ALTER TABLE feed ADD COLUMN source TEXT;
                -- When an item was stored, for retention by age; items stored before count from now.
                ALTER TABLE item ADD COLUMN stored_at REAL;
                UPDATE item SET stored_at = (julianday('now') - 2440587.5) * 86400.0 - 978307200.0;
                """
            // A backfill stores ever older items: ever lower positions and, in most feeds, ever
            // smaller ids (ids that grow with time: Mastodon's, GitHub's, sequence numbers). Kept
            // in descending order, both indexes take those at the right end of the feed's range,
            // where SQLite fills a page and starts the next instead of splitting pages in the
            // middle, which costs the writer much less CPU in syncd's write pattern (BENCHMARKS.md,
            // "The B-trees' order"). A primary key's order cannot be altered, so the table is
            // rebuilt, in the migration's transaction: once, at the first start after the upgrade
            // (seconds for a large store; syncd extends systemd's start timeout while it lasts).
            // The old table's pages stay in the file, free, and later items reuse them.
            case .v4:
                """
                \(Schema.itemTableV4(named: "item_v4"))
                INSERT INTO item_v4 (feed, id, position, payload, stored_at)
                    SELECT feed, id, position, payload, stored_at FROM item ORDER BY feed, position DESC;
                DROP TABLE item;
                ALTER TABLE item_v4 RENAME TO item;
                CREATE INDEX item_order ON item(feed, position DESC);
                """
            }
        }
    }
}
