import ConnectivityPolicy
import NetlinkMonitor

let monitor = NetlinkMonitor()
try await monitor.start()
let banner = Task(executorPreference: monitor.taskExecutor) {
    for await verdict in ConnectivityMonitor.verdicts(from: monitor, settle: .zero) {
        print(verdict)   // brief work only: the monitor reads no notifications meanwhile
    }
}
await banner.value   // until the monitor stops
