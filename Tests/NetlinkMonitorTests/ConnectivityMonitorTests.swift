import ConnectivityPolicy
import NetlinkMonitor
import Testing
import TestSupport

/// The settle driver on a test clock: no kernel, no real time.
///
/// Alone the test takes milliseconds; in loaded full runs it took 11-39 s of real time, waiting
/// for its turns on the cooperative pool that every test of the run shares. The limit leaves
/// room for that.
@Suite(.timeLimit(.minutes(2))) struct ConnectivityMonitorTests {
    let online = NetworkSnapshot(
        links: [LinkInfo(index: 2, name: "eth0", flags: [.up, .running, .lowerUp], operState: .up)],
        addresses: [AddressInfo(linkIndex: 2, address: IPAddress("192.0.2.10")!, prefixLength: 24, scope: .universe, flags: [])],
        routes: [RouteInfo(destination: .defaultRoute(.ipv4), nextHops: [NextHop(linkIndex: 2)])]
    )
    var offline: NetworkSnapshot {
        NetworkSnapshot(links: [LinkInfo(index: 2, name: "eth0", flags: [.up], operState: .lowerLayerDown)], addresses: online.addresses, routes: online.routes)
    }

    @Test func offlineAtOnceOnlineAfterSettleAndOnlyOnce() async throws {
        let clock = ManualClock()
        let (snapshots, feed) = AsyncStream<NetworkSnapshot>.makeStream()
        var verdicts = ConnectivityMonitor.verdicts(from: snapshots, settle: .seconds(2), clock: clock).makeAsyncIterator()

        feed.yield(online)
        #expect(await verdicts.next()?.isOnline == true)
        // Offline needs no time at all: the clock is never advanced here.
        feed.yield(offline)
        #expect(await verdicts.next() == .offline(.noCarrier))

        // A hundred flaps with no time passing: none of the onlines may come out.
        for _ in 0..<100 {
            feed.yield(online)
            feed.yield(offline)
        }
        feed.yield(online)
        let start = clock.now
        // Time moves on in steps of a quarter of the settle period, and only while a settle timer
        // sleeps, until the settled online arrives; however the tasks interleave, it cannot
        // arrive before a full settle period after the last online. Each step lets the other
        // tasks run (20 yields), and in a full run under load the pool is shared by hundreds of
        // tests: steps of 100 ms took up to 3 s each, and the advancer, bounded by the hang
        // guard, gave up at 1 s of test time. So the steps are few, and the advancer's bound is
        // the suite's time limit less a margin: a cancelled advancer ends the iteration below
        // too, when the suite's limit cancels a test that waits for good.
        let advancer = Task {
            try? await clock.advance(by: .milliseconds(500), eachTimeAsleepUntil: "the test has its verdict", timeout: .seconds(110)) { false }
        }
        let next = await verdicts.next()
        let elapsed = start.duration(to: clock.now)
        advancer.cancel()
        #expect(next?.isOnline == true, "the flaps published \(String(describing: next)) before the settled online")
        #expect(elapsed >= .seconds(2), "online came out after \(elapsed), before the settle period")
        feed.finish()
        #expect(await verdicts.next() == nil)
    }
}
