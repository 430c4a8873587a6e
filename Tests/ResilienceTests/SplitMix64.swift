import SyncCore

/// Every randomized run replays exactly from its seed: SyncCore's SplitMix64 generator, under
/// the name these tests use for it.
typealias SplitMix64 = SeededRandomSource

extension SeededRandomSource {
    /// An element of `choices`, uniformly.
    mutating func pick<T>(_ choices: [T]) -> T {
        choices[Int.random(in: 0..<choices.count, using: &self)]
    }
}
