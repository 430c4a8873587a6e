#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
@_spi(CustomByteBufferAllocator) import NIOCore

/// The allocator of a server connection's buffers (what it reads, the message it gathers, the
/// calls it cuts): a buffer of ``mappedThreshold`` bytes or more is a mapping of its own, which
/// goes back to the kernel when the buffer is freed; smaller ones come from `malloc`.
///
/// Why not `malloc` for all: the bytes a client makes the server hold are bounded by the user's
/// budget, but glibc keeps the large buffers it frees in its arenas and places the next ones
/// around what is still live, so the resident memory a flood leaves was up to twice what the
/// budget counted. A mapping costs the pages written to it, and nothing once unmapped; a
/// buffer's capacity past what was written (NIO grows by doubling) is never touched, so it costs
/// no memory either.
///
/// Each block starts with a 16-byte header giving the mapping's length (0 for a `malloc`
/// block), so that freeing knows how: NIO's deallocation is told only the pointer.
enum ConnectionBuffers {
    /// Buffers of at least this many bytes are mapped.
    static let mappedThreshold = 16 * 1024

    /// The allocator: set as a server connection channel's `ChannelOptions.allocator`.
    static let allocator = ByteBufferAllocator(
        allocate: { size in ConnectionBuffers.allocate(size) },
        reallocate: { pointer, oldSize, newSize in ConnectionBuffers.reallocate(pointer, oldSize: oldSize, newSize: newSize) },
        deallocate: { pointer in ConnectionBuffers.deallocate(pointer) },
        copy: { destination, source, count in destination.copyMemory(from: source, byteCount: count) }
    )

    /// Room for the length before the bytes, keeping them 16-byte aligned as `malloc`'s are.
    private static let headerSize = 16
    private static let pageSize = Int(sysconf(Int32(_SC_PAGESIZE)))

    /// Whether a block of `size` usable bytes is mapped.
    static func isMapped(_ size: Int) -> Bool { size >= mappedThreshold }

    /// A block of at least `size` usable bytes; `nil` only when the system has no memory left
    /// (NIO then stops the process, as it does when `malloc` fails).
    static func allocate(_ size: Int) -> UnsafeMutableRawPointer? {
        let block: UnsafeMutableRawPointer
        let mappedLength: Int
        if isMapped(size) {
            mappedLength = (size + headerSize + pageSize - 1) / pageSize * pageSize
            guard let mapping = mmap(nil, mappedLength, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0),
                  mapping != MAP_FAILED else { return nil }
            block = mapping
        } else {
            guard let memory = malloc(size + headerSize) else { return nil }
            block = memory
            mappedLength = 0
        }
        block.storeBytes(of: mappedLength, as: Int.self)
        return block + headerSize
    }

    /// Frees a block from ``allocate(_:)``.
    static func deallocate(_ pointer: UnsafeMutableRawPointer) {
        let block = pointer - headerSize
        let mappedLength = block.load(as: Int.self)
        if mappedLength > 0 {
            munmap(block, mappedLength)
        } else {
            free(block)
        }
    }

    /// A block of `newSize` usable bytes holding the first `min(oldSize, newSize)` of `pointer`'s.
    static func reallocate(_ pointer: UnsafeMutableRawPointer?, oldSize: Int, newSize: Int) -> UnsafeMutableRawPointer? {
        guard let pointer else { return allocate(newSize) }
        let block = pointer - headerSize
        if block.load(as: Int.self) == 0 && !isMapped(newSize) {
            return realloc(block, newSize + headerSize).map { $0 + headerSize }
        }
        guard let moved = allocate(newSize) else { return nil }
        moved.copyMemory(from: pointer, byteCount: min(oldSize, newSize))
        deallocate(pointer)
        return moved
    }
}
