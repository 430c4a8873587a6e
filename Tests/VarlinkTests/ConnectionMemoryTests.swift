import Foundation
import Logging
import NIOCore
import Synchronization
import TestSupport
import Testing
@testable import Varlink

/// What a user's connections cost the server is bounded as memory, not only as bytes read: a
/// connection's large buffers go back to the kernel when freed (no allocator keeps them), and
/// each open connection of a non-root user is charged to that user's bound.
@Suite("Varlink connection memory", .timeLimit(.minutes(2)))
struct ConnectionMemoryTests {
    static let pageSize = Int(sysconf(Int32(_SC_PAGESIZE)))

    /// Whether the page holding `address` is mapped in this process (`mincore` fails with
    /// ENOMEM on a page that is not).
    static func isMapped(_ address: UInt) -> Bool {
        let page = address & ~UInt(pageSize - 1)
        var resident: UInt8 = 0
        return mincore(UnsafeMutableRawPointer(bitPattern: page), pageSize, &resident) == 0
    }

    /// A 64 KiB buffer, as a large call is read into, is a mapping of its own: once freed its pages
    /// are gone from the process. With `malloc` they stay in its heap, bytes and all. (Another
    /// thread may map something at the same place in between: then it does not hold our bytes.)
    @Test func aLargeBufferGoesBackToTheKernelWhenFreed() throws {
        let size = 64 * 1024
        var address: UInt = 0
        do {
            var buffer = ConnectionBuffers.allocator.buffer(capacity: size)
            buffer.writeRepeatingByte(0xA7, count: size)
            address = buffer.withUnsafeReadableBytes { UInt(bitPattern: $0.baseAddress) }
            #expect(Self.isMapped(address))
        }
        // A page in the middle: past any allocator's bookkeeping at the start of a free block.
        let middle = (address + UInt(size / 2)) & ~UInt(Self.pageSize - 1)
        if Self.isMapped(middle) {
            let page = UnsafeRawBufferPointer(start: UnsafeRawPointer(bitPattern: middle), count: Self.pageSize)
            #expect(!page.allSatisfy { $0 == 0xA7 }, "a freed 64 KiB buffer's page still holds its bytes: the allocator kept it")
        }
    }

    /// Buffers grow and shrink across the size at which they are mapped; the bytes stay.
    @Test(arguments: [(1000, 40_000), (40_000, 200_000), (200_000, 3_000), (20_000, 17_000)])
    func reallocationKeepsTheBytes(from oldSize: Int, to newSize: Int) throws {
        let block = try #require(ConnectionBuffers.allocate(oldSize))
        let bytes = block.bindMemory(to: UInt8.self, capacity: oldSize)
        for index in 0..<oldSize { bytes[index] = UInt8(truncatingIfNeeded: index &* 31) }
        let moved = try #require(ConnectionBuffers.reallocate(block, oldSize: oldSize, newSize: newSize))
        defer { ConnectionBuffers.deallocate(moved) }
        let kept = moved.bindMemory(to: UInt8.self, capacity: newSize)
        let wrong = (0..<min(oldSize, newSize)).first { kept[$0] != UInt8(truncatingIfNeeded: $0 &* 31) }
        #expect(wrong == nil, "byte \(wrong ?? 0) changed when \(oldSize) bytes were reallocated to \(newSize)")
        // The new size is usable to its end.
        kept[newSize - 1] = 1
    }

