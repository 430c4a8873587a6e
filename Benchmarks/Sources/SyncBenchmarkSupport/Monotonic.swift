import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// CLOCK_MONOTONIC in nanoseconds: one time line shared by every process on the machine, so
/// instants stamped by helper processes in other network namespaces compare with ours.
public enum Monotonic {
    public static func now() -> Int64 {
        var spec = timespec()
        clock_gettime(CLOCK_MONOTONIC, &spec)
        return Int64(spec.tv_sec) * 1_000_000_000 + Int64(spec.tv_nsec)
    }

    /// A `ContinuousClock` instant of this process on the same time line (exact to the
    /// sub-microsecond gap between the two clock reads).
    public static func nanoseconds(of instant: ContinuousClock.Instant) -> Int64 {
        let mono = now()
        let age = ContinuousClock.now - instant
        return mono - age.nanoseconds
    }
}

extension Duration {
    public var nanoseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }

    public var seconds: Double { Double(nanoseconds) / 1e9 }
}

/// The nearest-rank `p` percentile (0 < p ≤ 1) of `sorted`, which is in ascending order; nil when
/// it is empty.
public func nearestRank<Value>(ofSorted sorted: [Value], _ p: Double) -> Value? {
    guard !sorted.isEmpty else { return nil }
    return sorted[min(sorted.count - 1, max(0, Int((p * Double(sorted.count)).rounded(.up)) - 1))]
}

/// The nearest-rank `p` percentile (0 < p ≤ 1) of `values`, 0 when there are none.
public func percentile(_ values: [Double], _ p: Double) -> Double {
    nearestRank(ofSorted: values.sorted(), p) ?? 0
}

/// Nearest-rank percentiles of nanosecond samples, printed in microseconds or milliseconds.
public struct NanoSummary: Sendable, CustomStringConvertible {
    public var count: Int
    public var p50: Int64
    public var p90: Int64
    public var p99: Int64
    public var max: Int64
    public var min: Int64

    public init(_ values: [Int64]) {
        let sorted = values.sorted()
        func rank(_ p: Double) -> Int64 { nearestRank(ofSorted: sorted, p) ?? 0 }
        count = sorted.count
        p50 = rank(0.5)
        p90 = rank(0.9)
        p99 = rank(0.99)
        max = sorted.last ?? 0
        min = sorted.first ?? 0
    }

    public var description: String {
        "n=\(count) p50=\(Self.format(p50)) p90=\(Self.format(p90)) p99=\(Self.format(p99)) max=\(Self.format(max))"
    }

    public static func format(_ ns: Int64) -> String {
        if abs(ns) >= 10_000_000 { return String(format: "%.1f ms", Double(ns) / 1e6) }
        if abs(ns) >= 1_000_000 { return String(format: "%.2f ms", Double(ns) / 1e6) }
        return String(format: "%.0f µs", Double(ns) / 1e3)
    }
}

/// A benchmark rig could not do what it was set up for.
public struct SyncRigError: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// Where the helper executables are: next to the running benchmark (Benchmarks/.build/release).
public enum HelperPaths {
    public static var directory: String {
        let exe = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        return URL(fileURLWithPath: exe).deletingLastPathComponent().path
    }

    /// A helper built by `scripts/bench` (`swift build -c release --package-path Benchmarks --product NAME`).
    ///
    /// `syncd` is the binary `SYNCD_BENCH_SYNCD` names when set: `scripts/bench` builds it as
    /// `scripts/install` does (the Swift runtime linked in), so the figures are the installed daemon's.
    public static func executable(_ name: String) throws -> String {
        if name == "syncd", let path = ProcessInfo.processInfo.environment["SYNCD_BENCH_SYNCD"], !path.isEmpty {
            guard FileManager.default.isExecutableFile(atPath: path) else { throw SyncRigError("SYNCD_BENCH_SYNCD names \(path), which is not an executable") }
            return path
        }
        let path = directory + "/" + name
        guard FileManager.default.isExecutableFile(atPath: path) else {
            throw SyncRigError("\(path) is missing: build it first (`swift build -c release --package-path Benchmarks --product \(name)`, which scripts/bench does)")
        }
        return path
    }

    /// The benchmarks package directory (Benchmarks/), for the Python baseline.
    public static var packageDirectory: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path
    }
}
