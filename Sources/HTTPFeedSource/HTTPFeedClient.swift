import AsyncHTTPClient
import Foundation
import NIOCore
import NIOSSL
import Synchronization

/// The HTTP connection pool that feed sources share.
///
/// One per process (or per test): sources for feeds on the same host reuse its connections.
/// A client made with ``init(options:)`` owns its pool, and gives each source a connection of its
/// own for a backfill's older pages: ``shutdown()`` closes both and waits, and a client released
/// without that closes the pool in the background. One made with
/// ``init(sharing:options:)`` uses the caller's `HTTPClient` (`HTTPClient.shared`, say) and
/// leaves its lifetime to the caller.
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
        /// How long a connection with no request on it stays open for the next one. Closing it
        /// wakes the process, so a client whose next request is far away (a refresh every hour)
        /// does better with a short one: it then holds no socket and arms no timer while idle.
        public var idleTimeout: Duration

        /// Pool settings: 10 seconds to connect, decompression on, at most 64 MiB decompressed,
        /// idle connections kept for 60 seconds.
        public init(
            connectTimeout: Duration = .seconds(10), decompression: Bool = true, maxDecompressedBytes: Int = 64 << 20,
            idleTimeout: Duration = .seconds(60)
        ) {
            self.connectTimeout = connectTimeout
            self.decompression = decompression
            self.maxDecompressedBytes = maxDecompressedBytes
            self.idleTimeout = max(.milliseconds(1), idleTimeout)
        }
    }

    /// The pool's settings.
    public let options: Options
    let http: HTTPClient
    /// Whether ``http`` is this client's to shut down (and its configuration this module's).
    let ownsPool: Bool
    /// The sources' walks, closed by ``shutdown()``; `nil` once shut down.
    private let walks = Mutex<[WeakWalk]?>([])

    /// A client with a pool of its own, configured for feeds.
    ///
    /// - Parameter options: connect timeout and decompression limits.
    public init(options: Options = Options()) {
        self.options = options
        // A failed connect is not retried inside the pool: the coordinator owns retries (backoff,
        // jitter, Retry-After, pausing while offline), and the operator sees "connection refused"
        // or "no route to host" at once instead of a connect timeout much later.
        var pool = HTTPClient.Configuration.ConnectionPool()
        pool.retryConnectionEstablishment = false
        pool.idleTimeout = TimeAmount(options.idleTimeout)
        let configuration = HTTPClient.Configuration(
            tlsConfiguration: TLSDefaults.client(),
            // Sources follow redirects themselves: only to the same origin (or https on the same
            // host), never with the bearer token elsewhere, and a feed that moved for good is
            // something the operator should see.
            redirectConfiguration: .disallow,
            timeout: .init(connect: TimeAmount(options.connectTimeout)),
            connectionPool: pool,
            decompression: options.decompression ? .enabled(limit: .size(options.maxDecompressedBytes)) : .disabled
        )
        http = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
        ownsPool = true
    }

    /// A client on the caller's `HTTPClient`, which the caller keeps and shuts down.
    ///
    /// The client's own configuration applies (timeouts, redirects, decompression): feed sources
    /// follow redirects themselves, so give it `redirectConfiguration: .disallow` for the same
    /// checks as a pool of its own. `options` only describes it to the sources: with
    /// `decompression` set they ask for gzip, so the client must then decompress. The default
    /// asks for no encoding, which works with any client (`HTTPClient.shared` does not
    /// decompress); a page that still arrives compressed fails with an error that says so.
    public init(sharing client: HTTPClient, options: Options = Options(decompression: false)) {
        self.options = options
        self.http = client
        self.ownsPool = false
    }

    deinit {
        // AsyncHTTPClient requires a shutdown before release; an owner that forgot gets one
        // here, in the background (the pool's event loop keeps it alive until it is done).
        if ownsPool { http.shutdown { _ in } }
    }

    /// Closes pooled connections and waits; in-flight requests fail. Does nothing for a shared
    /// client. Safe to call more than once.
    public func shutdown() async throws {
        guard ownsPool else { return }
        let open = walks.withLock { walks in
            defer { walks = nil }
            return (walks ?? []).compactMap(\.walk)
        }
        for walk in open { await walk.close() }
        do {
            try await http.shutdown()
        } catch let error as HTTPClientError where error == .alreadyShutdown {
            // Shut down already: what the caller asked for.
        }
    }
}

extension HTTPFeedClient {
    /// A walk for a source of this client, or `nil` on a shared `HTTPClient` (whose
    /// configuration, a proxy or its own TLS, only AsyncHTTPClient knows) or once shut down.
    func makeWalk(for url: URL, tls: TLSConfiguration?, maxBodyBytes: Int, requestTimeout: Duration) -> PageWalk? {
        guard ownsPool,
              let walk = PageWalk(
                for: url, tls: tls, options: options, maxBodyBytes: maxBodyBytes, requestTimeout: requestTimeout,
                loop: http.eventLoopGroup.next())
        else { return nil }
        let registered = walks.withLock { walks -> Bool in
            guard walks != nil else { return false }
            walks?.removeAll { $0.walk == nil }
            walks?.append(WeakWalk(walk: walk))
            return true
        }
        return registered ? walk : nil
    }
}

/// A source's walk, held without keeping it alive: the source owns it.
private struct WeakWalk: Sendable {
    weak var walk: PageWalk?
}
