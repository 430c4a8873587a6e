import Foundation
import GRDB
import GRDBSQLite

/// A cached statement driven through SQLite's C API, for the statements a commit runs once per
/// item.
///
/// Binding through GRDB builds a `StatementArguments` of existentials for every execution; for a
/// page of small rows that cost more than SQLite's own work. Strings and blobs are bound as
/// copies (`SQLITE_TRANSIENT`), so nothing here outlives the Swift values it was given.
struct RawStatement {
    /// Kept so the cache's statement (and its handle) stays alive while it is used.
    private let statement: Statement
    private let db: Database

    init(_ db: Database, sql: String) throws {
        self.statement = try db.cachedStatement(sql: sql)
        self.db = db
    }

    private var handle: SQLiteStatement { statement.sqliteStatement }

    /// SQLite copies the bytes before the bind returns.
    private static let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

    func bind(_ index: Int32, _ value: String) throws {
        var value = value
        let code = value.withUTF8 { bytes -> Int32 in
            // An empty buffer may have no address, and SQLite binds a null pointer as NULL.
            guard let base = bytes.baseAddress, !bytes.isEmpty else {
                return sqlite3_bind_text(handle, index, "", 0, Self.transient)
            }
            return base.withMemoryRebound(to: CChar.self, capacity: bytes.count) { chars in
                sqlite3_bind_text(handle, index, chars, Int32(bytes.count), Self.transient)
            }
        }
        try check(code)
    }

    func bind(_ index: Int32, _ value: Int) throws {
        try check(sqlite3_bind_int64(handle, index, Int64(value)))
    }

    func bind(_ index: Int32, _ value: Double) throws {
        try check(sqlite3_bind_double(handle, index, value))
    }

    /// Binds `value`'s bytes as TEXT, as they are: SQLite takes them for UTF-8 without checking,
    /// and `sqlite3_column_blob` gives the same bytes back (GRDB's `Data` reads a column so).
    func bind(_ index: Int32, text value: Data) throws {
        let code = value.withUnsafeBytes { bytes -> Int32 in
            // Empty text, not NULL, for an empty payload: SQLite binds a null pointer as NULL.
            guard let base = bytes.baseAddress, !bytes.isEmpty else {
                return sqlite3_bind_text(handle, index, "", 0, Self.transient)
            }
            return sqlite3_bind_text(handle, index, base.assumingMemoryBound(to: CChar.self), Int32(bytes.count), Self.transient)
        }
        try check(code)
    }

    /// Runs the statement one step: `true` when it produced a row (read it with ``int(_:)``).
    func step() throws -> Bool {
        switch sqlite3_step(handle) {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        case let code: throw error(code)
        }
    }

    /// Binds `value` as TEXT, or NULL when `nil`.
    func bind(_ index: Int32, _ value: String?) throws {
        guard let value else { return try check(sqlite3_bind_null(handle, index)) }
        try bind(index, value)
    }

    /// Column `index` of the current row as its bytes (a TEXT or BLOB value as stored).
    func bytes(_ index: Int32) -> Data {
        let count = Int(sqlite3_column_bytes(handle, index))
        guard count > 0, let base = sqlite3_column_blob(handle, index) else { return Data() }
        return Data(bytes: base, count: count)
    }

    /// Column `index` of the current row as text; `nil` for NULL.
    func text(_ index: Int32) -> String? {
        guard sqlite3_column_type(handle, index) != SQLITE_NULL, let text = sqlite3_column_text(handle, index) else { return nil }
        return String(cString: text)
    }

    /// Column `index` of the current row, as an integer.
    func int(_ index: Int32) -> Int {
        Int(sqlite3_column_int64(handle, index))
    }

    /// Makes the statement ready to run again with new bindings (an error of the last step was
    /// already thrown by ``step()``).
    func reset() {
        sqlite3_reset(handle)
    }

    private func check(_ code: Int32) throws {
        guard code == SQLITE_OK else { throw error(code) }
    }

    private func error(_ code: Int32) -> DatabaseError {
        DatabaseError(resultCode: ResultCode(rawValue: code), message: db.lastErrorMessage, sql: statement.sql)
    }
}