    /// A connection's charge counts against its user's bound like bytes held: reads that would
    /// pass the bound with it are withheld, and the user's waiting connections are told when the
    /// charged connection ends.
    @Test func aConnectionsChargeCountsAgainstItsUsersBound() throws {
        let logger = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })
        let budget = QueueBudget(bytesPerUser: 100_000)
        let charged = ConnectionLifecycle(logger: logger, budget: budget, uid: 1000, connectionCharge: 60_000)
        let other = ConnectionLifecycle(logger: logger, budget: budget, uid: 2000, connectionCharge: 60_000)
        let reader = ConnectionLifecycle(logger: logger, budget: budget, uid: 1000)
        let told = Flag()
        reader.onRoom { told.set() }
        #expect(budget.charges == 120_000)
        #expect(budget.total == 0, "a charge is not bytes read")

        #expect(reader.mayRead(30_000), "60,000 charged + 30,000 fit the user's 100,000")
        reader.read(bytes: 30_000)
        reader.readEnded()
        #expect(!reader.mayRead(16_384), "60,000 charged + 30,000 held + 16,384 pass the user's 100,000")
        #expect(!told.isSet)

        charged.releaseQueue()
        #expect(told.isSet, "the user's waiting connection is told when the charged one ends")
        #expect(budget.charges == 60_000, "only the other user's connection is still charged")
        #expect(reader.mayRead(16_384))
        charged.releaseQueue()
        #expect(budget.charges == 60_000, "a connection's charge is given back once")
        other.releaseQueue()
        reader.releaseQueue()
        #expect(budget.charges == 0)
        #expect(budget.total == 0)
    }

    /// The charge is the configured cost, or less when a user with every slot would otherwise
    /// have no room for one largest message and a read; root is not charged.
    @Test func theChargeLeavesRoomForOneLargestMessage() {
        var configuration = VarlinkServer.Configuration(
            listen: .path("/unused"), maxMessageSize: 64 * 1024, maxConnectionsPerUser: 16,
            maxQueuedBytesPerUser: 1024 * 1024, connectionCost: 36 * 1024)
        #expect(VarlinkServer.connectionCharge(for: 65534, configuration, readSize: 16 * 1024) == 36 * 1024)
        #expect(VarlinkServer.connectionCharge(for: 0, configuration, readSize: 16 * 1024) == 0)
        configuration.maxQueuedBytesPerUser = 128 * 1024
        let charge = VarlinkServer.connectionCharge(for: 65534, configuration, readSize: 16 * 1024)
        #expect(16 * charge + 64 * 1024 + 1 + 16 * 1024 <= 128 * 1024)
        #expect(charge > 0)
        configuration.maxQueuedBytesPerUser = 64 * 1024
        #expect(VarlinkServer.connectionCharge(for: 65534, configuration, readSize: 16 * 1024) == 0)
    }

    /// Through a real socket: `nobody`'s open connections are charged to it while they are open,
    /// root's are not, and every charge is given back when the connections close.
    @Test(.enabled(if: Privileges.rootTestsEnabled, Comment(rawValue: Privileges.skipReason)))
    func openConnectionsOfAUserAreCharged() async throws {
        let cost = 20 * 1024
        let fixture = try QueueBoundTests.Fixture(configuration: { path in
            VarlinkServer.Configuration(listen: .path(path), connectionCost: cost, floodError: QueueBoundTests.floodError)
        })
        let release = fixture.directory + "/release"
        let script = """
            import os, socket, sys, time
            sockets = []
            for _ in range(3):
                s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); sockets.append(s)
            deadline = time.time() + 60
            while not os.path.exists(sys.argv[2]) and time.time() < deadline: time.sleep(0.01)
            """
        try await fixture.run {
            // Root's connection is served (its answer came) before nobody's open.
            let root = try RawSocket(path: fixture.path)
            try root.send(QueueBoundTests.call("Echo"))
            #expect(root.receive(count: 1, timeout: hangGuard).count == 1, "no answer to root's call")
            let client = Task {
                try await runCommand(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", PermissionTests.python, "-c", script, fixture.path, release])
            }
            defer { client.cancel() }
            // Charged as each connection is set up, after its slot is taken.
            try await waitUntil("nobody's three connections are charged") { fixture.server.statistics.chargedBytes >= 3 * cost }
            #expect(fixture.server.statistics.chargedBytes == 3 * cost, "three of nobody's connections charged, root's not")
            #expect(FileManager.default.createFile(atPath: release, contents: nil), "cannot create \(release)")
            _ = try await client.value
            withExtendedLifetime(root) {}
            try await waitUntil("nobody's connections are closed") { fixture.server.connectionCount == 1 }
            #expect(fixture.server.statistics.chargedBytes == 0)
        }
    }
}

/// A flag set from any thread.
private final class Flag: Sendable {
    private let value = Mutex(false)
    func set() { value.withLock { $0 = true } }
    var isSet: Bool { value.withLock { $0 } }
}
