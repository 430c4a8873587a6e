/// One metric family syncd exports: its name, type, labels and meaning.
///
/// ``MetricCatalog/all`` is the one list: the help text of each exposed family comes from it,
/// and docs/operations.md documents each entry (a test checks both ways).
public struct MetricDescription: Sendable, Hashable {
    /// The family's Prometheus type.
    public enum Kind: String, Sendable, Hashable {
        /// Only goes up (until the process restarts); its name ends in `_total`.
        case counter
        /// A value that goes up and down.
        case gauge
        /// Observations in buckets, with `_bucket`, `_sum` and `_count` series.
        case histogram
    }

    /// The family's name, `syncd_…` in base units.
    public let name: String
    /// Its type.
    public let kind: Kind
    /// Its label names; every label's values are bounded (feed names, directions, outcomes,
    /// reasons), never URLs or item ids. A feed's host is `feed_host`, not `host`, which
    /// scrape configurations often set on targets (a clash would rename syncd's to `exported_host`).
    public let labels: [String]
    /// What it means, as `# HELP` says.
    public let help: String
}

/// Every metric family syncd exports.
public enum MetricCatalog {
    /// `syncd_build_info{version}`: always 1.
    public static let buildInfo = MetricDescription(
        name: "syncd_build_info", kind: .gauge, labels: ["version"],
        help: "Always 1; the version label is syncd's version.")
    /// `syncd_feed_items{feed}`.
    public static let feedItems = MetricDescription(
        name: "syncd_feed_items", kind: .gauge, labels: ["feed"],
        help: "Items stored for the feed.")
    /// `syncd_feed_last_success_timestamp_seconds{feed}`.
    public static let feedLastSuccess = MetricDescription(
        name: "syncd_feed_last_success_timestamp_seconds", kind: .gauge, labels: ["feed"],
        help: "When a page of the feed was last committed to the store (Unix time); absent until one was.")
    /// `syncd_feed_last_attempt_timestamp_seconds{feed}`.
    public static let feedLastAttempt = MetricDescription(
        name: "syncd_feed_last_attempt_timestamp_seconds", kind: .gauge, labels: ["feed"],
        help: "When a request of the feed last ended, whatever its outcome (Unix time); absent until one did.")
    /// `syncd_feed_requests_total{feed,direction,outcome}`.
    public static let feedRequests = MetricDescription(
        name: "syncd_feed_requests_total", kind: .counter, labels: ["feed", "direction", "outcome"],
        help: "Requests of the feed that ended, by direction (initial, older, newer) and outcome (success or the kind of failure).")
    /// `syncd_feed_request_duration_seconds{feed,direction}`.
    public static let feedRequestDuration = MetricDescription(
        name: "syncd_feed_request_duration_seconds", kind: .histogram, labels: ["feed", "direction"],
        help: "Time from asking for a page to having it parsed, or to the failure, by direction.")
    /// `syncd_feed_received_bytes_total{feed}`.
    public static let feedReceivedBytes = MetricDescription(
        name: "syncd_feed_received_bytes_total", kind: .counter, labels: ["feed"],
        help: "Bytes of page bodies received for the feed, after content decoding.")
    /// `syncd_feed_retries_total{feed,direction}`.
    public static let feedRetries = MetricDescription(
        name: "syncd_feed_retries_total", kind: .counter, labels: ["feed", "direction"],
        help: "Requests that repeated a failed load of the same direction (automatic or asked for).")
    /// `syncd_feed_direction_state{feed,direction,state}`.
    public static let feedDirectionState = MetricDescription(
        name: "syncd_feed_direction_state", kind: .gauge, labels: ["feed", "direction", "state"],
        help: "1 for the state each direction is in, 0 for the others: idle, loading, loaded, retrying (failed, a retry due), failed (no automatic retry), paused (waiting for connectivity).")
    /// `syncd_feed_end_reached{feed}`.
    public static let feedEndReached = MetricDescription(
        name: "syncd_feed_end_reached", kind: .gauge, labels: ["feed"],
        help: "1 once loading older items reached the oldest page of the feed, else 0.")
    /// `syncd_feed_gap_pending{feed}`.
    public static let feedGapPending = MetricDescription(
        name: "syncd_feed_gap_pending", kind: .gauge, labels: ["feed"],
        help: "1 while newer items are known to be missing between stored ones (a page feed's gap), else 0.")
    /// `syncd_host_connectivity{host,state}`.
    public static let hostConnectivity = MetricDescription(
        name: "syncd_host_connectivity", kind: .gauge, labels: ["feed_host", "state"],
        help: "1 for the feed host's connectivity state (online, limited, offline), 0 for the others; absent until known.")
    /// `syncd_host_reason{host,reason}`.
    public static let hostReason = MetricDescription(
        name: "syncd_host_reason", kind: .gauge, labels: ["feed_host", "reason"],
        help: "1 for why the feed host is not online (none while online), 0 for the other reasons.")
    /// `syncd_host_connectivity_changes_total{host,reason}`.
    public static let hostChanges = MetricDescription(
        name: "syncd_host_connectivity_changes_total", kind: .counter, labels: ["feed_host", "reason"],
        help: "Changes of the feed host's connectivity, by the reason it changed to (none: it came online).")
    /// `syncd_store_size_bytes`.
    public static let storeSize = MetricDescription(
        name: "syncd_store_size_bytes", kind: .gauge, labels: [],
        help: "Size of the SQLite store's database file.")
    /// `syncd_store_wal_size_bytes`.
    public static let storeLogSize = MetricDescription(
        name: "syncd_store_wal_size_bytes", kind: .gauge, labels: [],
        help: "Size of the SQLite store's write-ahead log.")
    /// `syncd_control_open_connections` (not `syncd_control_connections`, which in OpenMetrics
    /// is the name of ``controlAccepted``'s family).
    public static let controlConnections = MetricDescription(
        name: "syncd_control_open_connections", kind: .gauge, labels: [],
        help: "Control socket connections open now.")
    /// `syncd_control_connections_total`.
    public static let controlAccepted = MetricDescription(
        name: "syncd_control_connections_total", kind: .counter, labels: [],
        help: "Control socket connections accepted.")
    /// `syncd_control_refused_connections_total{reason}`.
    public static let controlRefused = MetricDescription(
        name: "syncd_control_refused_connections_total", kind: .counter, labels: ["reason"],
        help: "Control socket connections refused, by reason (connection_limit, user_limit, stopping).")
    /// `syncd_process_cpu_seconds_total`.
    public static let processCPU = MetricDescription(
        name: "syncd_process_cpu_seconds_total", kind: .counter, labels: [],
        help: "CPU time syncd used, user and system.")
    /// `syncd_process_resident_memory_bytes`.
    public static let processMemory = MetricDescription(
        name: "syncd_process_resident_memory_bytes", kind: .gauge, labels: [],
        help: "syncd's resident memory.")
    /// `syncd_process_open_fds`.
    public static let processDescriptors = MetricDescription(
        name: "syncd_process_open_fds", kind: .gauge, labels: [],
        help: "File descriptors syncd holds open.")
    /// `syncd_process_start_time_seconds`.
    public static let processStart = MetricDescription(
        name: "syncd_process_start_time_seconds", kind: .gauge, labels: [],
        help: "When syncd started (Unix time).")

    /// Every family, in the order docs/operations.md lists them.
    public static let all: [MetricDescription] = [
        buildInfo,
        feedItems, feedLastSuccess, feedLastAttempt, feedRequests, feedRequestDuration, feedReceivedBytes,
        feedRetries, feedDirectionState, feedEndReached, feedGapPending,
        hostConnectivity, hostReason, hostChanges,
        storeSize, storeLogSize,
        controlConnections, controlAccepted, controlRefused,
        processCPU, processMemory, processDescriptors, processStart,
    ]
}
