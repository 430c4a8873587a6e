import ConnectivityPolicy
import CoreMetrics
import Foundation
import Metrics
import Prometheus
import SyncCore
import Synchronization

/// syncd's metrics: what the daemon records through swift-metrics, into a registry of its own,
/// and the exposition of that registry.
///
/// One instance per daemon (no global `MetricsSystem.bootstrap`, so several daemons, or a daemon
/// and its tests, share a process without sharing metrics). Events are recorded as they happen
/// (``requestEnded(feed:direction:outcome:duration:at:)``, ``verdict(_:host:)``); states and
/// totals that other parts keep (a feed's state, the store's size, the control server's counts,
/// the process) are read in when an exposition is made, so an idle daemon does no work for
/// metrics nobody reads.
///
/// Every method is safe to call from any thread.
public final class SyncdMetrics: Sendable {
    /// The registry every metric of this instance is in.
    public let registry: PrometheusCollectorRegistry
    private let factory: HelpfulMetricsFactory
    /// The last total mirrored into each counter kept elsewhere, by counter key.
    private let mirrored = Mutex<[String: Double]>([:])
    /// The last verdict seen per host: a repeat is not a change.
    private let verdicts = Mutex<[String: HostState]>([:])
    /// Directions whose last request failed, by feed: the next request of one is a retry.
    private let failing = Mutex<Set<FeedDirection>>([])

