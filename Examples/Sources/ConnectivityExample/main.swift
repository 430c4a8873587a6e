import ConnectivityPolicy
import NetlinkMonitor

let monitor = NetlinkMonitor()
try await monitor.start()
let host = Destination.addresses([IPAddress("192.0.2.10")!])
for await verdict in ConnectivityMonitor.verdicts(from: monitor, for: host, settle: .seconds(2)) {
    print(verdict)   // "online via wlan0 (ipv4)", "offline: no carrier", …
}
await monitor.stop()
