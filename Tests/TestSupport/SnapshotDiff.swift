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
        // The kernel's answers for tracked addresses and the links' costs are compared too; a
        // difference only there printed nothing before.
        for address in Set(monitor.kernelRoutes.keys).union(kernel.kernelRoutes.keys).sorted(by: { "\($0)" < "\($1)" })
        where monitor.kernelRoutes[address] != kernel.kernelRoutes[address] {
            parts.append("lookup of \(address): monitor \(monitor.kernelRoutes[address].map { "\($0)" } ?? "none"), kernel \(kernel.kernelRoutes[address].map { "\($0)" } ?? "none")")
        }
        if monitor.linkCosts != kernel.linkCosts {
            parts.append("link costs: monitor \(monitor.linkCosts), kernel \(kernel.linkCosts)")
        }
        if parts.isEmpty { parts.append("snapshots differ outside links, addresses, routes, lookups and costs") }
        return parts.joined(separator: "\n  ")
    }
}
