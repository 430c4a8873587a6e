import Foundation
import Synchronization

/// Tests that need root (network namespaces, veth pairs) run when root; without root they are
/// skipped with a reason, except under CI (`CI` set), where they run and fail loudly.
public enum Privileges {
    public static var isRoot: Bool { geteuid() == 0 }
    public static var isCI: Bool { ProcessInfo.processInfo.environment["CI"].map { !$0.isEmpty && $0 != "0" } ?? false }

    /// Whether root-only tests should be attempted: as root, or under CI (where they must not skip).
    public static var rootTestsEnabled: Bool { isRoot || isCI }

    public static let skipReason = "needs root (CAP_NET_ADMIN) for network namespaces and veth pairs; run as root, or set CI=1 to make this a failure instead of a skip"

    /// Throws unless running as root; called first in every root-only test.
    public static func requireRoot() throws {
        if !isRoot { throw NotRoot() }
    }

    public struct NotRoot: Error, CustomStringConvertible {
        public var description: String { "this test needs root and CI does not allow skipping it: \(Privileges.skipReason)" }
    }
}
