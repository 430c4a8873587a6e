import ConnectivityPolicy
import Logging
import NetlinkMonitor
import ServiceLifecycle
import Synchronization

/// Keeps a ``NetlinkMonitor``'s link costs current (``NetlinkMonitor/setLinkCosts(_:)``), so
/// every verdict names the cost of the link it goes through.
///
/// Costs are decided by ``LinkCostRules`` from the configuration's globs, NetworkManager's
/// `Metered` (when a ``NetworkManagerWatcher`` is given), systemd-networkd's DHCP leases and the
/// links' hardware (``LinkCostFiles``). They are decided again when the monitor's links or their
/// addresses change (a new lease comes with an address) and when NetworkManager's values change;
/// nothing is polled.
public final class LinkCostTracker: Service, Sendable {
    /// Where costs come from besides NetworkManager.
    public struct Configuration: Sendable {
        /// The `[network] metered` / `unmetered` globs.
        public var globs: LinkCostGlobs
        /// Lease and sysfs locations.
        public var files: LinkCostFiles

        /// No globs, the system's own directories.
        public init(globs: LinkCostGlobs = .init(), files: LinkCostFiles = .init()) {
            self.globs = globs
            self.files = files
        }
    }

    private let monitor: NetlinkMonitor
    private let networkManager: NetworkManagerWatcher?
    private let configuration: Configuration
    private let logger: Logger
    private let decided = Mutex<[String: LinkCostAssessment]>([:])

    /// A tracker for `monitor`'s links; `networkManager` is followed when given (run it
    /// alongside: this tracker only reads its updates).
    public init(monitor: NetlinkMonitor, networkManager: NetworkManagerWatcher?, configuration: Configuration = .init(), logger: Logger = Logger(label: "syncd.linkcost")) {
        self.monitor = monitor
        self.networkManager = networkManager
        self.configuration = configuration
        self.logger = logger
    }

    /// The costs last handed to the monitor: links of known cost, by name.
    public var costs: [String: LinkCostAssessment] { decided.withLock { $0 } }

    /// Decides every link's cost now, from the monitor's current snapshot and what NetworkManager
    /// said so far, and hands it to the monitor, whose ``NetlinkMonitor/snapshot`` carries it
    /// when this returns. For a caller about to judge from that snapshot (a feed's first verdict)
    /// before ``run()`` has made its first decision.
    public func decideNow() {
        var hardware = HardwareFacts(files: configuration.files)
        decide(monitor.snapshot, devices: networkManager?.devices ?? [:], hardware: &hardware)
    }

    /// What a decision depends on, besides NetworkManager: the links and their addresses.
    private struct LinkKey: Hashable {
        var links: [LinkInfo]
        var addresses: [AddressInfo]
        init(_ snapshot: NetworkSnapshot) {
            links = snapshot.links
            addresses = snapshot.addresses
        }
    }

    private enum Input: Sendable {
        case snapshot(NetworkSnapshot)
        case networkManager([String: NetworkManagerMetered])
    }

    /// Follows the monitor and NetworkManager until cancelled or shut down gracefully.
    public func run() async throws {
        // The newest inputs win: only the latest snapshot and device map matter.
        let (inputs, continuation) = AsyncStream<Input>.makeStream(bufferingPolicy: .bufferingNewest(16))
        let snapshots = monitor.snapshots()
        let managerUpdates = networkManager?.updates()
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                for await snapshot in snapshots { continuation.yield(.snapshot(snapshot)) }
            }
            if let managerUpdates {
                group.addTask {
                    for await devices in managerUpdates { continuation.yield(.networkManager(devices)) }
                }
            }
            await withGracefulShutdownHandler {
                await follow(inputs)
            } onGracefulShutdown: {
                continuation.finish()
            }
            group.cancelAll()
        }
    }

    /// Decides on each change until `inputs` ends (shutdown) or the task is cancelled.
    private func follow(_ inputs: AsyncStream<Input>) async {
        var snapshot = monitor.snapshot
        var devices = networkManager?.devices ?? [:]
        var key = LinkKey(snapshot)
        var hardware = HardwareFacts(files: configuration.files)
        decide(snapshot, devices: devices, hardware: &hardware)
        for await input in inputs {
            switch input {
            case .snapshot(let next):
                snapshot = next
                let nextKey = LinkKey(next)
                guard nextKey != key else { continue }
                key = nextKey
            case .networkManager(let next):
                guard next != devices else { continue }
                devices = next
            }
            decide(snapshot, devices: devices, hardware: &hardware)
        }
    }

    /// Sysfs facts by link, read once per link: a link's hardware does not change while it keeps
    /// its index and name (a rename or a new link is read again).
    private struct HardwareFacts {
        private struct Identity: Hashable {
            var index: Int32
            var name: String
        }

        let files: LinkCostFiles
        private var known: [Identity: LinkFacts?] = [:]

        init(files: LinkCostFiles) { self.files = files }

        /// The facts of each of `links` by index, reading only links not seen before; links
        /// gone are forgotten.
        mutating func facts(of links: [LinkInfo]) -> [Int32: LinkFacts] {
            var current: [Identity: LinkFacts?] = [:]
            var byIndex: [Int32: LinkFacts] = [:]
            for link in links {
                let identity = Identity(index: link.index, name: link.name)
                let facts = known[identity] ?? files.facts(linkName: link.name)
                current[identity] = facts
                byIndex[link.index] = facts
            }
            known = current
            return byIndex
        }
    }

    /// Decides every link's cost and hands the known ones to the monitor; logs each change.
    private func decide(_ snapshot: NetworkSnapshot, devices: [String: NetworkManagerMetered], hardware: inout HardwareFacts) {
        var costs: [String: LinkCostAssessment] = [:]
        let facts = hardware.facts(of: snapshot.links)
        for link in snapshot.links where !link.isLoopback {
            let assessment = LinkCostRules.assess(
                link: link.name,
                globs: configuration.globs,
                networkManager: devices[link.name],
                leaseSaysMetered: configuration.files.leaseSaysMetered(linkIndex: link.index),
                facts: facts[link.index]
            )
            if assessment.cost != .unknown { costs[link.name] = assessment }
        }
        let previous = decided.withLock { state -> [String: LinkCostAssessment] in
            defer { state = costs }
            return state
        }
        guard previous != costs else { return }
        for (name, assessment) in costs.sorted(by: { $0.key < $1.key }) where previous[name] != assessment {
            logger.info("link cost", metadata: ["link": "\(name)", "cost": "\(assessment)"])
        }
        for name in previous.keys.sorted() where costs[name] == nil {
            logger.info("link cost", metadata: ["link": "\(name)", "cost": "unknown"])
        }
        monitor.setLinkCosts(costs)
    }
}
