import ArgumentParser
import Foundation
import SyncControl
import SyncTerminal

struct ItemsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "items", abstract: "List stored items of a feed, newest first.")

    @OptionGroup var global: GlobalOptions

    @Argument(help: "The feed.")
    var feed: String

    /// Taken unconditionally so `--limit -3` is read as a (refused) number, not as an option.
    @Option(parsing: .unconditional, help: ArgumentHelp("Items per page, 1…\(Self.maxLimit) (default \(Self.defaultLimit)).", valueName: "n"))
    var limit: Int?

    static let maxLimit = SyncControlServer.Configuration.standardMaxItemsPerPage
    static let defaultLimit = SyncControlServer.Configuration.standardItemsPerPage

    @Option(help: "Continue after this item id (the 'next' of the previous page).")
    var after: String?

    @Option(help: "Print JSON instead of the table.")
    var json: JSONMode?

    func validate() throws {
        if let limit, !(1...Self.maxLimit).contains(limit) {
            throw ValidationError("--limit must be between 1 and \(Self.maxLimit), not \(limit).")
        }
    }

    func run() async throws {
        try await reportingErrors {
            let page = try await global.client.items(feed: feed, limit: limit, after: after)
            if let json {
                print(try json.encode(page))
                return
            }
            let style = TerminalStyle.detect(environment: ProcessInfo.processInfo.environment)
            print(ItemsTable.render(page, feed: feed, style: style), terminator: "")
        }
    }
}
