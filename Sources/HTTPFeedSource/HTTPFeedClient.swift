import AsyncHTTPClient
import NIOCore

/// The HTTP connection pool that feed sources share.
///
/// One per process (or per test): sources for feeds on the same host reuse its connections.
/// Call ``shutdown()`` before the process exits.
public final class HTTPFeedClient: Sendable {
    /// Settings that belong to the connection pool rather than to one feed.
    public struct Options: Sendable, Hashable {
        /// Limit on establishing a TCP connection.
        public var connectTimeout: Duration
        /// Whether responses may be gzip/deflate-encoded (sources then send `Accept-Encoding`).
        public var decompression: Bool
        /// Upper bound on any decompressed body, a guard against compression bombs; each
        /// source's own ``HTTPFeedConfiguration/maxBodyBytes`` is usually lower.
        public var maxDecompressedBytes: Int

        public init(connectTimeout: Duration = .seconds(10), decompression: Bool = true, maxDecompressedBytes: Int = 64 << 20) {
            self.connectTimeout = connectTimeout
            self.decompression = decompression
            self.maxDecompressedBytes = maxDecompressedBytes
        }
    }

    public let options: Options
    let http: HTTPClient

    public init(options: Options = Options()) {
        self.options = options
        // A failed connect is not retried inside the pool: the coordinator owns retries (backoff,
        // jitter, Retry-After, pausing while offline), and the operator sees "connection refused"
        // or "no route to host" at once instead of a connect timeout much later.
        var pool = HTTPClient.Configuration.ConnectionPool()
        pool.retryConnectionEstablishment = false
        let configuration = HTTPClient.Configuration(
            tlsConfiguration: TLSDefaults.client(),
            // Sources follow redirects themselves: only to the same origin (or https on the same
            // host), never with the bearer token elsewhere, and a feed that moved for good is
            // something the operator should see.
            redirectConfiguration: .disallow,
            timeout: .init(connect: .nanoseconds(Int64(options.connectTimeout.totalNanoseconds))),
            connectionPool: pool,
            decompression: options.decompression ? .enabled(limit: .size(options.maxDecompressedBytes)) : .disabled
        )
        http = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
    }

    /// Closes pooled connections; in-flight requests fail.
    public func shutdown() async throws {
        try await http.shutdown()
    }
}

extension Duration {
    var totalNanoseconds: Double {
        Double(components.seconds) * 1e9 + Double(components.attoseconds) / 1e9
    }
}
