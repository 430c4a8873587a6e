import AsyncBroadcast
import ConnectivityCheck
import ConnectivityPolicy
import EventLoopClock
import Logging
import NameResolution
import NetlinkMonitor
import Reachability
import ServiceLifecycle

/// The internet verdict, judged once from the monitor's snapshots and fanned out to everyone who
/// shows or follows it (the status reporter, ``InternetFollower``); the broadcast finishes when
/// the verdicts end or at graceful shutdown.
struct InternetVerdicts: Service {
    let verdicts: AsyncStream<Verdict>
    let broadcast: Broadcast<Verdict>

    /// Verdicts for the internet at large, settled for `settle` before going online.
    init(monitor: NetlinkMonitor, settle: Duration, clock: EventLoopClock) {
        verdicts = ConnectivityMonitor.verdicts(from: monitor, for: .internet, settle: settle, clock: clock)
        broadcast = Broadcast(bufferingNewest: 16)
    }

    func run() async {
        // Not `cancelOnGracefulShutdown()`: its merge deadlocked on its own lock when the group
        // cancelled this task (a part failing at start), and syncd never exited.
        let (verdicts, broadcast) = (verdicts, broadcast)
        await cancelWhenGracefulShutdown {
            for await verdict in verdicts { broadcast.publish(verdict) }
        }
        broadcast.finish()
    }
}

/// Acts on the internet verdict: on every change names are resolved again (a new network may
/// have a new resolver and new answers) and, when online, the connectivity check runs; the
/// check also runs at its interval. Its answer limits every feed (a portal) or clears that.
struct InternetFollower: Service {
    let changes: AsyncStream<Verdict>
    let resolver: NameResolver
    let checker: ConnectivityChecker?
    let reachabilities: [HostReachability<EventLoopClock>]
    let clock: EventLoopClock
    let logger: Logger

    func run() async {
        await cancelWhenGracefulShutdown { await follow() }
    }

    private func follow() async {
        let (triggers, trigger) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                var previous: Verdict?
                for await verdict in changes {
                    if previous != nil { resolver.reresolve() }
                    previous = verdict
                    if verdict.isOnline { trigger.yield() }
                }
                trigger.finish()
            }
            if let checker {
                group.addTask {
                    while !Task.isCancelled {
                        do { try await clock.sleep(for: checker.configuration.interval) } catch { break }
                        trigger.yield()
                    }
                }
                group.addTask {
                    for await _ in triggers { await check(checker) }
                }
            }
            await group.next()
            group.cancelAll()
        }
    }

    private func check(_ checker: ConnectivityChecker) async {
        let result = await checker.check()
        logger.debug("connectivity check", metadata: ["result": "\(result)"])
        let portal: String?
        switch result {
        case .portal(let url):
            logger.warning("captive portal: sign in to the network", metadata: ["portal": "\(url.absoluteString)"])
            portal = url.absoluteString
        case .full:
            portal = nil
        case .noAnswer(let reason):
            // The check's own server may be down: each feed's requests judge its server.
            logger.notice("connectivity check got no answer", metadata: ["reason": "\(reason)"])
            portal = nil
        }
        for reachability in reachabilities { reachability.portalChanged(portal) }
    }
}
