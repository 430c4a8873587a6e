import Foundation
import SyncDaemon
import Testing

/// What the documentation says is checked against what the code is, so neither drifts.
@Suite("documentation")
struct DocumentationTests {
    static let root = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    static func read(_ path: String) throws -> String {
        try String(contentsOf: root.appendingPathComponent(path), encoding: .utf8)
    }

    /// Each block of the README and the library guide marked `<!-- compiled: PATH -->` is that
    /// file of the Examples package, which scripts/test builds: the documented examples compile.
    @Test func documentedExamplesAreTheCompiledFiles() throws {
        let marker = try Regex(#"<!-- compiled: ([^ ]+) -->\n```swift\n((?:.|\n)*?)```\n"#)
        var compiled = 0
        for document in ["README.md", "docs/library.md"] {
            let text = try Self.read(document)
            let blocks = text.matches(of: marker)
            compiled += blocks.count
            for block in blocks {
                let path = String(try #require(block.output[1].substring))
                let code = String(try #require(block.output[2].substring))
                #expect(try Self.read(path) == code, "\(document) block for \(path) differs from the file")
            }
            // No Swift block that uses the library goes unchecked.
            let swiftBlocks = text.components(separatedBy: "```swift\n").count - 1
            let dependencyBlocks = text.components(separatedBy: "```swift\n.package(").count - 1
            #expect(swiftBlocks == blocks.count + dependencyBlocks, "\(document) has a Swift block that is not a compiled example")
        }
        #expect(compiled >= 3)
    }

    /// The product names the README lists exist, and the layout table names every module.
    @Test func readmeMatchesThePackage() throws {
        let readme = try Self.read("README.md")
        let manifest = try Self.read("Package.swift")
        // The manifest declares each library product from the `libraries` list, of its own name.
        let libraryList = try #require(manifest.firstMatch(of: try Regex(#"let libraries = \[([^\]]*)\]"#))?.output[1].substring)
        let products = Set(libraryList.matches(of: try Regex(#""([^"]+)""#)).compactMap { $0.output[1].substring.map(String.init) })
        let listed = readme.matches(of: try Regex(#"\.product\(name: "([^"]+)", package: "syncd"\)"#)).compactMap { $0.output[1].substring.map(String.init) }
        #expect(!listed.isEmpty)
        for name in listed { #expect(products.contains(name), "README lists a product \(name) that Package.swift does not declare") }

        // Targets of the package, minus the test-only ones (declared with a path under Tests/).
        var modules: Set<String> = []
        let declaration = try Regex(#"\.(?:target|executableTarget|systemLibrary|testTarget)\(\s*name:\s*"([^"]+)""#)
        let matches = manifest.matches(of: declaration)
        for (index, match) in matches.enumerated() {
            let end = index + 1 < matches.count ? matches[index + 1].range.lowerBound : manifest.endIndex
            let text = manifest[match.range.lowerBound..<end]
            if text.hasPrefix(".testTarget") || text.contains(#"path: "Tests/"#) { continue }
            modules.insert(String(try #require(match.output[1].substring)))
        }
        let layout = try #require(readme.range(of: "## Layout")).upperBound
        let table = readme[layout...].prefix { _ in true }.split(separator: "\n## ", maxSplits: 1).first ?? ""
        var documented: Set<String> = []
        for row in table.split(separator: "\n") where row.hasPrefix("| `") {
            let cell = row.dropFirst(2).prefix { $0 != "|" }
            for name in cell.matches(of: try Regex("`([^`]+)`")) {
                if let name = name.output[1].substring { documented.insert(String(name)) }
            }
        }
        #expect(modules == documented, "in Package.swift only: \(modules.subtracting(documented).sorted()); in README only: \(documented.subtracting(modules).sorted())")
    }

    /// The configuration example in DaemonConfiguration's documentation is a valid configuration.
    @Test func configurationExampleParses() throws {
        let source = try Self.read("Sources/SyncDaemon/DaemonConfiguration.swift")
        let start = try #require(source.range(of: "/// ```toml\n"))
        let end = try #require(source.range(of: "/// ```\n", range: start.upperBound..<source.endIndex))
        // Keys that name files are read while parsing; ConfigurationTests cover them with real
        // files. Everything else is parsed as written.
        let fileKeys = ["token_file", "ca_file", "client_certificate", "client_key"]
        let toml = source[start.upperBound..<end.lowerBound]
            .split(separator: "\n", omittingEmptySubsequences: false)
            .map { $0.hasPrefix("/// ") ? String($0.dropFirst(4)) : String($0.dropFirst(3)) }
            .filter { line in !fileKeys.contains { line.hasPrefix($0 + " ") } }
            .joined(separator: "\n")
        let configuration = try DaemonConfiguration.parse(toml, file: "DaemonConfiguration.swift")
        #expect(configuration.feeds.map(\.name) == ["home"])
        #expect(configuration.connectTimeout == .seconds(10))
    }
}
