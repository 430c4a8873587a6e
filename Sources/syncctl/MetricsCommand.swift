import ArgumentParser
import Foundation
import SyncControl
import SyncTerminal

struct MetricsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "metrics",
        abstract: "Print syncd's metrics in Prometheus's text format.",
        discussion: "The same text the [metrics] endpoint and textfile serve; open to every user who may read the status."
    )

    @OptionGroup var global: GlobalOptions

    func run() async throws {
        try await reportingErrors {
            let text = try await global.client.metrics()
            // Metric names and label values are syncd's own (feed names, reasons), but the text
            // came over a socket: a terminal sees no control characters from it.
            let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map { TerminalText.sanitize(String($0)) }
            emit(lines.joined(separator: "\n"), terminator: "")
        }
    }
}
