import GRDB

/// The store's schema, as migrations: a database written by an older syncd is upgraded in place.
enum Schema {
    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1: feeds and items") { db in
            try db.execute(sql: """
                CREATE TABLE feed (
                    id TEXT PRIMARY KEY NOT NULL,
                    older_cursor TEXT,
                    newer_cursor TEXT,
                    end_reached INTEGER NOT NULL DEFAULT 0,
                    has_loaded INTEGER NOT NULL DEFAULT 0,
                    last_sync_at REAL,
                    revision INTEGER NOT NULL DEFAULT 0
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
                """)
        }
        // COUNT(*) walks every item of a feed: kept as a column, updated in the same transaction
        // as the page, a commit costs the same at 100 items as at 100,000.
        migrator.registerMigration("v2: item count per feed") { db in
            try db.execute(sql: """
                ALTER TABLE feed ADD COLUMN item_count INTEGER NOT NULL DEFAULT 0;
                UPDATE feed SET item_count = (SELECT COUNT(*) FROM item WHERE item.feed = feed.id);
                """)
        }
        // Page-numbered feeds: a refresh that got more new items than a page leaves a gap, kept
        // with the page that opened it so a restart continues it. gap_floor is the position of
        // the newest item stored before the gap opened: gap pages go just above it. source is
        // the configured URL the cursors belong to: a changed URL makes them meaningless.
        // stored_at (seconds since 2001, as last_sync_at) serves retention by age.
        migrator.registerMigration("v3: gaps and sources") { db in
            try db.execute(sql: """
                ALTER TABLE feed ADD COLUMN gap_cursor TEXT;
                ALTER TABLE feed ADD COLUMN gap_floor INTEGER;
                ALTER TABLE feed ADD COLUMN gap_pages INTEGER NOT NULL DEFAULT 0;
                ALTER TABLE feed ADD COLUMN gap_items INTEGER NOT NULL DEFAULT 0;
                ALTER TABLE feed ADD COLUMN source TEXT;
                -- When an item was stored, for retention by age; items stored before count from now.
                ALTER TABLE item ADD COLUMN stored_at REAL;
                UPDATE item SET stored_at = (julianday('now') - 2440587.5) * 86400.0 - 978307200.0;
                """)
        }
        // A backfill stores ever older items: ever lower positions and, in most feeds, ever
        // smaller ids (ids that grow with time: Mastodon's, GitHub's, sequence numbers). Kept in
        // descending order, both indexes take those at the right end of the feed's range, where
        // SQLite fills a page and starts the next instead of splitting pages in the middle: in
        // syncd's write pattern 100,000 items cost ~30% less CPU (BENCHMARKS.md). A primary key's
        // order cannot be altered, so the table is rebuilt, in this migration's transaction: once,
        // at the first start after the upgrade (1,000,000 items: ~3.6 s; syncd extends systemd's
        // start timeout while it lasts). The old table's pages stay in the file, free, and later
        // items reuse them.
        migrator.registerMigration("v4: indexes in backfill order") { db in
            try db.execute(sql: """
                CREATE TABLE item_v4 (
                    feed TEXT NOT NULL REFERENCES feed(id) ON DELETE CASCADE,
                    id TEXT NOT NULL,
                    position INTEGER NOT NULL,
                    payload BLOB NOT NULL,
                    stored_at REAL,
                    PRIMARY KEY (feed, id DESC)
                );
                INSERT INTO item_v4 (feed, id, position, payload, stored_at)
                    SELECT feed, id, position, payload, stored_at FROM item ORDER BY feed, position DESC;
                DROP TABLE item;
                ALTER TABLE item_v4 RENAME TO item;
                CREATE INDEX item_order ON item(feed, position DESC);
                """)
        }
        return migrator
    }
}
