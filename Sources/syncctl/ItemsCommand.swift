import ArgumentParser
import Foundation
import SyncControl

struct ItemsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "items", abstract: "List stored items of a feed, newest first.")

    @OptionGroup var global: GlobalOptions

    @Argument(help: "The feed.")
    var feed: String

    @Option(help: "Items per page.")
    var limit: Int?

    @Option(help: "Continue after this item id (the 'next' of the previous page).")
    var after: String?

    @Option(help: "Print JSON instead of the table.")
    var json: JSONMode?

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
