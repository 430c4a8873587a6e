import Benchmark
import Synchronization

extension BenchmarkMetric {
    /// A custom metric whose figures the benchmark works out itself (µs, items/s, ratios ×100) and
    /// the runner keeps as given, not scaled: smaller is better unless `polarity` says otherwise.
    public static func reported(_ name: String, _ polarity: Polarity = .prefersSmaller) -> BenchmarkMetric {
        .custom(name, polarity: polarity, useScalingFactor: false)
    }
}

extension Benchmark.Configuration {
    /// A configuration whose metrics are the wall clock (unless `wallClock` is false) and `custom`,
    /// every custom one reported as a plain count: the benchmarks record microseconds, items/s or
    /// ratios themselves, so the runner must not scale or convert them. `maxDuration` nil keeps
    /// the runner's default.
    public static func counting(
        _ custom: [BenchmarkMetric], wallClock: Bool = true, timeUnits: BenchmarkTimeUnits, warmupIterations: Int = 0,
        maxDuration: Duration? = nil, maxIterations: Int, teardown: Benchmark.BenchmarkTeardownHook? = nil
    ) -> Self {
        var configuration = Self(
            metrics: (wallClock ? [.wallClock] : []) + custom,
            timeUnits: timeUnits,
            units: Dictionary(uniqueKeysWithValues: custom.map { ($0, BenchmarkUnits.count) }),
            warmupIterations: warmupIterations,
            maxIterations: maxIterations,
            teardown: teardown
        )
        if let maxDuration { configuration.maxDuration = maxDuration }
        return configuration
    }
}

extension Benchmark {
    /// A benchmark over a rig that `setUp` builds once, before the warm-up and the iterations, and
    /// that `tearDown` is handed after the last (not when `setUp` failed). Each iteration runs
    /// `body` synchronously (on the runner's thread, not in a task of the cooperative pool) with
    /// the rig; an error it throws is reported as the benchmark's, after `label`.
    ///
    /// `configuration`'s own setup and teardown hooks are replaced.
    @discardableResult
    public convenience init?<Rig: Sendable>(
        _ name: String, configuration: Configuration, rig label: String,
        setUp: @escaping () async throws -> Rig, tearDown: @escaping (Rig) async -> Void,
        body: @escaping (Benchmark, Rig) throws -> Void
    ) {
        let holder = RigHolder<Rig>(label)
        self.init(name, configuration: holder.hooked(configuration, setUp: setUp, tearDown: tearDown)) { (benchmark: Benchmark) -> Void in
            do {
                try body(benchmark, try holder.current)
            } catch {
                benchmark.error("\(label): \(error)")
            }
        }
    }

    /// The same as the synchronous form, with an `async` `body`, which the runner runs in a task.
    @discardableResult
    public convenience init?<Rig: Sendable>(
        _ name: String, configuration: Configuration, rig label: String,
        setUp: @escaping () async throws -> Rig, tearDown: @escaping (Rig) async -> Void,
        body: @escaping (Benchmark, Rig) async throws -> Void
    ) {
        let holder = RigHolder<Rig>(label)
        self.init(name, configuration: holder.hooked(configuration, setUp: setUp, tearDown: tearDown)) { (benchmark: Benchmark) async -> Void in
            do {
                try await body(benchmark, try holder.current)
            } catch {
                benchmark.error("\(label): \(error)")
            }
        }
    }
}

/// Holds a benchmark's rig between ordo-one's setup hook, its iterations and its teardown hook,
/// which share nothing else.
final class RigHolder<Rig: Sendable>: Sendable {
    private let name: String
    private let rig = Mutex<Rig?>(nil)

    init(_ name: String) {
        self.name = name
    }

    /// The rig set up for this run; throws when setup did not run or failed.
    var current: Rig {
        get throws {
            guard let rig = rig.withLock({ $0 }) else { throw RigNotSetUp(description: "\(name) rig not set up") }
            return rig
        }
    }

    /// `configuration` with a setup hook that builds and holds the rig and a teardown hook that
    /// hands it to `tearDown` and lets it go.
    func hooked(
        _ configuration: Benchmark.Configuration, setUp: @escaping () async throws -> Rig, tearDown: @escaping (Rig) async -> Void
    ) -> Benchmark.Configuration {
        var configuration = configuration
        configuration.setup = {
            let made = try await setUp()
            self.rig.withLock { $0 = made }
        }
        configuration.teardown = {
            guard let held = self.rig.withLock({ $0 }) else { return }
            await tearDown(held)
            self.rig.withLock { $0 = nil }
        }
        return configuration
    }
}

private struct RigNotSetUp: Error, CustomStringConvertible {
    var description: String
}
