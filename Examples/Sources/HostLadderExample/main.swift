import ConnectivityPolicy
import NameResolution
import NetlinkMonitor
import Reachability

let monitor = NetlinkMonitor()
try await monitor.start()
let resolver = NameResolver()
let host = HostReachability(destination: Destination(urlHost: "mastodon.example"), monitor: monitor, resolver: resolver)
try await withThrowingDiscardingTaskGroup { group in
    group.addTask { try await resolver.run() }   // until cancelled
    group.addTask { await host.run() }
    for await verdict in host.verdicts() {
        print(verdict)   // "limited: dns-failed (mastodon.example: …)", "online via wlan0 (ipv4)", …
    }
    group.cancelAll()
}
await monitor.stop()
