import Foundation
import GRDB
import SyncCore
@testable import SyncStore
import Testing
import TestSupport

/// A store written by an older syncd is upgraded in place when a newer one opens it.
///
/// The old file is written by Python's sqlite3 module, not by this package, with the schema
/// exactly as the first migrations made it (their steps, which the schema keeps) and GRDB's record
/// of those migrations.
@Suite struct MigrationTests {
    /// The versions as earlier syncds recorded them: written out here, since a version renamed in
    /// the schema would be one that no old store has taken.
    static let recorded: [Schema.Version: String] = [
        .v1: "v1: feeds and items", .v2: "v2: item count per feed", .v3: "v3: gaps and sources",
    ]

    /// The schema of a store an earlier syncd left once it had taken `versions`, with GRDB's record
    /// of them.
    static func oldSchema(_ versions: [Schema.Version]) -> String {
        """
        CREATE TABLE grdb_migrations (identifier TEXT NOT NULL PRIMARY KEY);
        INSERT INTO grdb_migrations VALUES \(versions.map { "('\(recorded[$0]!)')" }.joined(separator: ", "));
        \(versions.map(\.steps).joined(separator: "\n"))
        """
    }

    /// Has Python's sqlite3 write the store at `path` as an earlier syncd left it after `versions`
    /// (``oldSchema(_:)``, in WAL mode), with what `rows` (Python, `db` open) puts in it.
    static func pythonWritesStore(_ path: String, after versions: [Schema.Version], rows: String) async throws {
        try await runCommand(["python3", "-c", """
            import sqlite3, sys
            db = sqlite3.connect(sys.argv[1])
            db.executescript("PRAGMA journal_mode = WAL;" + sys.argv[2])
            \(rows)
            db.commit()
            """, path, oldSchema(versions)])
    }

    @Test func aVersionOneStoreIsUpgradedWithItsCountsAndKeepsSyncing() async throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("v1.sqlite")
        try await Self.pythonWritesStore(path, after: [.v1], rows: """
            db.executescript('''
                INSERT INTO feed VALUES ('home', 'c2', 'i0', 0, 1, 100.0, 2);
                INSERT INTO feed VALUES ('quiet', NULL, NULL, 1, 1, 100.0, 1);
            ''')
            for n in range(10):
                db.execute("INSERT INTO item VALUES ('home', ?, ?, ?)", ("i%d" % n, -n, b'{"n":%d}' % n))
            """)

