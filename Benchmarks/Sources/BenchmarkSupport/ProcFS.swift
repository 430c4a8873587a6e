import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// What the kernel accounts for a process, read from `/proc/<pid>/…`.
///
/// Read from outside the process so the monitor and `ip monitor` are measured the same way,
/// and so reading costs the measured process nothing.
public struct ProcessUsage: Sendable, CustomStringConvertible {
    /// User CPU time of every thread, live or exited (`/proc/<pid>/stat` utime; clock ticks).
    public var user: Duration
    /// System CPU time (`stime`).
    public var system: Duration
    /// Resident set size now (`VmRSS`), bytes.
    public var residentBytes: Int
    /// Peak resident set size since the process started (`VmHWM`), bytes.
    public var peakResidentBytes: Int

    public var cpu: Duration { user + system }

    /// Reads the accounting of `pid`; throws when the process is gone.
    public init(pid: Int32) throws {
        let stat = try ProcFS.read("/proc/\(pid)/stat")
        // The command name (field 2) is in parentheses and may hold spaces: split after its `)`.
        guard let close = stat.lastIndex(of: ")") else { throw ProcFS.Unreadable(path: "/proc/\(pid)/stat") }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        // After the name: state is field 3, so utime (14) and stime (15) are at offsets 11 and 12.
        guard fields.count > 12, let utime = Int64(fields[11]), let stime = Int64(fields[12]) else {
            throw ProcFS.Unreadable(path: "/proc/\(pid)/stat")
        }
        let tick = Duration.seconds(1) / Int(sysconf(Int32(_SC_CLK_TCK)))
        user = tick * Int(utime)
        system = tick * Int(stime)
        let status = try ProcFS.read("/proc/\(pid)/status")
        residentBytes = ProcFS.kibibytes(status, field: "VmRSS:") * 1024
        peakResidentBytes = ProcFS.kibibytes(status, field: "VmHWM:") * 1024
    }

    /// On-CPU time of every live thread in nanoseconds (`/proc/<pid>/task/*/schedstat`).
    ///
    /// Finer than `stat`'s 10 ms ticks; used to tell when a process has gone idle.
    public static func onCPUNanoseconds(pid: Int32) -> UInt64 {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
        var total: UInt64 = 0
        for task in tasks {
            guard let text = try? ProcFS.read("/proc/\(pid)/task/\(task)/schedstat"),
                  let first = text.split(separator: " ").first, let value = UInt64(first)
            else { continue }
            total += value
        }
        return total
    }

    public var description: String {
        "cpu \(ProcFS.milliseconds(cpu)) ms (user \(ProcFS.milliseconds(user)), sys \(ProcFS.milliseconds(system))), rss \(residentBytes >> 10) KiB, peak rss \(peakResidentBytes >> 10) KiB"
    }
}

/// One netlink socket as `/proc/<pid>/net/netlink` lists it.
public struct NetlinkSocketInfo: Sendable, Hashable {
    /// Bytes queued and not yet read.
    public var receiveQueueBytes: Int
    /// Messages the kernel dropped because the receive buffer was full (ENOBUFS).
    public var drops: Int
    public var inode: UInt64
}

public enum ProcFS {
    public struct Unreadable: Error, CustomStringConvertible {
        public var path: String
        public var description: String { "cannot read \(path)" }
    }

    /// Reads a whole (small) proc file.
    public static func read(_ path: String) throws -> String {
        // FileManager/Data use the file size, which is 0 for proc files: read until EOF instead.
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw Unreadable(path: path) }
        defer { close(fd) }
        var result = [UInt8]()
        var buffer = [UInt8](repeating: 0, count: 16384)
        while true {
            let count = Glibc.read(fd, &buffer, buffer.count)
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { break }
            result.append(contentsOf: buffer[0..<count])
        }
        return String(decoding: result, as: UTF8.self)
    }

    static func kibibytes(_ status: String, field: String) -> Int {
        for line in status.split(separator: "\n") where line.hasPrefix(field) {
            return Int(line.dropFirst(field.count).split(whereSeparator: { $0 == " " || $0 == "\t" }).first ?? "") ?? 0
        }
        return 0
    }

    /// Inodes of the sockets `pid` holds open (`/proc/<pid>/fd/* -> socket:[N]`).
    public static func socketInodes(pid: Int32) -> Set<UInt64> {
        let fds = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd")) ?? []
        var inodes = Set<UInt64>()
        for fd in fds {
            guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/\(fd)"),
                  target.hasPrefix("socket:["), target.hasSuffix("]"),
                  let inode = UInt64(target.dropFirst(8).dropLast())
            else { continue }
            inodes.insert(inode)
        }
        return inodes
    }

    /// NETLINK_ROUTE sockets of the network namespace that `viewer` (a process or thread id) is in,
    /// keyed by inode. `/proc/<id>/net` shows the namespace of that task.
    public static func routeNetlinkSockets(viewer: Int32) -> [UInt64: NetlinkSocketInfo] {
        guard let text = try? read("/proc/\(viewer)/net/netlink") else { return [:] }
        var sockets: [UInt64: NetlinkSocketInfo] = [:]
        // sk Eth Pid Groups Rmem Wmem Dump Locks Drops Inode
        for line in text.split(separator: "\n").dropFirst() {
            let f = line.split(separator: " ")
            guard f.count >= 10, f[1] == "0", let rmem = Int(f[4]), let drops = Int(f[8]), let inode = UInt64(f[9]) else { continue }
            sockets[inode] = NetlinkSocketInfo(receiveQueueBytes: rmem, drops: drops, inode: inode)
        }
        return sockets
    }

    /// The NETLINK_ROUTE sockets that `owner` holds, as seen in `viewer`'s namespace.
    public static func netlinkSockets(of owner: Int32, viewer: Int32) -> [NetlinkSocketInfo] {
        let inodes = socketInodes(pid: owner)
        return routeNetlinkSockets(viewer: viewer).values.filter { inodes.contains($0.inode) }
    }

    public static func milliseconds(_ d: Duration) -> String {
        let (s, atto) = d.components
        return (Double(s) * 1e3 + Double(atto) / 1e15).formatted(.number.precision(.fractionLength(0)))
    }
}

extension Duration {
    /// Whole microseconds, for ordo-one custom metrics (which take integers).
    public var wholeMicroseconds: Int {
        let (s, atto) = components
        return Int(s) * 1_000_000 + Int(atto / 1_000_000_000_000)
    }

    /// Whole milliseconds.
    public var wholeMilliseconds: Int { wholeMicroseconds / 1000 }
}
