import CoreMetrics
import Prometheus

/// A swift-metrics factory onto a ``PrometheusCollectorRegistry`` that registers each metric
/// family with its help text.
///
/// swift-prometheus's own `PrometheusMetricsFactory` registers every family with an empty help
/// text, and a family's help cannot change once registered; a family without `# HELP` fails
/// `promtool check metrics`. This factory takes the text from ``help`` by family name (an
/// unknown name gets none) and is otherwise the same: counters, gauges (recorders that do not
/// aggregate, and meters), value histograms (aggregating recorders) and duration histograms
/// (timers), with buckets by family name.
struct HelpfulMetricsFactory: MetricsFactory {
    /// Where every metric made here lives.
    let registry: PrometheusCollectorRegistry
    /// Help text by family name.
    let help: [String: String]
    /// Buckets of duration histograms by family name; others get ``defaultDurationBuckets``.
    let durationBuckets: [String: [Duration]]
    /// Buckets of value histograms by family name; others get ``defaultValueBuckets``.
    let valueBuckets: [String: [Double]]

    static let defaultDurationBuckets: [Duration] = [
        .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100),
        .milliseconds(250), .milliseconds(500), .seconds(1), .milliseconds(2500), .seconds(5), .seconds(10),
    ]
    static let defaultValueBuckets: [Double] = [5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000]

    private func descriptor(_ label: String) -> MetricNameDescriptor {
        MetricNameDescriptor(metricName: label, unitName: "", helpText: help[label] ?? "")
    }

    func makeCounter(label: String, dimensions: [(String, String)]) -> any CounterHandler {
        registry.makeCounter(descriptor: descriptor(label), labels: dimensions)
    }

    func makeFloatingPointCounter(label: String, dimensions: [(String, String)]) -> any FloatingPointCounterHandler {
        registry.makeCounter(descriptor: descriptor(label), labels: dimensions)
    }

    func makeRecorder(label: String, dimensions: [(String, String)], aggregate: Bool) -> any RecorderHandler {
        guard aggregate else { return registry.makeGauge(descriptor: descriptor(label), labels: dimensions) }
        return registry.makeValueHistogram(
            descriptor: descriptor(label), labels: dimensions, buckets: valueBuckets[label] ?? Self.defaultValueBuckets)
    }

    func makeMeter(label: String, dimensions: [(String, String)]) -> any MeterHandler {
        registry.makeGauge(descriptor: descriptor(label), labels: dimensions)
    }

    func makeTimer(label: String, dimensions: [(String, String)]) -> any TimerHandler {
        registry.makeDurationHistogram(
            descriptor: descriptor(label), labels: dimensions, buckets: durationBuckets[label] ?? Self.defaultDurationBuckets)
    }

    func destroyCounter(_ handler: any CounterHandler) {
        if let counter = handler as? Prometheus.Counter { registry.unregisterCounter(counter) }
    }

    func destroyFloatingPointCounter(_ handler: any FloatingPointCounterHandler) {
        if let counter = handler as? Prometheus.Counter { registry.unregisterCounter(counter) }
    }

    func destroyRecorder(_ handler: any RecorderHandler) {
        if let gauge = handler as? Prometheus.Gauge {
            registry.unregisterGauge(gauge)
        } else if let histogram = handler as? ValueHistogram {
            registry.unregisterValueHistogram(histogram)
        }
    }

    func destroyMeter(_ handler: any MeterHandler) {
        if let gauge = handler as? Prometheus.Gauge { registry.unregisterGauge(gauge) }
    }

    func destroyTimer(_ handler: any TimerHandler) {
        if let histogram = handler as? DurationHistogram { registry.unregisterDurationHistogram(histogram) }
    }
}
