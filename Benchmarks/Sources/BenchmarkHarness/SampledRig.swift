import Benchmark

/// A rig that takes one sample per iteration, sums up the samples it recorded in a summary, and
/// is shut down once after the last iteration: the latency rigs, whose samples the benchmark turns
/// into its custom metrics.
public protocol SampledRig: Sendable {
    associatedtype Sample: Sendable
    /// Takes one sample; `record` false for warm-up rounds, which the summary leaves out.
    func measure(record: Bool) async throws -> Sample
    /// What the recorded samples came to, printed at teardown.
    func summary() async -> String
    /// Lets go of what the rig holds (processes, sockets, namespaces).
    func shutdown() async
}

extension Benchmark {
    /// A benchmark over a ``SampledRig`` that `setUp` builds once. Each iteration's measured
    /// window is one `measure` of the rig, recorded by the rig unless the iteration is one of
    /// `configuration`'s warm-up rounds; `report` then gets the sample outside the window, to
    /// record its metrics and to put the rig back for the next round. At teardown the rig's
    /// summary is printed and the rig shut down. An error `report` or `measure` throws is
    /// reported as the benchmark's, after `label`.
    @discardableResult
    public convenience init?<Rig: SampledRig>(
        _ name: String, configuration: Configuration, rig label: String, setUp: @escaping () async throws -> Rig,
        report: @escaping (Benchmark, Rig, Rig.Sample) async throws -> Void
    ) {
        let warmup = configuration.warmupIterations
        self.init(
            name, configuration: configuration, rig: label, setUp: setUp,
            tearDown: { rig in
                print(await rig.summary())
                await rig.shutdown()
            }
        ) { (benchmark: Benchmark, rig: Rig) async throws -> Void in
            // Warm-up rounds run before the harness records custom metrics; keep them out of the
            // rig's summary too.
            let record = benchmark.currentIteration >= warmup
            benchmark.startMeasurement()
            let sample = try await rig.measure(record: record)
            benchmark.stopMeasurement()
            try await report(benchmark, rig, sample)
        }
    }
}
