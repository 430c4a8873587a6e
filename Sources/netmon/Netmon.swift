import ArgumentParser
import ConnectivityPolicy
import Foundation
import Logging
import NetlinkMonitor
import NetlinkProbe

/// `netmon`: the netlink monitor on its own: live verdicts, a dump, a self-contained demo, and
/// the latency probe.
@main
struct Netmon: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "netmon",
        abstract: "Watch the kernel's links, addresses and routes and print connectivity verdicts.",
        subcommands: [Watch.self, Dump.self, Demo.self, Latency.self],
        defaultSubcommand: Watch.self
    )
}

struct NamespaceOption: ParsableArguments {
    @Option(name: .customLong("netns"), help: "Watch this network namespace (a name under /var/run/netns or a path).")
    var namespace: String?

    var path: String? {
        namespace.map { $0.contains("/") ? $0 : "/var/run/netns/\($0)" }
    }
}

extension Netmon {
    struct Watch: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Print a line each time the verdict changes (Ctrl-C to stop).")

        @OptionGroup var namespace: NamespaceOption
        @Option(help: "Destination addresses (default: the internet, i.e. a route to a public address).")
        var destination: [String] = []
        @Option(help: "Seconds an online verdict must hold before it is published.")
        var settle: Double = Double(defaultSettleDelay.components.seconds)

        func run() async throws {
            let destination = try parseDestination(self.destination)
            let monitor = NetlinkMonitor(configuration: .init(networkNamespacePath: namespace.path))
            try await monitor.start()
            for await verdict in ConnectivityMonitor.verdicts(from: monitor, for: destination, settle: .milliseconds(Int(settle * 1000))) {
                print("\(timestamp()) \(verdict)")
            }
        }
    }

    struct Dump: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Print the kernel's links, addresses and routes as the monitor sees them, with the verdict.")

        @OptionGroup var namespace: NamespaceOption
        @Option(help: "Destination addresses (default: the internet).")
        var destination: [String] = []

        func run() async throws {
            let snapshot = try await NetlinkMonitor.dumpSnapshot(networkNamespacePath: namespace.path)
            for link in snapshot.links {
                print("link \(link.index) \(link.name) operstate=\(link.operState) carrier=\(link.hasCarrier)")
            }
            for address in snapshot.addresses {
                let name = snapshot.link(index: address.linkIndex)?.name ?? "\(address.linkIndex)"
                print("addr \(address.address)/\(address.prefixLength) dev \(name) scope=\(address.scope) usable=\(address.isUsable)")
            }
            for route in snapshot.routes where route.table == RouteInfo.mainTable {
                let hops = route.nextHops.map { hop in
                    (hop.gateway.map { "via \($0) " } ?? "") + "dev \(snapshot.link(index: hop.linkIndex)?.name ?? "?")" + (hop.isLinkDown ? " linkdown" : "")
                }.joined(separator: ", ")
                print("route \(route.destination) \(route.type) metric \(route.priority) \(hops)")
            }
            print("verdict: \(ConnectivityPolicy.evaluate(snapshot, for: try parseDestination(destination)))")
        }
    }

    struct Demo: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Build a demo namespace with a veth pair, change it step by step, and print the live verdicts (needs root)."
        )

        @Option(help: "Seconds an online verdict must hold before it is published.")
        var settle: Double = 0.5

        func run() async throws {
            let topology = try await VethTopology()
            let monitor = NetlinkMonitor(configuration: .init(networkNamespacePath: topology.client.path))
            try await monitor.start()
            // Released on return: a released monitor ends its thread.
            let settle = Duration.milliseconds(Int(self.settle * 1000))
            var verdicts = ConnectivityMonitor.verdicts(from: monitor, settle: settle).makeAsyncIterator()
            print("demo namespace \(topology.client.name): \(VethTopology.clientLink) \(VethTopology.clientAddress)/24, default via \(VethTopology.serverAddress)")

            func step(_ title: String, in namespace: NetworkNamespace? = nil, _ command: String..., expect: (Verdict) -> Bool) async throws {
                print("\n\(title)")
                if let namespace {
                    print("$ ip -n \(namespace.name) \(command.joined(separator: " "))")
                    try await namespace.ip(command)
                }
                let started = ContinuousClock.now
                while let verdict = await verdicts.next() {
                    print("  \(timestamp()) +\(DurationSummary.micro(ContinuousClock.now - started))  \(verdict)")
                    if expect(verdict) { return }
                }
                throw ValidationError("the verdict stream ended")
            }

            let (client, server) = (topology.client, topology.server)
            try await step("starting state") { $0.isOnline }
            try await step("peer down (carrier lost)", in: server, "link", "set", VethTopology.serverLink, "down") { $0 == .offline(.noCarrier) }
            try await step("peer up (carrier back)", in: server, "link", "set", VethTopology.serverLink, "up") { $0.isOnline }
            try await step("admin down", in: client, "link", "set", VethTopology.clientLink, "down") { $0 == .offline(.noCarrier) }
            try await step("admin up: the kernel flushed the default route without telling", in: client, "link", "set", VethTopology.clientLink, "up") { $0 == .offline(.noRoute) }
            try await step("default route back", in: client, "route", "add", "default", "via", VethTopology.serverAddress) { $0.isOnline }
            let stats = monitor.statistics
            print("\nmonitor: \(stats.snapshotsPublished) snapshots, \(stats.routeResyncs) route re-reads, \(stats.overflows) overflows")
        }
    }

    struct Latency: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Measure link down → offline verdict against a plain netlink socket seeing the same event (needs root)."
        )

        @Option(help: "Measured iterations.")
        var iterations = 200

        func run() async throws {
            let samples = try await LinkLatencyProbe.run(iterations: iterations)
            let raw = DurationSummary(samples.map(\.raw))
            let verdict = DurationSummary(samples.map(\.verdict))
            print("raw netlink notification:   \(raw)")
            print("monitor offline verdict:    \(verdict)")
            print("added by the monitor:       \(DurationSummary(samples.map(\.added)))")
            let ratio = Double(verdict.p99.components.attoseconds + verdict.p99.components.seconds * 1_000_000_000_000_000_000)
                / Double(max(1, raw.p99.components.attoseconds + raw.p99.components.seconds * 1_000_000_000_000_000_000))
            print("p99 ratio verdict/raw:      \(ratio.formatted(.number.precision(.fractionLength(2))))")
        }
    }
}

func parseDestination(_ values: [String]) throws -> Destination {
    if values.isEmpty { return .internet }
    return .addresses(try values.map { text in
        guard let address = IPAddress(text) else { throw ValidationError("not an IP address: \(text)") }
        return address
    })
}

func timestamp() -> String {
    Date().formatted(.iso8601.time(includingFractionalSeconds: true))
}
