import Clocks
import ConnectivityPolicy
import NetlinkMonitor
import Testing

/// The settle driver on a test clock: no kernel, no real time.
@Suite struct ConnectivityMonitorTests {
    let online = NetworkSnapshot(
        links: [LinkInfo(index: 2, name: "eth0", flags: [.up, .running, .lowerUp], operState: .up)],
        addresses: [AddressInfo(linkIndex: 2, address: IPAddress("192.0.2.10")!, prefixLength: 24, scope: .universe, flags: [])],
        routes: [RouteInfo(destination: .defaultRoute(.ipv4), nextHops: [NextHop(linkIndex: 2)])]
    )
    var offline: NetworkSnapshot {
        NetworkSnapshot(links: [LinkInfo(index: 2, name: "eth0", flags: [.up], operState: .lowerLayerDown)], addresses: online.addresses, routes: online.routes)
    }

    @Test func offlineAtOnceOnlineAfterSettleAndOnlyOnce() async throws {
        let clock = TestClock()
        let (snapshots, feed) = AsyncStream<NetworkSnapshot>.makeStream()
        var verdicts = ConnectivityMonitor.verdicts(from: snapshots, settle: .seconds(2), clock: clock).makeAsyncIterator()

        feed.yield(online)
        #expect(await verdicts.next()?.isOnline == true)
        feed.yield(offline)
        #expect(await verdicts.next() == .offline(.noCarrier))

        // Flap: online, offline, online within the settle period; none of the onlines is published.
        feed.yield(online)
        await clock.advance(by: .seconds(1))
        feed.yield(offline)
        feed.yield(online)
        await clock.advance(by: .seconds(1))
        feed.yield(offline)
        feed.yield(online)
        await clock.advance(by: .milliseconds(1999))
        // Only after a full quiet settle period does the online verdict come out.
        await clock.advance(by: .milliseconds(1))
        #expect(await verdicts.next()?.isOnline == true)
        feed.finish()
        #expect(await verdicts.next() == nil)
    }
}