        let store = try SQLiteFeedStore(path: path)
        let home = try await store.load(feed: "home")
        #expect(home == PersistedFeed(
            olderCursor: "c2", newerCursor: "i0", endReached: false, hasLoaded: true, itemCount: 10,
            lastSyncAt: Date(timeIntervalSinceReferenceDate: 100), revision: 2))
        #expect(try await store.load(feed: "quiet").itemCount == 0)
        #expect(try await store.items(feed: "home", offset: 0, limit: 3).map(\.id) == ["i0", "i1", "i2"])

        // The upgraded store goes on where the old one stopped, counting as it commits.
        let older = FeedPage(items: (10..<15).map { FeedItem(id: "i\($0)", payload: Data("{\"n\":\($0)}".utf8)) }, olderCursor: nil, newerCursor: nil)
        let outcome = try await store.commit(feed: "home", direction: .older, page: older, at: Date())
        #expect(outcome.inserted == 5)
        let after = try await store.load(feed: "home")
        #expect(after.itemCount == 15 && after.endReached && after.revision == 3)
        #expect(try await store.items(feed: "home", offset: 0, limit: 100).map(\.id) == (0..<15).map { "i\($0)" })

        // Opening again runs no migration twice.
        let reopened = try SQLiteFeedStore(path: path)
        #expect(try await reopened.load(feed: "home") == after)
    }

    /// The rebuild that puts both item indexes in backfill order loses nothing. Python's sqlite3
    /// writes a version-three store and is the judge afterwards: the same rows, a sound file, and
    /// indexes that really are descending.
    @Test func aVersionThreeStoreIsRebuiltInBackfillOrderWithEveryRow() async throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("v3.sqlite")
        try await Self.pythonWritesStore(path, after: [.v1, .v2, .v3], rows: """
            db.executescript('''
                INSERT INTO feed (id, older_cursor, has_loaded, revision, item_count, gap_cursor, gap_floor, gap_pages, gap_items, source)
                    VALUES ('home', 'c9', 1, 7, 600, 'g1', -1, 2, 40, 'http://feed.test/home'),
                           ('other', NULL, 1, 3, 500, NULL, NULL, 0, 0, 'http://feed.test/other');
            ''')
            # Ids that do not follow positions, and a hole in the positions, as a real store has.
            rows = [('home', 'h%04d' % ((n * 37) % 600), 5000 - n - (4096 if n >= 300 else 0), b'{"n":%d}' % n, 1000.0 + n) for n in range(600)]
            rows += [('other', 'o%d' % n, -n, bytes([n % 256]) * (n % 50), None) for n in range(500)]
            db.executemany("INSERT INTO item VALUES (?, ?, ?, ?, ?)", rows)
            """)
        // What the file holds, as one text, read by Python's sqlite3; times in Unix seconds,
        // which a version-three store keeps as seconds since 2001 (argv[2]: what to add).
        let dump = """
            import sqlite3, sys
            db = sqlite3.connect(sys.argv[1])
            for row in db.execute("SELECT feed, id, position, hex(payload), stored_at + ? FROM item ORDER BY feed, id", (float(sys.argv[2]),)): print(row)
            for row in db.execute("SELECT * FROM feed ORDER BY id"): print(row)
            """
        let before = try await runCommand(["python3", "-c", dump, path, "978307200"])

        let store = try SQLiteFeedStore(path: path)
        #expect(try await store.items(feed: "home", offset: 0, limit: 2).map(\.id) == ["h0000", "h0037"])
        #expect(try await store.items(feed: "other", after: "o497", limit: 5)?.map(\.id) == ["o498", "o499"])
        // Not UTF-8 at all (one byte repeated, 0xF2 and 0xF3), and given back as it was stored.
        #expect(try await store.items(feed: "other", after: "o497", limit: 5)?.map(\.payload) == [Data(repeating: 0xF2, count: 48), Data(repeating: 0xF3, count: 49)])

        #expect(try await runCommand(["python3", "-c", dump, path, "0"]) == before)
        let checks = try await runCommand(["python3", "-c", """
            import sqlite3, sys
            db = sqlite3.connect(sys.argv[1])
            print(db.execute("PRAGMA integrity_check").fetchall())
            print(db.execute("PRAGMA foreign_key_check").fetchall())
            primary = [i[1] for i in db.execute("PRAGMA index_list(item)") if i[3] == 'pk'][0]
            for index in (primary, 'item_order'):
                print([(c[2], c[3]) for c in db.execute("PRAGMA index_xinfo(%s)" % index) if c[5]])
            print(db.execute("SELECT identifier FROM grdb_migrations").fetchall())
            """, path])
        // Each merged migration records itself in place of the versions it merges.
        #expect(checks == """
            [('ok',)]
            []
            [('feed', 0), ('id', 1)]
            [('feed', 0), ('position', 1)]
            [('v4: indexes in backfill order',), ('v6: Unix times and text payloads',), ('v7: item versions',), ('v8: change log',)]

            """)
        #expect(try Self.schema(path) == (try Self.newStoreSchema()))
    }

    /// A new store is made in one step; a version-one store upgraded step by step ends with the
    /// same schema, as SQLite itself describes both (columns, types, defaults, keys, indexes and
    /// their order, foreign keys).
    @Test func aNewStoreHasTheSchemaThatTheUpgradesLeave() throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("v1.sqlite")
        try DatabaseQueue(path: path).write { db in try db.execute(sql: Self.oldSchema([.v1])) }
        _ = try SQLiteFeedStore(path: path)
        let upgraded = try Self.schema(path)
        #expect(upgraded == (try Self.newStoreSchema()))
        #expect(upgraded.contains("name:\"stored_at\" type:\"REAL\"") && upgraded.contains("name:\"source\" type:\"TEXT\""), "\(upgraded)")
    }

    /// A store the four migrations wrote one by one (an earlier syncd) opens as it is: the merged
    /// migration counts as taken and nothing is rebuilt (every table and index keeps its root
    /// page); GRDB only replaces the merged versions' records with the merged one's, the metered
    /// usage's table is added, the rows are converted in place (v6), the version column added (v7)
    /// and the change log made (v8).
    @Test func aStoreWithEveryVersionTakenOpensUnchanged() async throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("v4.sqlite")
        _ = try SQLiteFeedStore(path: path)
        try await DatabaseQueue(path: path).write { db in
            try db.execute(sql: """
                DELETE FROM grdb_migrations;
                DROP TABLE metered_usage;
                DROP INDEX item_changes;
                DROP TABLE item_tombstone;
                DROP TABLE store_info;
                ALTER TABLE item DROP COLUMN seq;
                ALTER TABLE item DROP COLUMN created_seq;
                ALTER TABLE item DROP COLUMN version;
                INSERT INTO grdb_migrations VALUES ('v1: feeds and items'), ('v2: item count per feed'), ('v3: gaps and sources'), ('v4: indexes in backfill order');
                INSERT INTO feed (id, has_loaded, item_count) VALUES ('home', 1, 1);
                INSERT INTO item (feed, id, position, payload, stored_at) VALUES ('home', 'i1', 7, x'7b7d', 5.0);
                """)
        }
        func state() throws -> (pages: [Row], identifiers: [String]) {
            try DatabaseQueue(path: path).read { db in
                (try Row.fetchAll(db, sql: "SELECT name, rootpage FROM sqlite_master ORDER BY name"),
                 try String.fetchAll(db, sql: "SELECT identifier FROM grdb_migrations ORDER BY identifier"))
            }
        }
        let before = try state()
        #expect(before.identifiers.count == 4)

        let store = try SQLiteFeedStore(path: path)
        #expect(try await store.items(feed: "home", offset: 0, limit: 5).map(\.id) == ["i1"])
        let after = try state()
        // The tables and indexes v5 and v8 add are new; every other keeps its root page.
        let added: Set<String> = ["metered_usage", "sqlite_autoindex_metered_usage_1", "item_changes", "item_tombstone", "item_tombstone_feed", "store_info"]
        #expect(after.pages.filter { !added.contains($0["name"]) } == before.pages)
        #expect(after.pages.contains { $0["name"] == "metered_usage" })
        #expect(after.identifiers == ["v4: indexes in backfill order", "v6: Unix times and text payloads", "v7: item versions", "v8: change log"])
    }

    /// A version-five store kept its times in seconds since 2001 and its payloads in BLOBs; opened
    /// by this syncd, every time is moved to the Unix epoch exactly as SQLite adds, every payload is
    /// TEXT with the same bytes, and SQLite's own date and JSON functions read them as they are. The
    /// store's API gives the same dates and bytes as before, and retention by age counts from the
    /// moved times.
    @Test func aVersionFiveStoreGetsUnixTimesAndTextPayloads() async throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("v5.sqlite")
        // Fractions that a Double holds exactly in either base (so the API's dates survive), and
        // one that it does not (so the shift must be SQLite's own addition, not a rounder one).
        let synced = 789_000_000.125, other = 700_000_000.3
        let items: [(id: String, position: Int, payload: Data, storedAt: Double?)] = [
            ("c", 3, Data(#"{"x":3,"content":"third"}"#.utf8), synced - 10_000.5),
            ("b", 2, Data(#"{"x":"é ☃ 🐘","content":"second"}"#.utf8), other),
            ("a", 1, Data(#"{"x":[1,2],"content":""}"#.utf8), nil),
        ]
        try await DatabaseQueue(path: path).write { db in
            try db.execute(sql: """
                CREATE TABLE grdb_migrations (identifier TEXT NOT NULL PRIMARY KEY);
                INSERT INTO grdb_migrations VALUES ('v4: indexes in backfill order'), ('v5: metered bytes per day');
                \(Schema.current)
                \(Schema.meteredUsage.steps)
                INSERT INTO metered_usage VALUES ('home', '2026-01-01', 4096);
                """)
            try db.execute(sql: "INSERT INTO feed (id, newer_cursor, has_loaded, last_sync_at, revision, item_count) VALUES ('home', 'n3', 1, ?, 4, 3), ('idle', NULL, 0, NULL, 0, 0)",
                           arguments: [synced])
            for item in items {
                try db.execute(sql: "INSERT INTO item VALUES ('home', ?, ?, ?, ?)", arguments: [item.id, item.position, item.payload, item.storedAt])
            }
            #expect(try String.fetchAll(db, sql: "SELECT DISTINCT typeof(payload) FROM item") == ["blob"])
        }

        let store = try SQLiteFeedStore(path: path)
        let epoch = 978_307_200.0
        try await DatabaseQueue(path: path).read { db in
            #expect(try Double?.fetchAll(db, sql: "SELECT last_sync_at FROM feed ORDER BY id") == [synced + epoch, nil])
            #expect(try String.fetchOne(db, sql: "SELECT strftime('%Y-%m-%d %H:%M:%f', last_sync_at, 'unixepoch') FROM feed WHERE id = 'home'") == "2026-01-01 22:40:00.125")
            let rows = try Row.fetchAll(db, sql: """
                SELECT id, stored_at, typeof(payload) AS type, CAST(payload AS BLOB) AS bytes, json_extract(payload, '$.x') AS x
                FROM item ORDER BY position DESC
                """)
            #expect(rows.map { $0["stored_at"] as Double? } == items.map { $0.storedAt.map { $0 + epoch } })
            #expect(rows.map { $0["type"] as String } == ["text", "text", "text"])
            #expect(rows.map { $0["bytes"] as Data } == items.map(\.payload))
            #expect(rows.map { $0["x"] as DatabaseValue } == [3.databaseValue, "é ☃ 🐘".databaseValue, "[1,2]".databaseValue])
            #expect(try String.fetchAll(db, sql: "SELECT identifier FROM grdb_migrations ORDER BY identifier")
                == ["v4: indexes in backfill order", "v6: Unix times and text payloads", "v7: item versions", "v8: change log"])
            #expect(try Row.fetchOne(db, sql: "SELECT day, bytes FROM metered_usage") == ["day": "2026-01-01", "bytes": 4096])
        }
        #expect(try await store.load(feed: "home").lastSyncAt == Date(timeIntervalSinceReferenceDate: synced))
        #expect(try await store.items(feed: "home", offset: 0, limit: 10) == items.map { FeedItem(id: $0.id, payload: $0.payload) })

        // Retention by age compares the moved times with a commit's: a day's limit keeps the new
        // page and drops the items stored more than a day before it.
        let later = try SQLiteFeedStore(path: path, retention: ["home": .init(keepAge: .seconds(86_400))])
        let now = Date(timeIntervalSinceReferenceDate: synced + 86_400)
        let outcome = try await later.commit(feed: "home", direction: .newer, page: page(["e", "d"], older: nil, newer: "n5"), at: now)
        #expect(try await later.items(feed: "home", offset: 0, limit: 10).map(\.id) == ["e", "d"])
        #expect(outcome.feed == (try await later.load(feed: "home")))
        #expect(try MigrationTests.schema(path) == (try Self.newStoreSchema()))
    }

    /// SQLite's own description of the schema of the store at `path` (its pragmas), as text; the
    /// primary key's index is named by its role, since a rebuilt table's keeps the old table's name.
    static func schema(_ path: String) throws -> String {
        try DatabaseQueue(path: path).read { db in
            var lines: [String] = []
            for table in ["feed", "item"] {
                lines.append("\(table) \(try Row.fetchAll(db, sql: "PRAGMA table_xinfo(\(table))"))")
                lines.append("\(try Row.fetchAll(db, sql: "PRAGMA foreign_key_list(\(table))"))")
                let indexes = try Row.fetchAll(db, sql: "PRAGMA index_list(\(table))").sorted { ($0["name"] as String) < ($1["name"] as String) }
                for index in indexes {
                    let name: String = index["name"], origin: String = index["origin"]
                    let columns = try Row.fetchAll(db, sql: "PRAGMA index_xinfo('\(name)')")
                    lines.append("\(origin == "pk" ? "primary key" : name) unique:\(index["unique"] as Int) origin:\(origin) \(columns)")
                }
            }
            return lines.joined(separator: "\n")
        }
    }

    /// ``schema(_:)`` of a store this build creates.
    static func newStoreSchema() throws -> String {
        let dir = try TemporaryDirectory()
        let path = dir.file("new.sqlite")
        _ = try SQLiteFeedStore(path: path)
        return try schema(path)
    }
}
