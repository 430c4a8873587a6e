import Foundation

/// What an SQLite store's database file holds without its write-ahead log: the file is copied
/// alone and opened by Python's sqlite3, an oracle that shares no code with the store. It holds
/// what checkpoints copied back, whatever the log still has.
public struct DatabaseFileAlone: Sendable, Equatable, CustomStringConvertible {
    /// Rows of the `item` table.
    public var items: Int
    /// SQLite's `PRAGMA integrity_check` of the copy: "ok" when sound.
    public var integrity: String

    /// Reads the database file at `path`, copied to `copy` first; `nil` when the file has no item
    /// table yet (everything is still in the log).
    public static func read(_ path: String, copyTo copy: String) async throws -> DatabaseFileAlone? {
        let output = try await runCommand(["python3", "-c", """
            import shutil, sqlite3, sys
            shutil.copyfile(sys.argv[1], sys.argv[2])
            db = sqlite3.connect(sys.argv[2])
            try:
                n = db.execute("SELECT COUNT(*) FROM item").fetchone()[0]
            except sqlite3.OperationalError:
                print("none")
            else:
                print(n, db.execute("PRAGMA integrity_check").fetchone()[0])
            """, path, copy])
        let fields = output.split(separator: " ").map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }
        guard fields.count == 2, let items = Int(fields[0]) else { return nil }
        return DatabaseFileAlone(items: items, integrity: fields[1])
    }

    public var description: String { "\(items) items, integrity \(integrity)" }
}
