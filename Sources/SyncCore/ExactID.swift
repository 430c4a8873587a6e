/// A string compared byte for byte (its UTF-8), for item ids and cursors.
///
/// Swift's `String ==` is canonical equivalence: `"café"` (NFC) equals `"cafe\u{301}"` (NFD).
/// Servers and SQLite (BINARY collation) treat those as two different ids, so anything that
/// de-duplicates ids goes through this key instead of `String`'s own `Hashable`.
public struct ExactID: Sendable, Hashable, CustomStringConvertible {
    /// The string, as given (never normalised).
    public let value: String

    /// Wraps `value` without normalising it.
    public init(_ value: String) {
        self.value = value
    }

    /// Equal when the UTF-8 bytes are.
    public static func == (lhs: ExactID, rhs: ExactID) -> Bool {
        lhs.value.isExactly(rhs.value)
    }

    /// Hashes the UTF-8 bytes, consistent with ``==``.
    public func hash(into hasher: inout Hasher) {
        var value = value
        value.withUTF8 { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
    }

    /// The string itself.
    public var description: String { value }
}

extension String {
    /// Whether both strings have the same UTF-8 bytes (not merely canonically equivalent).
    public func isExactly(_ other: String) -> Bool {
        let mine = utf8, theirs = other.utf8
        guard mine.count == theirs.count else { return false }
        // Sets of ids compare neighbours on every probe, and ids share long prefixes: compare
        // the contiguous bytes of native strings rather than walking two UTF-8 views.
        let contiguous = mine.withContiguousStorageIfAvailable { a in
            theirs.withContiguousStorageIfAvailable { b in a.elementsEqual(b) }
        }
        return (contiguous ?? nil) ?? mine.elementsEqual(theirs)
    }
}
