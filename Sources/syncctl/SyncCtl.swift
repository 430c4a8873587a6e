import ArgumentParser
import Foundation
import SyncControl
import SyncTerminal

@main
struct SyncCtl: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "syncctl",
        abstract: "Query and control syncd, the connectivity-aware sync agent.",
        discussion: """
            Reading (status, watch, items, metrics) works for every user. refresh, older and retry \
            need root or membership in syncd's control group.
            """,
        version: SyncdInterface.version,
        subcommands: [StatusCommand.self, WatchCommand.self, RefreshCommand.self, OlderCommand.self, RetryCommand.self, SeenCommand.self, ItemsCommand.self, MetricsCommand.self],
        defaultSubcommand: StatusCommand.self
    )
}

/// Options every subcommand takes.
struct GlobalOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp("syncd's control socket (default: $SYNCD_SOCKET or \(SyncControlClient.defaultSocketPath)).", valueName: "path"))
    var socket: String?

    var client: SyncControlClient {
        SyncControlClient(socketPath: socket ?? SyncControlClient.socketPath())
    }
}

/// `--json=short|pretty`, as in systemd's tools.
enum JSONMode: String, ExpressibleByArgument, CaseIterable {
    case short, pretty

    func encode(_ value: some Encodable) throws -> String {
        let encoder = ControlJSON.makeEncoder()
        if self == .pretty { encoder.outputFormatting.insert(.prettyPrinted) }
        return Self.escapingTerminalControls(String(decoding: try encoder.encode(value), as: UTF8.self))
    }

    /// The encoder escapes C0 controls but leaves DEL, C1 controls and bidi overrides raw, and
    /// JSON on a terminal is still read by a terminal. Escaped, the text is the same JSON.
    static func escapingTerminalControls(_ json: String) -> String {
        var out = String.UnicodeScalarView()
        for scalar in json.unicodeScalars {
            if (0x7F...0x9F).contains(scalar.value) || TerminalText.isBidiControl(scalar) {
                out.append(contentsOf: String(format: "\\u%04x", scalar.value).unicodeScalars)
            } else {
                out.append(scalar)
            }
        }
        return String(out)
    }
}

/// Runs a command body, turning control errors into one clear line on stderr and exit 1.
func reportingErrors(_ body: () async throws -> Void) async throws {
    do {
        try await body()
    } catch let error as SyncControlError {
        FileHandle.standardError.write(Data("\(error)\n".utf8))
        throw ExitCode.failure
    }
}

/// Prints one line (or frame) and flushes it: on a pipe the C library buffers 4 KiB, and
/// `syncctl watch --json=short | consumer` would get lines late and split.
func emit(_ text: String, terminator: String = "\n") {
    print(text, terminator: terminator)
    fflush(nil)
}
