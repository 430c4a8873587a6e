import ArgumentParser
import ConnectivityPolicy
import Foundation
import NetlinkMonitor

/// `netmon`: the netlink monitor on its own: live verdicts and a dump. (The namespace demo and
/// the latency probe, which build namespaces and veth pairs, are development tooling:
/// `netprobe`.)
@main
struct Netmon: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "netmon",
        abstract: "Watch the kernel's links, addresses and routes and print connectivity verdicts.",
        subcommands: [Watch.self, Dump.self],
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
