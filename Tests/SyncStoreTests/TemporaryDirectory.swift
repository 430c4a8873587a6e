import Foundation

/// A fresh directory for one test's database files, removed when the test is done.
final class TemporaryDirectory: Sendable {
    let path: String

    init() throws {
        path = NSTemporaryDirectory() + "syncstore-\(getpid())-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    func file(_ name: String) -> String { path + "/" + name }

    deinit {
        try? FileManager.default.removeItem(atPath: path)
    }
}