    /// Buckets of ``MetricCatalog/feedRequestDuration``: loopback pages take milliseconds, a slow
    /// server or a large page seconds, a request timeout up to a minute.
    public static let requestDurationBuckets: [Duration] = [
        .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100),
        .milliseconds(250), .milliseconds(500), .seconds(1), .milliseconds(2500), .seconds(5), .seconds(10),
        .seconds(30), .seconds(60),
    ]

    /// Metrics of a syncd of `version`, with ``MetricCatalog/buildInfo`` set.
    public init(version: String) {
        registry = PrometheusCollectorRegistry()
        factory = HelpfulMetricsFactory(
            registry: registry,
            help: Dictionary(uniqueKeysWithValues: MetricCatalog.all.map { ($0.name, $0.help) }),
            durationBuckets: [MetricCatalog.feedRequestDuration.name: Self.requestDurationBuckets],
            valueBuckets: [:])
        gauge(MetricCatalog.buildInfo, [("version", version)]).record(1)
    }

    // MARK: Events

    /// A request of `feed` for `direction` is about to go out; counts a retry when the last one
    /// of that direction failed.
    public func requestStarted(feed: String, direction: Direction) {
        let isRetry = failing.withLock { $0.contains(FeedDirection(feed: feed, direction: direction)) }
        if isRetry { counter(MetricCatalog.feedRetries, [("feed", feed), ("direction", direction.rawValue)]).increment() }
    }

    /// A request of `feed` for `direction` ended at `time` with `outcome`, `duration` after it
    /// started.
    public func requestEnded(feed: String, direction: Direction, outcome: RequestOutcome, duration: Duration, at time: Date) {
        let key = FeedDirection(feed: feed, direction: direction)
        switch outcome {
        case .success: failing.withLock { _ = $0.remove(key) }
        case .cancelled: break
        default: failing.withLock { _ = $0.insert(key) }
        }
        counter(MetricCatalog.feedRequests, [("feed", feed), ("direction", direction.rawValue), ("outcome", outcome.rawValue)]).increment()
        CoreMetrics.Timer(
            label: MetricCatalog.feedRequestDuration.name, dimensions: [("feed", feed), ("direction", direction.rawValue)], factory: factory
        ).record(duration: duration)
        gauge(MetricCatalog.feedLastAttempt, [("feed", feed)]).record(time.timeIntervalSince1970)
    }

    /// The connectivity verdict for `host` (as its feeds use it): sets the host's state and
    /// reason, and counts a change when it differs from the last one in state or reason.
    public func verdict(_ verdict: Verdict, host: String) {
        let state = HostState(verdict)
        let changed = verdicts.withLock { known in
            defer { known[host] = state }
            return known[host] != state
        }
        guard changed else { return }
        counter(MetricCatalog.hostChanges, [("feed_host", host), ("reason", state.reason)]).increment()
        for candidate in HostState.states {
            gauge(MetricCatalog.hostConnectivity, [("feed_host", host), ("state", candidate)]).record(candidate == state.state ? 1 : 0)
        }
        for candidate in HostState.reasons {
            gauge(MetricCatalog.hostReason, [("feed_host", host), ("reason", candidate)]).record(candidate == state.reason ? 1 : 0)
        }
    }

    // MARK: Read in at exposition

    /// The feeds' states as the coordinator has them now.
    public func update(_ states: [FeedState]) {
        for state in states {
            let feed = [("feed", state.feed)]
            gauge(MetricCatalog.feedItems, feed).record(state.itemCount)
            if let last = state.lastSyncAt {
                gauge(MetricCatalog.feedLastSuccess, feed).record(last.timeIntervalSince1970)
            }
            gauge(MetricCatalog.feedEndReached, feed).record(state.endReached ? 1 : 0)
            gauge(MetricCatalog.feedGapPending, feed).record(state.gap == nil ? 0 : 1)
            for direction in Direction.allCases {
                // Counters exist from zero, so the first retry shows as an increase.
                counter(MetricCatalog.feedRetries, feed + [("direction", direction.rawValue)]).increment(by: 0)
                let current = Self.stateName(state[direction])
                for name in Self.directionStates {
                    gauge(MetricCatalog.feedDirectionState, feed + [("direction", direction.rawValue), ("state", name)])
                        .record(name == current ? 1 : 0)
                }
            }
        }
    }

    /// Body bytes received for `feed` so far, as its source counts them.
    public func receivedBytes(feed: String, total: Int) {
        mirror(MetricCatalog.feedReceivedBytes, [("feed", feed)], total: Double(total))
    }

    /// The store's database file and write-ahead log, in bytes.
    public func store(databaseBytes: Int, logBytes: Int) {
        gauge(MetricCatalog.storeSize, []).record(databaseBytes)
        gauge(MetricCatalog.storeLogSize, []).record(logBytes)
    }

    /// The control socket's connections: open now, accepted and refused (by reason) so far.
    public func control(open: Int, accepted: Int, refused: [String: Int]) {
        gauge(MetricCatalog.controlConnections, []).record(open)
        mirror(MetricCatalog.controlAccepted, [], total: Double(accepted))
        for (reason, total) in refused {
            mirror(MetricCatalog.controlRefused, [("reason", reason)], total: Double(total))
        }
    }

    /// The process's own figures.
    public func process(_ sample: ProcessSample) {
        mirror(MetricCatalog.processCPU, [], total: sample.cpuSeconds)
        gauge(MetricCatalog.processMemory, []).record(sample.residentBytes)
        gauge(MetricCatalog.processDescriptors, []).record(sample.openDescriptors)
        gauge(MetricCatalog.processStart, []).record(sample.startTime.timeIntervalSince1970)
    }

    // MARK: Exposition

    /// Every metric in `format`.
    public func exposition(_ format: ExpositionFormat) -> [UInt8] {
        let text = registry.emitToBuffer()
        switch format {
        case .prometheusText: return text
        case .openMetrics: return OpenMetrics.convert(prometheusText: text)
        }
    }

    // MARK: Helpers

    /// The direction states ``MetricCatalog/feedDirectionState`` distinguishes.
    static let directionStates = ["idle", "loading", "loaded", "retrying", "failed", "paused"]

    /// Paused outranks the load phase; a failure with an automatic retry due is `retrying`, one
    /// without (a permanent error, the budget spent) `failed`, as `syncctl status` judges it.
    static func stateName(_ state: DirectionState) -> String {
        if state.paused { return "paused" }
        switch state.load {
        case .idle: return "idle"
        case .loading: return "loading"
        case .loaded: return "loaded"
        case .failed(let failure): return failure.nextRetryAt == nil ? "failed" : "retrying"
        }
    }

    private func counter(_ family: MetricDescription, _ labels: [(String, String)]) -> CoreMetrics.Counter {
        CoreMetrics.Counter(label: family.name, dimensions: labels, factory: factory)
    }

    private func gauge(_ family: MetricDescription, _ labels: [(String, String)]) -> CoreMetrics.Gauge {
        CoreMetrics.Gauge(label: family.name, dimensions: labels, factory: factory)
    }

    /// Moves a counter up to `total`, a count kept by another part: counters only go up, so the
    /// difference since the last call is added (a total that went down, which a part never
    /// reports, adds nothing).
    private func mirror(_ family: MetricDescription, _ labels: [(String, String)], total: Double) {
        let key = family.name + labels.map { "\u{0}\($0.0)=\($0.1)" }.joined()
        let delta = mirrored.withLock { known -> Double in
            let previous = known[key] ?? 0
            guard total > previous else { return 0 }
            known[key] = total
            return total - previous
        }
        let counter = FloatingPointCounter(label: family.name, dimensions: labels, factory: factory)
        // Registered at zero, so the series exists before its first increment.
        counter.increment(by: delta)
    }
}

