import ArgumentParser
import ConnectivityPolicy
import Foundation
import NetlinkMonitor
import NetlinkProbe

/// `netprobe`: development tooling around the netlink monitor that builds network namespaces and
/// veth pairs (root only): a live demo of the verdicts, and the latency probe. Not shipped.
@main
struct Netprobe: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "netprobe",
        abstract: "Demonstrate and measure the netlink monitor in network namespaces of its own (needs root).",
        subcommands: [Demo.self, Latency.self]
    )
}

extension Netprobe {
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

func timestamp() -> String {
    Date().formatted(.iso8601.time(includingFractionalSeconds: true))
}
