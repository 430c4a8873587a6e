#if canImport(Glibc)
import Glibc
#endif
import Foundation
import NetlinkProbe
import Synchronization
import TestSupport

/// One run of an executable (syncd): TestSupport's ``ChildProcess``, which spawns it directly
/// (so the test holds its real pid and can SIGKILL it at any instant) and logs to a file.
typealias DaemonProcess = ChildProcess

/// A directory under the temporary directory, removed when released.
final class ScratchDirectory: Sendable {
    let path: String

    init(prefix: String) throws {
        let template = FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix).XXXXXX").path
        var bytes = Array(template.utf8CString)
        guard let made = mkdtemp(&bytes) else { throw CommandFailed(command: ["mkdtemp", template], status: -1, stderr: String(cString: strerror(errno))) }
        path = String(cString: made)
    }

    func file(_ name: String) -> String { "\(path)/\(name)" }

    deinit { try? FileManager.default.removeItem(atPath: path) }
}
