/// One feed request as the server saw it, for tests and the admin API.
public struct RequestRecord: Sendable, Hashable {
    /// The feed requested.
    public var feed: String
    /// Which way the request paged.
    public var kind: RequestKind
    /// The raw query string, e.g. `limit=20&max_id=0000000100`.
    public var query: String
    /// What the server's request hook did to this request (``FeedIntervention/label``), if
    /// anything.
    public var intervention: String?
    /// When the request reached the handler, on the monotonic clock.
    public var receivedAt: ContinuousClock.Instant
    /// The `Authorization` header as received, so tests can check where a client sends its
    /// token. Kept in memory only; never logged or served by the admin API.
    public var authorization: String?
}

/// Everything mutable about the server: feeds and the request log.
actor FeedServerState {
    private var feeds: [String: GeneratedFeed]
    private var log: [String: [RequestRecord]] = [:]
    private var counts: [String: Int] = [:]
    /// Records kept per feed; a demo left running for days must not grow without bound.
    private let logLimit = 20_000
    private let feedOrder: [String]

    init(feeds definitions: [FeedDefinition]) {
        var feeds: [String: GeneratedFeed] = [:]
        for definition in definitions { feeds[definition.name] = GeneratedFeed(definition: definition) }
        self.feeds = feeds
        self.feedOrder = definitions.map(\.name)
    }

    var feedNames: [String] { feedOrder }

    func definition(_ name: String) -> FeedDefinition? { feeds[name]?.definition }

    /// Records a feed request and what the request hook did to it.
    func record(feed: String, kind: RequestKind, query: String, authorization: String?, intervention: String?) {
        counts[feed, default: 0] += 1
        log[feed, default: []].append(RequestRecord(
            feed: feed, kind: kind, query: query, intervention: intervention, receivedAt: .now, authorization: authorization))
        if log[feed]!.count > logLimit { log[feed]!.removeFirst(log[feed]!.count - logLimit) }
    }

    func page(feed: String, query: PageQuery) -> (items: [DemoFeedItem], hasOlder: Bool)? {
        feeds[feed]?.page(query)
    }

    func append(feed: String, count: Int) throws(DemoFeedServerError) -> Int {
        guard feeds[feed] != nil else { throw .unknownFeed(feed) }
        feeds[feed]!.append(count: count)
        return feeds[feed]!.items.count
    }

    /// Deletes the items of `feed` with these ids; returns how many it had.
    func delete(feed: String, ids: [String]) throws(DemoFeedServerError) -> Int {
        guard feeds[feed] != nil else { throw .unknownFeed(feed) }
        return ids.count { feeds[feed]!.delete(id: $0) }
    }

    /// Edits the items of `feed` with these ids in place; returns how many it had.
    func edit(feed: String, ids: [String]) throws(DemoFeedServerError) -> Int {
        guard feeds[feed] != nil else { throw .unknownFeed(feed) }
        return ids.count { feeds[feed]!.edit(id: $0) }
    }

    /// Adds the items the clock owes each growing feed since the last tick.
    func tick(elapsedSeconds: Double) {
        for name in feedOrder {
            guard var feed = feeds[name], feed.definition.itemsPerSecond > 0 else { continue }
            feed.pendingFraction += feed.definition.itemsPerSecond * elapsedSeconds
            let whole = Int(feed.pendingFraction)
            feed.pendingFraction -= Double(whole)
            feed.append(count: whole)
            feeds[name] = feed
        }
    }

    func items(feed: String) throws(DemoFeedServerError) -> [DemoFeedItem] {
        guard let feed = feeds[feed] else { throw .unknownFeed(feed) }
        return feed.items
    }

    func itemCount(feed: String) -> Int? { feeds[feed]?.items.count }

    func requests(feed: String) -> [RequestRecord] { log[feed] ?? [] }

    func requestCount(feed: String) -> Int { counts[feed] ?? 0 }

    func resetRequestLog() {
        log.removeAll()
        counts.removeAll()
    }
}
