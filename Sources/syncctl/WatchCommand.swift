import ArgumentParser
import Foundation
import SyncControl
import SyncTerminal

struct WatchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "watch",
        abstract: "Show feeds live, as a client app would (Ctrl-C to quit)."
    )

    @OptionGroup var global: GlobalOptions

    @Option(help: "Print each status as one JSON document instead of drawing.")
    var json: JSONMode?

    @Argument(help: "Only show this feed.")
    var feed: String?

    func run() async throws {
        try await reportingErrors {
            let updates = global.client.watch()
            if let json {
                for try await status in updates { emit(try json.encode(status)) }
                return
            }
            let environment = ProcessInfo.processInfo.environment
            if isatty(STDOUT_FILENO) == 1 {
                try await LiveView(feed: feed, environment: environment).run(updates)
            } else {
                // Not a terminal: one still frame per change, no escape sequences.
                for try await status in updates {
                    let style = TerminalStyle.detect(environment: environment)
                    emit(WatchFrame.render(status, feed: feed, time: 0, now: Date(), style: style).joined(separator: "\n") + "\n")
                }
            }
        }
    }
}
