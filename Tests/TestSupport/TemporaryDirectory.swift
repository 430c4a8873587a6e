import Foundation
import NetlinkProbe

/// A temporary directory removed when released.
public final class TemporaryDirectory: Sendable {
    public let path: String

    public init(prefix: String = "syncd-test") throws {
        let template = FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix).XXXXXX").path
        var bytes = Array(template.utf8CString)
        guard let made = mkdtemp(&bytes) else { throw CommandFailed(command: ["mkdtemp"], status: errno, stderr: "cannot create a temporary directory") }
        path = String(cString: made)
    }

    public func file(_ name: String) -> String { "\(path)/\(name)" }

    deinit {
        try? FileManager.default.removeItem(atPath: path)
    }
}
