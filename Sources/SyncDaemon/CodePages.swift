#if canImport(Glibc)
import Glibc
#endif

/// The daemon's read-only file mappings (its own code, the shared libraries' code and constants),
/// handed back to the kernel once syncing has gone quiet.
///
/// A fault on a file mapping maps the 64 KiB around it ("fault-around"), so start-up and one sync
/// leave most of syncd's 12 MiB binary resident although an idle daemon runs a few pages of it.
/// `MADV_PAGEOUT` drops the pages no other process maps; whatever runs next faults its pages back
/// in, from the page cache while they are still there. This is the file half of what Android does
/// to its cached apps ("app compaction"). Pages another process maps too are left alone, as are
/// writable mappings (their written pages are anonymous memory, with nowhere to go without swap).
enum CodePages {
    /// One mapping line of `/proc/self/maps` chosen for a page-out.
    struct Mapping: Hashable, Sendable {
        /// First address.
        var start: UInt
        /// One past the last address.
        var end: UInt
    }

    /// The mappings of `maps` (the text of `/proc/PID/maps`) that are backed by a file and not
    /// writable.
    static func readOnlyFileMappings(in maps: Substring) -> [Mapping] {
        maps.split(separator: "\n").compactMap { line in
            // start-end perms offset dev inode [path]
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard fields.count >= 6, fields[5].first == "/", fields[4] != "0" else { return nil }
            let permissions = fields[1].utf8
            guard permissions.count >= 2, permissions[permissions.index(after: permissions.startIndex)] == UInt8(ascii: "-") else { return nil }
            let range = fields[0].split(separator: "-")
            guard range.count == 2, let start = UInt(range[0], radix: 16), let end = UInt(range[1], radix: 16), start < end else { return nil }
            return Mapping(start: start, end: end)
        }
    }

    /// Pages out this process's read-only file mappings; returns how many mappings the kernel
    /// took, or `nil` when `/proc/self/maps` could not be read.
    ///
    /// A kernel without `MADV_PAGEOUT` (before 5.4) refuses each call and nothing changes.
    @discardableResult
    static func pageOut() -> Int? {
        guard let maps = readProcFile("/proc/self/maps") else { return nil }
        var taken = 0
        for mapping in readOnlyFileMappings(in: maps[...]) {
            if madvise(UnsafeMutableRawPointer(bitPattern: mapping.start), Int(mapping.end - mapping.start), MADV_PAGEOUT) == 0 {
                taken += 1
            }
        }
        return taken
    }

    /// The whole of a `/proc` file. Its size reads as 0, so it is read to the end in chunks:
    /// Foundation's `String(contentsOfFile:)` returned only the first few mappings of a long
    /// `/proc/self/maps` (seen in the full test suite's process).
    static func readProcFile(_ path: String) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16_384)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count < 0, errno == EINTR { continue }
            guard count >= 0 else { return nil }
            if count == 0 { break }
            bytes.append(contentsOf: chunk[..<count])
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
