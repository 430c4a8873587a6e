import ServiceLifecycle

/// Adds new items to growing feeds as time passes, and on shutdown tells the request hook, so
/// requests it holds do not hold up the HTTP server's graceful shutdown.
///
/// Listed after the HTTP server in the service group, so it is shut down first.
struct FeedGrowthService: Service {
    let state: FeedServerState
    let hook: (any FeedRequestHook)?
    let interval: Duration

    func run() async throws {
        try? await cancelWhenGracefulShutdown {
            var last = ContinuousClock.now
            while true {
                try await Task.sleep(for: interval)
                let now = ContinuousClock.now
                let elapsed = now - last
                last = now
                let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
                await state.tick(elapsedSeconds: seconds)
            }
        }
        await hook?.serverStopping()
    }
}
