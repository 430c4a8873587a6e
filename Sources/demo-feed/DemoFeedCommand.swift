import ArgumentParser
import DemoFeedCLI

/// `demo-feed`: serves generated Link-header feeds, for the demo (`syncd --demo`, `scripts/demo`).
@main
struct DemoFeedCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo-feed",
        abstract: "Serve generated, paginated feeds (Mastodon-style Link headers).",
        discussion: DemoFeedOptions.discussion
    )

    @OptionGroup var options: DemoFeedOptions

    func run() async throws {
        try await options.serve()
    }
}
