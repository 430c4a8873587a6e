import ArgumentParser
import Foundation
import SyncControl
import SyncTerminal

/// One of syncctl's feed actions (refresh, older, seen, retry): a single control call on one
/// feed or on all of them, reported as the feeds it was done for.
struct FeedAction: Sendable {
    /// The subcommand's name and help.
    var configuration: CommandConfiguration
    /// What was done, in the report: `Refresh: a, b`, `Nothing to refresh.`
    var verb: String
    /// The control call for `feed` (all feeds when nil); the feeds it acted on.
    var perform: @Sendable (_ client: SyncControlClient, _ feed: String?) async throws -> [String]

    static let refresh = FeedAction(
        configuration: CommandConfiguration(commandName: "refresh", abstract: "Load newer items now (needs root or the control group)."),
        verb: "refresh", perform: { try await $0.refresh(feed: $1) })
    static let older = FeedAction(
        configuration: CommandConfiguration(commandName: "older", abstract: "Load the next older page (needs root or the control group)."),
        verb: "load older", perform: { try await $0.loadOlder(feed: $1) })
    static let seen = FeedAction(
        configuration: CommandConfiguration(
            commandName: "seen", abstract: "Mark the newest items seen: the new-items notice clears (needs root or the control group)."),
        verb: "mark seen", perform: { try await $0.markSeen(feed: $1) })
    static let retry = FeedAction(
        configuration: CommandConfiguration(commandName: "retry", abstract: "Retry failed loads now (needs root or the control group)."),
        verb: "retry", perform: { try await $0.retry(feed: $1) })
}

/// What every feed action takes: the global options and an optional feed.
struct FeedActionArguments: ParsableArguments {
    @OptionGroup var global: GlobalOptions
    @Argument(help: "The feed; all feeds when omitted.") var feed: String?
}

/// The shared shape of refresh, older, seen and retry: a command is its ``FeedAction`` and its
/// arguments; it makes the call and prints a short report.
protocol FeedActionCommand: AsyncParsableCommand {
    static var action: FeedAction { get }
    var arguments: FeedActionArguments { get }
}

extension FeedActionCommand {
    static var configuration: CommandConfiguration { action.configuration }

    func run() async throws {
        let verb = Self.action.verb
        try await reportingErrors {
            let feeds = try await Self.action.perform(arguments.global.client, arguments.feed)
            if feeds.isEmpty {
                print("Nothing to \(verb).")
            } else {
                print("\(verb.prefix(1).uppercased() + verb.dropFirst()): \(feeds.joined(separator: ", "))")
            }
        }
    }
}

struct RefreshCommand: FeedActionCommand {
    static let action = FeedAction.refresh
    @OptionGroup var arguments: FeedActionArguments
}

struct OlderCommand: FeedActionCommand {
    static let action = FeedAction.older
    @OptionGroup var arguments: FeedActionArguments
}

struct SeenCommand: FeedActionCommand {
    static let action = FeedAction.seen
    @OptionGroup var arguments: FeedActionArguments
}

struct RetryCommand: FeedActionCommand {
    static let action = FeedAction.retry
    @OptionGroup var arguments: FeedActionArguments
}
