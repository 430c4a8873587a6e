import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A process's own figures, as Linux's `/proc` gives them.
public struct ProcessSample: Sendable, Hashable {
    /// User and system CPU time, in seconds.
    public var cpuSeconds: Double
    /// Resident memory, in bytes.
    public var residentBytes: Int
    /// Open file descriptors.
    public var openDescriptors: Int
    /// When the process started.
    public var startTime: Date

    /// A sample with these figures.
    public init(cpuSeconds: Double, residentBytes: Int, openDescriptors: Int, startTime: Date) {
        self.cpuSeconds = cpuSeconds
        self.residentBytes = residentBytes
        self.openDescriptors = openDescriptors
        self.startTime = startTime
    }

    /// This process now, from `/proc/self/stat` and `/proc/self/fd`; `nil` where `/proc` is not
    /// mounted or not Linux's.
    ///
    /// The boot time comes from the clocks (wall time less `CLOCK_BOOTTIME`), not `/proc/stat`,
    /// which the unit's `ProcSubset=pid` hides.
    public static func current() -> ProcessSample? {
        guard let stat = try? String(contentsOfFile: "/proc/self/stat", encoding: .utf8) else { return nil }
        var sinceBoot = timespec()
        guard clock_gettime(CLOCK_BOOTTIME, &sinceBoot) == 0 else { return nil }
        let bootTime = Date().timeIntervalSince1970 - (Double(sinceBoot.tv_sec) + Double(sinceBoot.tv_nsec) / 1e9)
        let descriptors = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count).map { $0 - 1 } ?? 0
        return parse(stat: stat, bootTime: bootTime, openDescriptors: descriptors,
                     ticksPerSecond: Double(sysconf(Int32(_SC_CLK_TCK))), pageSize: Int(sysconf(Int32(_SC_PAGESIZE))))
    }

    /// A sample from the text of `/proc/self/stat` and the boot time (Unix time).
    ///
    /// The command name (field 2) is in parentheses and may hold spaces and parentheses itself:
    /// fields are counted from after its last `)`. `openDescriptors` is passed through (listing
    /// `/proc/self/fd` opens one more, which the caller takes off).
    static func parse(stat: String, bootTime boot: Double, openDescriptors: Int, ticksPerSecond: Double, pageSize: Int) -> ProcessSample? {
        guard let close = stat.lastIndex(of: ")") else { return nil }
        // Field 3 (state) is the first after the name; utime is field 14, stime 15,
        // starttime 22, rss 24.
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        func field(_ number: Int) -> Double? {
            let index = number - 3
            return fields.indices.contains(index) ? Double(fields[index]) : nil
        }
        guard let user = field(14), let kernel = field(15), let start = field(22), let rss = field(24), ticksPerSecond > 0 else { return nil }
        return ProcessSample(
            cpuSeconds: (user + kernel) / ticksPerSecond,
            residentBytes: Int(rss) * pageSize,
            openDescriptors: openDescriptors,
            startTime: Date(timeIntervalSince1970: boot + start / ticksPerSecond))
    }
}
