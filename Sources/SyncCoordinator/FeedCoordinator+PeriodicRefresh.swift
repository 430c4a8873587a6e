@_spi(StateMachine) import SyncCore

// The periodic refresh, on a fixed grid of the injected clock.
extension FeedCoordinator {
    func startPeriodicRefresh() {
        guard let interval = machine.configuration.refreshInterval, interval > .zero else { return }
        let clock = time.clock
        let origin = clock.now
        background.append(Task { [weak self] in
            // Deadlines on a fixed grid: a slow refresh does not push later ones back.
            var tick = 1
            while !Task.isCancelled {
                do { try await clock.sleep(until: origin.advanced(by: interval * tick), tolerance: nil) } catch { return }
                guard let self else { return }
                await self.periodicRefresh()
                tick += 1
            }
        })
    }

    private func periodicRefresh() { apply(.periodicRefresh) }
}
