import CScheduling
import Foundation
import Synchronization
import SyncCore
import SyncStore
import Testing
import TestSupport

#if canImport(Glibc)
import Glibc
#endif

/// Threads that run commits become throughput work. The judge is the kernel's own account of the
/// thread (`/proc/thread-self/sched`, sched_getattr(2)), not what the code asked for. Each case
/// that changes a thread runs on a thread of its own, which ends with the case.
@Suite struct WriterSchedulingTests {
    /// The calling thread as `/proc/thread-self/sched` shows it.
    struct KernelView: Equatable, Sendable {
        /// `se.slice`, in nanoseconds.
        var slice: UInt64?
        /// `policy`: 0 SCHED_OTHER, 3 SCHED_BATCH, 6 SCHED_DEADLINE.
        var policy: Int?
        /// `prio`: 120 plus the nice value, for the fair policies.
        var prio: Int?

        static func current() -> KernelView {
            var view = KernelView()
            let text = (try? String(contentsOfFile: "/proc/thread-self/sched", encoding: .utf8)) ?? ""
            for line in text.split(separator: "\n") {
                let parts = line.split(separator: ":", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
                guard parts.count == 2 else { continue }
                switch parts[0] {
                case "se.slice": view.slice = UInt64(parts[1])
                case "policy": view.policy = Int(parts[1])
                case "prio": view.prio = Int(parts[1])
                default: break
                }
            }
            return view
        }
    }

    /// Custom slices for fair threads came with Linux 6.12; older kernels accept and ignore them.
    static let kernelHonoursSlices: Bool = {
        var name = utsname()
        uname(&name)
        let release = withUnsafeBytes(of: &name.release) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        let numbers = release.split(whereSeparator: { !$0.isNumber }).prefix(2).compactMap { Int($0) }
        guard numbers.count == 2 else { return false }
        return (numbers[0], numbers[1]) >= (6, 12)
    }()

    @Test func theThreadKeepsTheLongSliceAndItsNice() async throws {
        let (before, after) = try await onDedicatedThread {
            // A nice of its own, which the change of slice must keep.
            setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, 3)
            let before = KernelView.current()
            WriterScheduling.makeThroughputWork()
            return (before, KernelView.current())
        }
        print("WriterSchedulingTests: kernel slices honoured: \(Self.kernelHonoursSlices); before \(before), after \(after)")
        #expect(before.slice != nil && before.prio == 123)
        #expect(after.slice == (Self.kernelHonoursSlices ? WriterScheduling.slice : before.slice))
        #expect(after.prio == 123 && after.policy == before.policy)
    }

    /// Under SCHED_DEADLINE the field that is a slice elsewhere is the thread's reserved runtime:
    /// it must stay what it was. Becoming a deadline thread needs CAP_SYS_NICE.
    @Test(.enabled(if: Privileges.rootTestsEnabled, "needs root (CAP_SYS_NICE) to make a SCHED_DEADLINE thread; run as root, or set CI=1 to make this a failure instead of a skip"))
    func aDeadlineThreadKeepsItsReservation() async throws {
        try Privileges.requireRoot()
        let (made, before, after) = try await onDedicatedThread {
            var deadline = syncd_sched_attr()
            deadline.sched_policy = 6  // SCHED_DEADLINE: 1 ms in every 100 ms
            deadline.sched_runtime = 1_000_000
            deadline.sched_deadline = 100_000_000
            deadline.sched_period = 100_000_000
            let made = syncd_sched_setattr(&deadline) == 0 ? 0 : errno
            let before = Self.deadlineRuntime()
            WriterScheduling.makeThroughputWork()
            return (made, before, Self.deadlineRuntime())
        }
        #expect(made == 0, "sched_setattr(SCHED_DEADLINE) failed with errno \(made)")
        #expect(before == 1_000_000)
        #expect(after == before)
    }

    /// The calling thread's reserved runtime, as sched_getattr(2) reports it (`/proc` shows only
    /// what is left of it in the current period).
    static func deadlineRuntime() -> UInt64? {
        var attr = syncd_sched_attr()
        guard syncd_sched_getattr(&attr) == 0, attr.sched_policy == 6 else { return nil }
        return attr.sched_runtime
    }

    /// The store's commits, on GRDB's writer thread: the commit hook reads the kernel's view from
    /// inside each transaction.
    @Test func aThroughputStoresCommitsRunWithTheLongSlice() async throws {
        let dir = try TemporaryDirectory()
        let seen = Mutex<[UInt64?]>([])
        let store = try SQLiteFeedStore(path: dir.file("slice.sqlite"), commitHook: { _ in
            seen.withLock { $0.append(KernelView.current().slice) }
        }, scheduling: .throughput)
        let page = FeedPage(items: [FeedItem(id: "a", payload: Data("{}".utf8))], olderCursor: "c1", newerCursor: "n")
        _ = try await store.commit(feed: "f", direction: .newer, page: page, at: Date())
        let older = FeedPage(items: [FeedItem(id: "b", payload: Data("{}".utf8))], olderCursor: nil, newerCursor: nil)
        _ = try await store.commit(feed: "f", direction: .older, pages: [older], at: Date())
        let slices = seen.withLock { $0 }
        #expect(slices.count == 2 * SQLiteFeedStore.CommitStage.allCases.count)
        if Self.kernelHonoursSlices {
            #expect(slices.allSatisfy { $0 == WriterScheduling.slice })
        } else {
            #expect(slices.allSatisfy { $0 != nil })
        }
    }

    /// A blocking commit runs on the caller's thread, which it leaves as it was.
    @Test func aBlockingCommitLeavesTheCallersThreadAlone() async throws {
        let dir = try TemporaryDirectory()
        let store = try SQLiteFeedStore(path: dir.file("blocking.sqlite"), scheduling: .throughput)
        let page = FeedPage(items: [FeedItem(id: "a", payload: Data("{}".utf8))], olderCursor: nil, newerCursor: "n")
        let (before, after) = try await onDedicatedThread {
            let before = KernelView.current()
            _ = try store.commitSynchronously(feed: "f", direction: .newer, page: page, at: Date())
            return (before, KernelView.current())
        }
        #expect(after == before)
    }
}
