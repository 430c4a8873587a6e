/// Random fractions for jitter, injected so tests and simulations are deterministic.
public protocol RandomSource: Sendable {
    /// A uniformly distributed value in `0...1`.
    mutating func nextFraction() -> Double
}

extension RandomSource {
    /// A uniformly distributed duration in `0...upperBound`.
    public mutating func nextDuration(upTo upperBound: Duration) -> Duration {
        guard upperBound > .zero else { return .zero }
        return .seconds(upperBound.secondsValue * nextFraction())
    }
}

/// The system's random number generator: what production uses.
public struct SystemRandomSource: RandomSource {
    /// The system's generator.
    public init() {}

    /// A fraction from `Double.random(in: 0...1)`.
    public mutating func nextFraction() -> Double {
        Double.random(in: 0...1)
    }
}

/// A seeded generator (SplitMix64): reproducible jitter for tests, simulations and
/// property tests.
public struct SeededRandomSource: RandomSource, RandomNumberGenerator {
    private var state: UInt64

    /// A generator that gives the same sequence for the same `seed`.
    public init(seed: UInt64) {
        state = seed
    }

    /// The next 64 random bits (SplitMix64).
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// The next draw, in `0..<1`.
    public mutating func nextFraction() -> Double {
        // The top 53 bits fill a double's mantissa exactly.
        Double(next() >> 11) / Double(1 << 53)
    }
}

/// Always the same fraction: `1` yields the ceiling of every delay, `0` yields none.
public struct ConstantRandomSource: RandomSource {
    /// The fraction every draw returns.
    public var fraction: Double

    /// A source that always returns `fraction`.
    public init(_ fraction: Double) {
        self.fraction = fraction
    }

    /// Always ``fraction``.
    public mutating func nextFraction() -> Double { fraction }
}

/// Any random source behind one concrete type, for storing a source chosen at run time.
public struct AnyRandomSource: RandomSource {
    /// The wrapped source.
    public var base: any RandomSource

    /// Wraps `base`.
    public init(_ base: any RandomSource) {
        self.base = base
    }

    /// The wrapped source's next fraction.
    public mutating func nextFraction() -> Double { base.nextFraction() }
}
