import ArgumentParser
import Foundation
import SyncControl
import SyncTerminal

/// The shared shape of refresh, older and retry: an optional feed, one call, a short report.
protocol FeedActionCommand: AsyncParsableCommand {
    var global: GlobalOptions { get }
    var feed: String? { get }
    var verb: String { get }
    func perform(_ client: SyncControlClient) async throws -> [String]
}

extension FeedActionCommand {
    func run() async throws {
        try await reportingErrors {
            let feeds = try await perform(global.client)
            if feeds.isEmpty {
                print("Nothing to \(verb).")
            } else {
                print("\(verb.prefix(1).uppercased() + verb.dropFirst()): \(feeds.joined(separator: ", "))")
            }
        }
    }
}

struct RefreshCommand: FeedActionCommand {
    static let configuration = CommandConfiguration(commandName: "refresh", abstract: "Load newer items now (needs root or the control group).")
    @OptionGroup var global: GlobalOptions
    @Argument(help: "The feed; all feeds when omitted.") var feed: String?
    var verb: String { "refresh" }
    func perform(_ client: SyncControlClient) async throws -> [String] { try await client.refresh(feed: feed) }
}

struct OlderCommand: FeedActionCommand {
    static let configuration = CommandConfiguration(commandName: "older", abstract: "Load the next older page (needs root or the control group).")
    @OptionGroup var global: GlobalOptions
    @Argument(help: "The feed; all feeds when omitted.") var feed: String?
    var verb: String { "load older" }
    func perform(_ client: SyncControlClient) async throws -> [String] { try await client.loadOlder(feed: feed) }
}

struct SeenCommand: FeedActionCommand {
    static let configuration = CommandConfiguration(
        commandName: "seen", abstract: "Mark the newest items seen: the new-items notice clears (needs root or the control group).")
    @OptionGroup var global: GlobalOptions
    @Argument(help: "The feed; all feeds when omitted.") var feed: String?
    var verb: String { "mark seen" }
    func perform(_ client: SyncControlClient) async throws -> [String] { try await client.markSeen(feed: feed) }
}

struct RetryCommand: FeedActionCommand {
    static let configuration = CommandConfiguration(commandName: "retry", abstract: "Retry failed loads now (needs root or the control group).")
    @OptionGroup var global: GlobalOptions
    @Argument(help: "The feed; all feeds when omitted.") var feed: String?
    var verb: String { "retry" }
    func perform(_ client: SyncControlClient) async throws -> [String] { try await client.retry(feed: feed) }
}
