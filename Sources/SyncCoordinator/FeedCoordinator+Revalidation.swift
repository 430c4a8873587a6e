import Logging
@_spi(StateMachine) import SyncCore

// Revalidation walks: a newer request that reads the feed's newest part again to find what
// changed or was removed, committed in one go.
extension FeedCoordinator {
    /// Runs a revalidation walk for a newer request; a walk that meets no stored item gives way
    /// to the plain newer request.
    func startRevalidation(_ request: FetchRequest, window: RevalidationWindow) {
        let source = self.source, store = self.store, feed = self.feed
        let task = Task { [weak self] in
            let walked: Result<RevalidationResult?, any Error>
            do {
                walked = .success(try await Self.walk(window, feed: feed, store: store, source: source))
            } catch {
                walked = .failure(error)
            }
            await self?.finishRevalidation(request, window: window, walked)
        }
        requests[request.direction] = (request.token, task)
    }

    /// Reads `window` of the feed from its head down, as ``RevalidationWalk`` asks; `nil` when
    /// the walk met no stored item.
    private static func walk(
        _ window: RevalidationWindow, feed: String, store: any FeedStore, source: any FeedSource
    ) async throws -> RevalidationResult? {
        // The window and as much below it: an item read below the window confirms its last ones.
        let limit: Int = switch window {
        case .items(let count): count * 2 + 100
        case .all: Int.max
        }
        let stored = try await store.items(feed: feed, offset: 0, limit: limit).map(\.id)
        var walk = RevalidationWalk(window: window, stored: stored)
        var step = walk.start()
        while true {
            switch step {
            case .fetch(.head): step = walk.received(try await source.fetchInitial())
            case .fetch(.older(let cursor)): step = walk.received(try await source.fetchOlder(cursor: cursor))
            case .finished(let result): return result
            case .abandoned: return nil
            }
        }
    }

    private func finishRevalidation(_ request: FetchRequest, window: RevalidationWindow, _ walked: Result<RevalidationResult?, any Error>) async {
        chargeMeteredBytes()
        if requests[.newer]?.token == request.token { requests[.newer] = nil }
        guard isWanted(request) else { return }
        switch walked {
        case .failure(let error):
            await finish(request, .failure(error))
        case .success(nil):
            logger.info("revalidation met no stored item: refreshing instead", metadata: ["window": "\(window)"])
            var plain = request
            plain.revalidate = nil
            perform(.fetch(plain))
        case .success(let result?):
            let outcome: CommitOutcome
            do {
                outcome = try await store.revalidate(feed: feed, walk: result, at: time.now)
            } catch {
                commitFailed(request, error)
                return
            }
            logger.info("revalidated", metadata: [
                "window": "\(window)", "requests": "\(result.requests)", "read": "\(result.items.count)",
                "inserted": "\(outcome.inserted)", "updated": "\(outcome.updated)", "deleted": "\(outcome.deleted)",
            ])
            apply(.committed(.newer, request.token, outcome))
        }
    }
}
