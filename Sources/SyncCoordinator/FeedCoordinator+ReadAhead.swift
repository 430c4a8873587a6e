@_spi(StateMachine) import SyncCore

// The backfill's read-ahead, as its ``ReadAheadMachine`` decides: this actor starts, cancels and
// lets go of the fetches it names, reports what they bring, and waits where it says.
extension FeedCoordinator {
    /// Performs what the read-ahead decided, in order.
    func carryOut(_ actions: [ReadAheadMachine<C.Instant>.Action]) {
        for action in actions {
            switch action {
            case .fetch(let id, let cursor):
                fetchAhead(cursor, id: id)
            case .cancel(let id):
                fetchesAhead.removeValue(forKey: id)?.cancel()
            case .forget(let id):
                fetchesAhead[id] = nil
            case .wake:
                arrivalWaiter?.resume()
                arrivalWaiter = nil
            }
        }
    }

    /// Starts fetching the page at `cursor` ahead of the backfill, as the read-ahead's fetch `id`.
    private func fetchAhead(_ cursor: String, id: ReadAheadID) {
        let source = self.source
        // Known from the headers while the body is still on its way: the next request need not
        // wait for this page to arrive and be parsed. The callback and the next fetch run at
        // once on the thread that read the headers, until the next request is on its way:
        // enqueued, each hand-over would wait behind this page's body and parse on the same
        // event loop, in a chain in which every page waits for the one before.
        let inPlace = sourceExecutor != nil
        let known: @Sendable (String?) -> Void = { [weak self] older in
            guard let self else { return }
            // On this actor's executor, as the source promises: no hop, so the next request is
            // queued on the connection before this response's body is read. Told while this
            // actor is still starting that fetch (a source that answers before it first
            // suspends), it waits its turn like any other instead of reordering the run under it.
            let entered = inPlace && self.assumeIsolated { coordinator in
                guard !coordinator.startingFetch else { return false }
                coordinator.knownAhead(older, of: cursor)
                return true
            }
            if !entered { Task.immediate { await self.knownAhead(older, of: cursor) } }
        }
        // Not isolated to this actor: the fetch then runs in place up to the request, also when
        // the actor is on the source's executor (leaving that would be a queued hop).
        let fetch: @Sendable () async throws -> FeedPage = { [weak self] in
            do {
                let page = try await source.fetchOlder(cursor: cursor, olderCursorKnown: known)
                await self?.arrivedAhead(page, cursor: cursor, id: id)
                return page
            } catch {
                await self?.failedAhead(error, id: id)
                throw error
            }
        }
        startingFetch = true
        let task = Task.immediate(operation: fetch)
        startingFetch = false
        fetchesAhead[id] = task
    }

    private func knownAhead(_ older: String?, of cursor: String) {
        carryOut(readAhead.known(older, of: cursor, backfill: machine, now: time.clock.now))
    }

    private func arrivedAhead(_ page: FeedPage, cursor: String, id: ReadAheadID) {
        carryOut(readAhead.arrived(page, cursor: cursor, id: id, backfill: machine, now: time.clock.now))
    }

    /// A page fetched ahead failed: a Retry-After in its answer holds back the older requests,
    /// and the feed machine learns it too, so the retry it shows is the one that will happen.
    private func failedAhead(_ error: any Error, id: ReadAheadID) {
        let wait = (error as? FeedError)?.retryAfter
        carryOut(readAhead.failed(id, retryAfter: wait, now: time.clock.now))
        guard let wait else { return }
        apply(.serverAskedToWait(.older, wait))
    }

    /// Waits, as the read-ahead says (``ReadAheadMachine/gather(after:committing:backfill:now:)``),
    /// for the pages fetched ahead right behind the older `page` about to be committed, whose
    /// older cursor is `next`, so that one transaction stores several.
    ///
    /// Much of a commit's cost is per transaction, not per row: SQLite's write-ahead log takes
    /// the B-trees' partly filled edge pages again at every commit (BENCHMARKS.md). One timer
    /// covers the whole wait, since a timer per arrival costs the event loop as much as the
    /// grouping saves.
    func gatherBackfill(after next: String, committing page: FeedPage) async {
        var step = readAhead.gather(after: next, committing: page, backfill: machine, now: time.clock.now)
        var timer: Task<Void, Never>?
        defer { timer?.cancel() }
        while step != .commit {
            if case .waitUntil(let deadline) = step {
                let clock = time.clock
                timer = Task { [weak self] in
                    guard (try? await clock.sleep(until: deadline, tolerance: nil)) != nil else { return }
                    await self?.commitDelayElapsed()
                }
            }
            // Woken when a page fetched ahead arrives or fails, the read-ahead is dropped, or the
            // deadline passes: the read-ahead looks again after any of them.
            await withCheckedContinuation { arrivalWaiter = $0 }
            step = readAhead.lookAgain(now: time.clock.now)
        }
    }

    private func commitDelayElapsed() {
        carryOut(readAhead.commitDelayElapsed())
    }

    /// Answers an older request whose page was committed with the one before it.
    func answer(_ request: FetchRequest, committed outcome: CommitOutcome) {
        if requests[.older]?.token == request.token { requests[.older] = nil }
        // Cancelled meanwhile (offline, stop): the outcome stays for the request that asks again.
        guard !stopped, machine.isRunning(request.token, in: .older), let cursor = request.cursor else { return }
        readAhead.tookCommitted(cursor)
        apply(.committed(.older, request.token, outcome))
        carryOut(readAhead.handled(.older, continued: requests[.older] != nil))
    }
}
