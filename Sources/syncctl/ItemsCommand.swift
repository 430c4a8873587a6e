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

    @Flag(help: "Print the feed's changes (inserted, updated, deleted, evicted, reset) as syncd commits them, after --since or from the start; one line each, flushed.")
    var follow = false

    @Option(help: "With --follow: continue after this point (the 'point' of a change printed before).")
    var since: String?

    func validate() throws {
        if let limit, !(1...Self.maxLimit).contains(limit) {
            throw ValidationError("--limit must be between 1 and \(Self.maxLimit), not \(limit).")
        }
        if since != nil && !follow { throw ValidationError("--since goes with --follow.") }
        if follow && (limit != nil || after != nil) { throw ValidationError("--follow prints changes, not pages: leave out --limit and --after.") }
    }

    func run() async throws {
        try await reportingErrors {
            if follow {
                try await printChanges()
                return
            }
            let page = try await global.client.items(feed: feed, limit: limit, after: after)
            if let json {
                print(try json.encode(page))
                return
            }
            let style = TerminalStyle.detect(environment: ProcessInfo.processInfo.environment)
            print(ItemsTable.render(page, feed: feed, style: style), terminator: "")
        }
    }

    /// One line per change, flushed as it comes: JSON objects with `--json`, else
    /// `KIND ID POINT  SUMMARY` with the summary cleaned for the terminal.
    private func printChanges() async throws {
        let style = TerminalStyle.detect(environment: ProcessInfo.processInfo.environment)
        for try await change in global.client.watchItems(feed: feed, since: since) {
            if json != nil {
                // One object per line whatever the mode: a stream is read line by line.
                emit(try JSONMode.short.encode(change))
            } else {
                let summary = change.payload.map { ItemSummary.summary(of: $0, fallback: change.id ?? "") } ?? ""
                let id = TerminalText.sanitize(change.id ?? "-")
                emit("\(change.kind.rawValue.padding(toLength: 8, withPad: " ", startingAt: 0)) \(id) \(change.point)  \(style.paint(TerminalText.sanitize(summary), .dim))")
            }
        }
    }
}
