import Foundation
import GRDB

/// Why a store cannot be used, in words a person acts on: the condition, the path, and what to
/// do. SQLite's own text (and the statement that failed) stays in ``detail``, for a debug log.
public struct StoreFault: Error, Sendable, Hashable, CustomStringConvertible {
    /// The condition.
    public enum Kind: String, Sendable, Hashable, CaseIterable {
        /// The store's filesystem is mounted read-only.
        case readOnlyFilesystem = "read-only filesystem"
        /// The process may not create or write the store or its directory.
        case permissionDenied = "permission denied"
        /// The store's directory does not exist.
        case noDirectory = "no directory"
        /// The store's device is full.
        case diskFull = "disk full"
        /// The file is not an SQLite database at all (not a store syncd wrote).
        case notADatabase = "not a database"
        /// An SQLite database whose pages are damaged.
        case damaged
        /// The store's path was deleted or names another file than the one open: what is written
        /// goes to a file nobody will open again.
        case replaced
        /// The device fails to read or write.
        case ioError = "I/O error"
        /// Anything else.
        case other
    }

    /// The condition.
    public var kind: Kind
    /// The store's file.
    public var path: String
    /// What the underlying library said, for a debug log; never shown as the reason.
    public var detail: String

    /// A fault of `kind` at `path`.
    public init(_ kind: Kind, path: String, detail: String) {
        self.kind = kind
        self.path = path
        self.detail = detail
    }

    private var directory: String { (path as NSString).deletingLastPathComponent }

    /// The reason and the remedy, with the path.
    public var description: String {
        switch kind {
        case .readOnlyFilesystem:
            "the store \(path) is on a read-only filesystem: remount \(directory) read-write, or set [daemon] store to a writable place"
        case .permissionDenied:
            "permission denied writing the store \(path): let syncd's user write \(directory) (the unit's StateDirectory=syncd does), or set [daemon] store elsewhere"
        case .noDirectory:
            "the store's directory \(directory) does not exist: create it, or set [daemon] store elsewhere"
        case .diskFull:
            "no space left on the device of the store \(path): free some space there; syncd resumes from the stored cursors"
        case .notADatabase:
            "\(path) is not an SQLite database (nor a store syncd wrote): set [daemon] store to another path, or move the file away to start an empty store"
        case .damaged:
            "the store \(path) is damaged (its database pages are malformed)"
        case .replaced:
            "the store \(path) was deleted or replaced while open (what is stored now goes to the old file)"
        case .ioError:
            "the device of the store \(path) fails to read or write (I/O error): check it (dmesg, smartctl)"
        case .other:
            "cannot use the store \(path): \(detail)"
        }
    }

    /// `error`, thrown while opening or writing the store at `path`, as a fault: SQLite's result
    /// code, the errno below a file operation, and what the path's directory is (a read-only
    /// mount, one this process may not write) decide the kind.
    public static func classify(_ error: any Error, path: String) -> StoreFault {
        if let fault = error as? StoreFault { return fault }
        let detail = String(describing: error)
        let directory = (path as NSString).deletingLastPathComponent
        if let code = errno(of: error) {
            switch code {
            case EROFS: return StoreFault(.readOnlyFilesystem, path: path, detail: detail)
            case EACCES, EPERM: return StoreFault(readOnly(directory) ? .readOnlyFilesystem : .permissionDenied, path: path, detail: detail)
            case ENOSPC, EDQUOT: return StoreFault(.diskFull, path: path, detail: detail)
            case EIO: return StoreFault(.ioError, path: path, detail: detail)
            default: break
            }
        }
        guard let database = error as? DatabaseError else {
            return StoreFault(.other, path: path, detail: detail)
        }
        switch database.resultCode {
        case .SQLITE_FULL:
            return StoreFault(.diskFull, path: path, detail: detail)
        case .SQLITE_CORRUPT:
            return StoreFault(.damaged, path: path, detail: detail)
        case .SQLITE_NOTADB:
            // A damaged store still starts with SQLite's header; anything else was never one.
            return StoreFault(hasSQLiteHeader(path) ? .damaged : .notADatabase, path: path, detail: detail)
        case .SQLITE_READONLY, .SQLITE_CANTOPEN, .SQLITE_PERM, .SQLITE_AUTH, .SQLITE_IOERR:
            // SQLite opens read-only what it may not write and fails at the first write; the
            // directory tells why.
            if !FileManager.default.fileExists(atPath: directory) { return StoreFault(.noDirectory, path: path, detail: detail) }
            if readOnly(directory) { return StoreFault(.readOnlyFilesystem, path: path, detail: detail) }
            if !writable(directory) || (FileManager.default.fileExists(atPath: path) && !writable(path)) {
                return StoreFault(.permissionDenied, path: path, detail: detail)
            }
            if database.resultCode == .SQLITE_IOERR { return StoreFault(.ioError, path: path, detail: detail) }
            return StoreFault(.other, path: path, detail: detail)
        default:
            return StoreFault(.other, path: path, detail: detail)
        }
    }

    /// The POSIX error below a Foundation file error, if any.
    private static func errno(of error: any Error) -> Int32? {
        var current: NSError? = error as NSError
        while let nsError = current {
            if nsError.domain == NSPOSIXErrorDomain { return Int32(nsError.code) }
            current = nsError.userInfo[NSUnderlyingErrorKey] as? NSError
        }
        return nil
    }

    private static func readOnly(_ directory: String) -> Bool {
        var info = statvfs()
        return statvfs(directory, &info) == 0 && info.f_flag & UInt(ST_RDONLY) != 0
    }

    private static func writable(_ path: String) -> Bool {
        access(path, W_OK) == 0
    }

    /// Whether the file begins with "SQLite format 3" and its NUL, as every SQLite database does.
    static func hasSQLiteHeader(_ path: String) -> Bool {
        guard let handle = FileHandle(forReadingAtPath: path) else { return false }
        defer { try? handle.close() }
        let header = (try? handle.read(upToCount: 16)) ?? Data()
        return header == Data("SQLite format 3\0".utf8)
    }
}
