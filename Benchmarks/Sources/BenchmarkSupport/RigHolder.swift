import Synchronization

/// Holds a benchmark's rig between ordo-one's setup hook, its iterations and its teardown hook.
public final class RigHolder<Rig: Sendable>: Sendable {
    private let name: String
    public let rig = Mutex<Rig?>(nil)

    public init(_ name: String) {
        self.name = name
    }

    /// The rig set up for this run; throws when setup did not run or failed.
    public var current: Rig {
        get throws {
            guard let rig = rig.withLock({ $0 }) else { throw RigError("\(name) rig not set up") }
            return rig
        }
    }
}
