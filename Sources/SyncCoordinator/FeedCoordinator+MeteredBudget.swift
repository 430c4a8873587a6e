import Foundation
import Logging
@_spi(StateMachine) import SyncCore

// The metered budget: the bytes the source received over metered links, charged per day.
extension FeedCoordinator {
    /// Charges what the source received since the last charge to today's usage while the host
    /// is reached over a metered link, tells the machine, and records it in the store.
    func chargeMeteredBytes() {
        let total = source.bytesReceived
        let grown = total - bytesCharged
        bytesCharged = total
        guard grown > 0, let budget = machine.configuration.meteredBudget, machine.isOnMeteredLink else { return }
        let usage = (machine.meteredUsage ?? MeteredUsage(day: budget.day(of: time.now), bytes: 0)).adding(grown, at: time.now, budget: budget)
        apply(.meteredUsage(usage))
        let store = self.store, feed = self.feed, logger = self.logger, previous = usageWrite
        usageWrite = Task {
            await previous?.value
            do {
                try await store.recordMeteredUsage(feed: feed, usage)
            } catch {
                logger.warning("metered usage not recorded: a restart counts today's bytes from the last recorded", metadata: ["error": "\(error)"])
            }
        }
    }

    /// With a budget: at each local midnight, tells the machine that a new day began, so loads
    /// the spent budget held back resume.
    func startBudgetDays() {
        guard let budget = machine.configuration.meteredBudget else { return }
        let clock = time.clock
        background.append(Task { [weak self] in
            while !Task.isCancelled {
                guard let now = self?.time.now else { return }
                let wait = Duration.seconds(budget.nextDay(after: now).timeIntervalSince(now))
                do { try await clock.sleep(until: clock.now.advanced(by: max(wait, .milliseconds(1))), tolerance: nil) } catch { return }
                guard let self else { return }
                await self.newBudgetDay(budget)
            }
        })
    }

    private func newBudgetDay(_ budget: MeteredBudget) {
        let today = budget.day(of: time.now)
        guard machine.meteredUsage?.day != today else { return }
        logger.info("metered budget renewed", metadata: ["day": "\(today)", "previous": "\(machine.meteredUsage.map { ByteCount.describe($0.bytes) } ?? "0 B")"])
        apply(.meteredUsage(MeteredUsage(day: today, bytes: 0)))
    }
}
