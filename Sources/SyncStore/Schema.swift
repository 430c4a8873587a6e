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
        return migrator
    }
}
