import ArgumentParser
import Foundation
import SyncControl
import SyncTerminal

struct StatusCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Show connectivity and the state of every feed."
    )

    @OptionGroup var global: GlobalOptions

    @Option(help: "Print JSON instead of the table.")
    var json: JSONMode?

    @Argument(help: "Only show these feeds.")
    var feeds: [String] = []

    func run() async throws {
        try await reportingErrors {
            var status = try await global.client.status()
            let unknown = feeds.filter { status.feed(named: $0) == nil }
            if let name = unknown.first { throw SyncControlError.feedNotFound(name) }
            if let json {
                if !feeds.isEmpty { status.feeds = status.feeds.filter { feeds.contains($0.name) } }
                print(try json.encode(status))
                return
            }
            let style = TerminalStyle.detect(environment: ProcessInfo.processInfo.environment)
            print(StatusTable.render(status, feeds: feeds, now: Date(), style: style), terminator: "")
        }
    }
}
