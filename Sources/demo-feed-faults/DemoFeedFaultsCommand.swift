import ArgumentParser
import DemoFeedCLI
import DemoFeedServer
import SyncdTesting

/// `demo-feed-faults`: `demo-feed` with fault injection, for the tests. Not shipped.
@main
struct DemoFeedFaultsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo-feed-faults",
        abstract: "Serve generated, paginated feeds (Mastodon-style Link headers) with fault injection, for tests.",
        discussion: DemoFeedOptions.discussion + """

            Faults: fault=SPEC on a feed request for that request; POST /admin/faults?fault=SPEC&count=N[&feed=NAME][&kind=initial|older|newer], \
            GET /admin/faults, DELETE /admin/faults.
            Fault SPECs: status:CODE[:SECONDS|:date+SECONDS], latency:MS, stall, stall:body, malformed, \
            truncated, oversized[:BYTES][:chunked], reset, reset:body.
            """
    )

    @OptionGroup var options: DemoFeedOptions

    @Option(name: .customLong("fault"), help: "A random fault as SPEC=PROBABILITY, e.g. status:503=0.1, status:429:2=0.05, reset=0.02; repeatable.")
    var faults: [String] = []

    @Option(help: "Seed for random faults.")
    var seed: UInt64 = 1

    @Option(help: "Seconds a stalled request is held before its connection is closed.")
    var stallLimit = 300

    func run() async throws {
        let settings = try DemoFeedOptions.validated { () throws(DemoFeedServerError) in
            FaultInjector.Settings(
                randomFaults: try faults.map { spec throws(DemoFeedServerError) in try RandomFault(spec: spec) },
                seed: seed, stallLimit: .seconds(stallLimit))
        }
        try await options.serve { configuration throws(DemoFeedServerError) in
            try FaultInjector(feeds: configuration.feeds.map(\.name), settings: settings)
        }
    }
}
