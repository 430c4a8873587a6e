import Foundation
import Glibc
import NetlinkProbe
@testable import SyncDaemon
import Testing

/// The idle page-out of read-only file mappings: which lines of `/proc/self/maps` it takes, and
/// that the kernel really drops the pages.
struct CodePagesTests {
    @Test func takesReadOnlyFileMappingsOnly() {
        let maps = """
            55d0a0000000-55d0a0400000 r--p 00000000 fe:00 1048601                    /usr/bin/syncd
            55d0a0400000-55d0a1200000 r-xp 00400000 fe:00 1048601                    /usr/bin/syncd
            55d0a1200000-55d0a1300000 rw-p 01200000 fe:00 1048601                    /usr/bin/syncd
            55d0a2000000-55d0a2100000 rw-p 00000000 00:00 0                          [heap]
            7f0000000000-7f0000100000 r-xp 00000000 fe:00 2097170                    /usr/lib/x86_64-linux-gnu/libc.so.6
            7f0000200000-7f0000300000 rw-s 00000000 00:01 4096                       /dev/shm/x (deleted)
            7f0000400000-7f0000500000 r--s 00000000 fe:00 3000                       /tmp/store.sqlite-shm
            7f0000600000-7f0000700000 r--p 00000000 00:00 0
            7ffd00000000-7ffd00002000 r-xp 00000000 00:00 0                          [vdso]
            garbage
            """
        let mappings = CodePages.readOnlyFileMappings(in: maps[...])
        #expect(mappings == [
            .init(start: 0x55d0_a000_0000, end: 0x55d0_a040_0000),
            .init(start: 0x55d0_a040_0000, end: 0x55d0_a120_0000),
            .init(start: 0x7f00_0000_0000, end: 0x7f00_0010_0000),
            .init(start: 0x7f00_0040_0000, end: 0x7f00_0050_0000),
        ])
    }

    /// This process's maps list a file mapped read-only and leave out the same file mapped writable.
    @Test func findsThisProcessMappings() throws {
        let file = try TemporaryFile(size: 1 << 16)
        let readOnly = try file.map(protection: PROT_READ)
        defer { munmap(readOnly, file.size) }
        let writable = try file.map(protection: PROT_READ | PROT_WRITE)
        defer { munmap(writable, file.size) }
        let maps = try #require(CodePages.readProcFile("/proc/self/maps"))
        let mappings = CodePages.readOnlyFileMappings(in: maps[...])
        #expect(mappings.contains(.init(start: UInt(bitPattern: readOnly), end: UInt(bitPattern: readOnly) + UInt(file.size))))
        #expect(!mappings.contains { $0.start <= UInt(bitPattern: writable) && UInt(bitPattern: writable) < $0.end })
    }

    /// A file mapped and read, then paged out: the pages leave this process (the kernel's page
    /// map says so), and reading them again still gives the file's bytes.
    ///
    /// On one CPU, on a thread of its own: the kernel adds new pages to the LRU lists in per-CPU
    /// batches, and the page-out can take only pages already on a list; it empties the batch of
    /// the CPU it runs on, not another's. A thread moved to another CPU between writing the file
    /// and paging it out would leave some of its pages behind.
    @Test func pagedOutPagesLeaveAndComeBack() async throws {
        let pages = 256
        let seen = try await onDedicatedThread { () throws -> PageOutSeen in
            Self.stayOnOneCPU()
            let file = try TemporaryFile(size: pages * 4096)
            let base = try file.map(protection: PROT_READ)
            defer { munmap(base, file.size) }
            let mapped = base.assumingMemoryBound(to: UInt8.self)
            var sum = 0
            for offset in stride(from: 0, to: file.size, by: 4096) { sum &+= Int(mapped[offset]) }
            var seen = PageOutSeen()
            seen.residentAfterReading = Self.residentPages(base, file.size)
            seen.taken = CodePages.pageOut()
            seen.residentAfterPageOut = Self.residentPages(base, file.size)
            seen.sameBytes = (0..<file.size).allSatisfy { mapped[$0] == file.bytes[$0] }
            seen.residentAfterRereading = Self.residentPages(base, file.size)
            return seen
        }
        #expect(seen.residentAfterReading == pages)
        let taken = try #require(seen.taken)
        #expect(taken > 0)
        #expect(seen.residentAfterPageOut == 0)
        #expect(seen.sameBytes)
        #expect(seen.residentAfterRereading == pages)
    }

    /// What ``pagedOutPagesLeaveAndComeBack()`` saw on its thread, checked on the test's task
    /// (an expectation recorded on a thread of its own would not be the test's).
    struct PageOutSeen: Sendable {
        var residentAfterReading = -1
        var taken: Int?
        var residentAfterPageOut = -1
        var sameBytes = false
        var residentAfterRereading = -1
    }

    /// Binds the calling thread to the CPU it is on (`sched_setaffinity`, which Swift's Glibc
    /// module leaves out, so it is looked up at run time). Without it, or on failure, the thread
    /// stays free to move, as before.
    static func stayOnOneCPU() {
        typealias GetCPU = @convention(c) () -> Int32
        typealias SetAffinity = @convention(c) (pid_t, Int, UnsafeRawPointer) -> Int32
        let libc = UnsafeMutableRawPointer(bitPattern: 0)
        guard let getCPU = dlsym(libc, "sched_getcpu"), let setAffinity = dlsym(libc, "sched_setaffinity") else { return }
        let cpu = Int(unsafeBitCast(getCPU, to: GetCPU.self)())
        var set = cpu_set_t()
        guard cpu >= 0, cpu < MemoryLayout<cpu_set_t>.size * 8 else { return }
        withUnsafeMutableBytes(of: &set) { $0[cpu / 8] |= UInt8(1 << (cpu % 8)) }
        _ = withUnsafeBytes(of: &set) { unsafeBitCast(setAffinity, to: SetAffinity.self)(0, MemoryLayout<cpu_set_t>.size, $0.baseAddress!) }
    }

    /// A file of known bytes, removed at the end of the test.
    final class TemporaryFile {
        let path = NSTemporaryDirectory() + "code-pages-\(getpid())-\(Int.random(in: 0..<1_000_000))"
        let size: Int
        let bytes: [UInt8]
        let fd: Int32

        init(size: Int) throws {
            self.size = size
            bytes = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31) }
            try Data(bytes).write(to: URL(fileURLWithPath: path))
            fd = open(path, O_RDWR)
            guard fd >= 0 else { throw CommandFailed(command: ["open", path], status: errno, stderr: String(cString: strerror(errno))) }
            // Written back before it is used: the kernel pages out neither dirty pages nor pages
            // under writeback, and the flusher could start on these at any moment.
            fsync(fd)
        }

        deinit {
            close(fd)
            unlink(path)
        }

        /// The whole file, mapped private with `protection`.
        func map(protection: Int32) throws -> UnsafeMutableRawPointer {
            guard let base = mmap(nil, size, protection, MAP_PRIVATE, fd, 0), base != MAP_FAILED else {
                throw CommandFailed(command: ["mmap", path], status: errno, stderr: String(cString: strerror(errno)))
            }
            return base
        }
    }

    /// Pages of `[base, base + size)` present in this process, from `/proc/self/pagemap`.
    static func residentPages(_ base: UnsafeMutableRawPointer, _ size: Int) -> Int {
        let fd = open("/proc/self/pagemap", O_RDONLY)
        guard fd >= 0 else { return -1 }
        defer { close(fd) }
        var present = 0
        let first = Int(bitPattern: base) / 4096
        for page in first..<(first + size / 4096) {
            var entry: UInt64 = 0
            guard pread(fd, &entry, 8, off_t(page * 8)) == 8 else { return -1 }
            if entry >> 63 == 1 { present += 1 }
        }
        return present
    }
}
