@_exported import struct SyncCore.SeededRandomSource

/// The seeded generator of every randomized test (SplitMix64), so a printed seed replays a run.
public typealias SplitMix64 = SeededRandomSource

extension SeededRandomSource {
    /// Uniform in `range`.
    public mutating func int(in range: ClosedRange<Int>) -> Int { Int.random(in: range, using: &self) }
    /// True with `probability`.
    public mutating func chance(_ probability: Double) -> Bool { Double.random(in: 0..<1, using: &self) < probability }
    /// An element of `choices`, uniformly.
    public mutating func pick<T>(_ choices: [T]) -> T { choices[Int.random(in: 0..<choices.count, using: &self)] }
    /// A generator for another task, derived so the whole run still follows from one seed.
    public mutating func fork() -> SeededRandomSource { SeededRandomSource(seed: next()) }
}
