import ConnectivityPolicy

/// What a monitor's snapshot has that a kernel dump lacks, and the reverse, object by object,
/// for failure messages.
public struct SnapshotDiff: CustomStringConvertible {
    public var monitor: NetworkSnapshot
    public var kernel: NetworkSnapshot

    public init(monitor: NetworkSnapshot, kernel: NetworkSnapshot) {
        self.monitor = monitor
        self.kernel = kernel
    }

    public var description: String {
        if monitor == kernel { return "snapshots equal" }
        var parts: [String] = []
        func list<T: Hashable>(_ name: String, _ mine: [T], _ theirs: [T]) {
            let extra = Set(mine).subtracting(theirs), missing = Set(theirs).subtracting(mine)
            if !extra.isEmpty { parts.append("\(name) only in monitor: \(extra.map { "\($0)" }.sorted())") }
            if !missing.isEmpty { parts.append("\(name) only in kernel: \(missing.map { "\($0)" }.sorted())") }
        }
        list("links", monitor.links, kernel.links)
        list("addresses", monitor.addresses, kernel.addresses)
        list("routes", monitor.routes, kernel.routes)
        return parts.joined(separator: "\n  ")
    }
}
