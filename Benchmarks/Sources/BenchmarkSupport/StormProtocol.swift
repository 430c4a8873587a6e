import ConnectivityPolicy
import NetlinkMonitor

/// The line protocol between the route-storm benchmark and `storm-monitor`.
///
/// The helper prints `ready` once its monitor has started, then answers each `check` line on
/// standard input with one JSON ``StormCheck`` line, and exits at end of input.
public enum StormProtocol {
    /// The host whose verdict the monitor publishes: reached through the default route, so the
    /// monitor asks the kernel for its route (RTM_GETROUTE) on every snapshot of the storm.
    public static let host = IPAddress("198.51.100.7")!

    public static let ready = "ready"
    public static let check = "check"
}

/// The helper's answer to `check`: whether its monitor agrees with a fresh kernel dump.
///
/// The comparison is made in the helper so that a 100,000-route snapshot never has to be
/// serialized: that would put the reporting cost into the CPU time being measured.
public struct StormCheck: Codable, Sendable {
    /// The monitor's snapshot equals a fresh dump of the kernel's tables.
    public var snapshotMatchesKernel: Bool
    /// The latest verdict the helper's verdict consumer received.
    public var verdict: Verdict?
    /// `ConnectivityPolicy.evaluate` of the fresh dump.
    public var kernelVerdict: Verdict
    public var monitorRoutes: Int
    public var kernelRoutes: Int
    public var statistics: NetlinkMonitor.Statistics

    public init(snapshotMatchesKernel: Bool, verdict: Verdict?, kernelVerdict: Verdict, monitorRoutes: Int, kernelRoutes: Int, statistics: NetlinkMonitor.Statistics) {
        self.snapshotMatchesKernel = snapshotMatchesKernel
        self.verdict = verdict
        self.kernelVerdict = kernelVerdict
        self.monitorRoutes = monitorRoutes
        self.kernelRoutes = kernelRoutes
        self.statistics = statistics
    }

    /// The monitor has caught up: same tables, same verdict as the kernel's.
    public var converged: Bool { snapshotMatchesKernel && verdict == kernelVerdict }
}
