import Foundation
import NetlinkProbe

/// Locates executables built by this package (`syncd`, `demo-feed`, …) next to the test binary.
public enum BuildProducts {
    /// The build directory holding the test bundle and the package's executables.
    public static var directory: URL {
        if let override = ProcessInfo.processInfo.environment["SYNCD_BUILD_DIR"] {
            return URL(fileURLWithPath: override)
        }
        var url = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        // The test binary lives at <build>/<name>.xctest (a file on Linux, a bundle elsewhere).
        while url.pathComponents.count > 1 && url.pathExtension != "xctest" { url.deleteLastPathComponent() }
        return url.deletingLastPathComponent()
    }

    /// The path of an executable product; throws a clear error when it was not built.
    public static func path(_ name: String) throws -> String {
        let url = directory.appendingPathComponent(name)
        guard FileManager.default.isExecutableFile(atPath: url.path) else {
            throw MissingProduct(name: name, directory: directory.path)
        }
        return url.path
    }

    /// Copies the executable `name` to `destination` and returns `destination`.
    ///
    /// `cp` writes the copy, not this process: tests fork children concurrently, and a child
    /// forked while this process held the copy open for writing would keep that descriptor
    /// until its own exec, so executing the copy meanwhile fails with "Text file busy".
    public static func copy(_ name: String, to destination: String) async throws -> String {
        _ = try await runCommand(["cp", try path(name), destination])
        // Written back before it runs: the kernel cannot page out a file's pages while they are
        // dirty or being written, which a test that pages the binary out would otherwise meet.
        _ = try await runCommand(["sync", destination])
        return destination
    }

    public struct MissingProduct: Error, CustomStringConvertible {
        public var name: String
        public var directory: String
        public var description: String { "executable '\(name)' not found in \(directory): run `swift build` before `swift test`" }
    }
}