/// How a feed request ended, as ``MetricCatalog/feedRequests``'s `outcome` label says it.
public enum RequestOutcome: String, Sendable, Hashable, CaseIterable {
    /// A page came back and parsed (a 304 counts: nothing new).
    case success
    /// Could not connect, the connection broke, or the name did not resolve.
    case transport
    /// The connect or the request timed out.
    case timeout
    /// A redirect that was not followed.
    case http3xx = "http_3xx"
    /// A client error status.
    case http4xx = "http_4xx"
    /// A server error status.
    case http5xx = "http_5xx"
    /// Any other status.
    case httpOther = "http_other"
    /// The body was not a page.
    case malformed
    /// The body exceeded the feed's limit.
    case tooLarge = "too_large"
    /// The TLS handshake failed on the server's certificate.
    case tls
    /// Cancelled (going offline, stopping).
    case cancelled
    /// Anything else.
    case other

    /// The outcome of a request that threw `error`.
    public init(_ error: any Error) {
        if error is CancellationError {
            self = .cancelled
            return
        }
        guard let error = error as? FeedError else {
            self = .other
            return
        }
        switch error.kind {
        case .transport: self = .transport
        case .timeout: self = .timeout
        case .httpStatus(let code):
            switch code {
            case 300..<400: self = .http3xx
            case 400..<500: self = .http4xx
            case 500..<600: self = .http5xx
            default: self = .httpOther
            }
        case .malformed: self = .malformed
        case .tooLarge: self = .tooLarge
        case .tls: self = .tls
        case .other: self = .other
        }
    }
}

/// A feed and one of its directions.
private struct FeedDirection: Hashable {
    var feed: String
    var direction: Direction
}

/// A host's verdict reduced to what the metrics label: its state and its reason.
private struct HostState: Hashable {
    var state: String
    var reason: String

    static let states = ["online", "limited", "offline"]
    /// `none` for online, then the control API's reason names.
    static let reasons = ["none", "no_carrier", "no_address", "no_route", "blocked", "dns_failed", "portal", "server_unreachable"]

    init(_ verdict: Verdict) {
        switch verdict {
        case .online: (state, reason) = ("online", "none")
        case .limited(let limitation):
            state = "limited"
            switch limitation.reason {
            case .dnsFailed: reason = "dns_failed"
            case .portal: reason = "portal"
            case .serverUnreachable: reason = "server_unreachable"
            }
        case .offline(let why):
            state = "offline"
            switch why {
            case .noCarrier: reason = "no_carrier"
            case .noAddress: reason = "no_address"
            case .noRoute: reason = "no_route"
            case .blocked: reason = "blocked"
            }
        }
    }
}
