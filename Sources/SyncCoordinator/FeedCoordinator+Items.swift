@_spi(StateMachine) import SyncCore

// What the store holds for the feed, read for clients.
extension FeedCoordinator {
    /// Stored items, newest first.
    public func items(offset: Int = 0, limit: Int = 50) async throws -> [FeedItem] {
        try await store.items(feed: feed, offset: offset, limit: limit)
    }

    /// The newest `limit` stored items now, then again whenever they change (a page landed,
    /// retention dropped some), until ``stop()``: what a list UI shows. A slow consumer gets the
    /// latest list, not every one in between; a store read that fails ends the stream.
    public func itemUpdates(limit: Int = 50) -> AsyncStream<[FeedItem]> {
        let (stream, continuation) = AsyncStream.makeStream(of: [FeedItem].self, bufferingPolicy: .bufferingNewest(1))
        let states = self.states()
        let store = self.store, feed = self.feed
        // Owned by the stream: it ends with the states (at stop) or when the consumer goes.
        let follower = Task {
            var last: [FeedItem]?
            var lastState: FeedState?
            for await state in states {
                // Only a commit or a retention pass changes what is stored.
                guard state.itemCount != lastState?.itemCount || state.lastSyncAt != lastState?.lastSyncAt || last == nil else { continue }
                lastState = state
                guard let items = try? await store.items(feed: feed, offset: 0, limit: limit) else { break }
                if items != last {
                    last = items
                    continuation.yield(items)
                }
            }
            continuation.finish()
        }
        continuation.onTermination = { _ in follower.cancel() }
        return stream
    }
}
