extension DemoFeedServer {
    /// Everything the server needs at start.
    public struct Configuration: Sendable {
        /// Address to bind; loopback unless deliberately changed.
        public var host: String
        /// Port to bind; 0 picks a free one (read it from ``DemoFeedServer/port``).
        public var port: Int
        /// The feeds served at `/feeds/{name}` (and `/api/v1/timelines/{name}`).
        public var feeds: [FeedDefinition]
        /// Latency added to every feed request, in milliseconds (uniform in the range).
        public var latencyMilliseconds: ClosedRange<Int>?
        /// Time between a page's headers and its body, in milliseconds: a body that takes that
        /// long to arrive, as over a slow link.
        public var bodyDelayMilliseconds: Int
        /// Whether pages are gzip-encoded for clients that offer `Accept-Encoding: gzip`.
        public var gzip: Bool
        /// How often growing feeds get their new items.
        public var tickInterval: Duration
        /// When set, feed requests need `Authorization: Bearer <token>` and get 401 otherwise.
        public var bearerToken: String?

        /// A configuration; the defaults are one feed `home` on a free loopback port.
        public init(
            host: String = "127.0.0.1",
            port: Int = 0,
            feeds: [FeedDefinition] = [FeedDefinition(name: "home")],
            latencyMilliseconds: ClosedRange<Int>? = nil,
            bodyDelayMilliseconds: Int = 0,
            gzip: Bool = true,
            tickInterval: Duration = .milliseconds(200),
            bearerToken: String? = nil
        ) {
            self.host = host
            self.port = port
            self.feeds = feeds
            self.latencyMilliseconds = latencyMilliseconds
            self.bodyDelayMilliseconds = bodyDelayMilliseconds
            self.gzip = gzip
            self.tickInterval = tickInterval
            self.bearerToken = bearerToken
        }

        /// Rejects configurations the server could not serve correctly.
        public func validate() throws(DemoFeedServerError) {
            guard !feeds.isEmpty else { throw .invalidArgument("at least one feed is needed") }
            var names = Set<String>()
            for feed in feeds {
                try feed.validate()
                guard names.insert(feed.name).inserted else { throw .invalidArgument("feed '\(feed.name)' is defined twice") }
            }
            guard (0...65_535).contains(port) else { throw .invalidArgument("port must be 0...65535") }
            if let latency = latencyMilliseconds, latency.lowerBound < 0 {
                throw .invalidArgument("latency must be non-negative")
            }
            guard bodyDelayMilliseconds >= 0 else { throw .invalidArgument("body delay must be non-negative") }
            guard tickInterval > .zero else { throw .invalidArgument("tick interval must be positive") }
        }
    }
}
