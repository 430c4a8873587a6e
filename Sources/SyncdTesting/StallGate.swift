/// Holds stalled requests until the server stops or their stall limit passes.
///
/// Stalls must outlive any client timeout, yet graceful shutdown waits for in-flight requests,
/// so every stall needs a way out that the server controls.
actor StallGate {
    private var isOpen = false
    private var waiters: [Int: CheckedContinuation<Void, Never>] = [:]
    private var nextID = 0

    /// Suspends until `open()` is called or `limit` has passed.
    func wait(upTo limit: Duration) async {
        guard !isOpen else { return }
        let id = nextID
        nextID += 1
        let timer = Task { [weak self] in
            try? await Task.sleep(for: limit)
            await self?.release(id)
        }
        await withCheckedContinuation { continuation in
            waiters[id] = continuation
        }
        timer.cancel()
    }

    /// Releases every stalled request, now and later.
    func open() {
        isOpen = true
        for continuation in waiters.values { continuation.resume() }
        waiters.removeAll()
    }

    /// How many requests are stalled right now.
    var stalledCount: Int { waiters.count }

    private func release(_ id: Int) {
        waiters.removeValue(forKey: id)?.resume()
    }
}
