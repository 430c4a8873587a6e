import ArgumentParser
import Foundation
import SyncControl
import SyncCore
import SyncTerminal

struct StatusCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Show connectivity and the state of every feed.",
        discussion: """
            Exit status, for health checks: 0 every feed is healthy; 1 no status (syncd not \
            running, no permission); 2 a feed is stale (no page stored for longer than its \
            stale_after, or --stale-after); 3 a feed failed (a permanent error or the retry \
            budget spent). Only the feeds named count, when feeds are named.
            """
    )

    @OptionGroup var global: GlobalOptions

    @Option(help: "Print JSON instead of the table.")
    var json: JSONMode?

    @Option(name: .customLong("stale-after"), help: ArgumentHelp("Count a feed stale when no page was stored for this long (e.g. 30m, 1h), instead of its stale_after.", valueName: "duration"))
    var staleAfter: String?

    @Argument(help: "Only show these feeds.")
    var feeds: [String] = []

    func validate() throws {
        if let staleAfter, DurationParser.parse(staleAfter) ?? .zero <= .zero {
            throw ValidationError("--stale-after must be a duration above zero, like \"30m\" or \"1h\"")
        }
    }

    func run() async throws {
        try await reportingErrors {
            var status = try await global.client.status()
            let unknown = feeds.filter { status.feed(named: $0) == nil }
            if let name = unknown.first { throw SyncControlError.feedNotFound(name) }
            let now = Date()
            if !feeds.isEmpty { status.feeds = status.feeds.filter { feeds.contains($0.name) } }
            if let json {
                print(try json.encode(status))
            } else {
                let style = TerminalStyle.detect(environment: ProcessInfo.processInfo.environment)
                print(StatusTable.render(status, feeds: feeds, now: now, style: style), terminator: "")
            }
            let health = ControlHealth(status, now: now, staleAfter: staleAfter.flatMap(DurationParser.parse))
            if health.exitStatus != .healthy {
                fflush(nil)
                throw ExitCode(health.exitStatus.rawValue)
            }
        }
    }
}
