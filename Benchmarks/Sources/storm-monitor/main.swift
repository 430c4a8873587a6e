// The netlink monitor alone in a process, for the route-storm benchmark: the benchmark reads this
// process's CPU time and peak RSS from /proc exactly as it reads `ip monitor route`'s.
//
// usage: storm-monitor NAMESPACE_PATH
// Prints `ready`, then answers each `check` line on stdin with one JSON line; exits at EOF.

import BenchmarkSupport
import ConnectivityPolicy
import Foundation
import NetlinkMonitor
import Synchronization

/// The latest verdict, written by the consumer task and read when answering `check`.
final class LatestVerdict: Sendable {
    let value = Mutex<Verdict?>(nil)
}

guard CommandLine.arguments.count == 2 else {
    FileHandle.standardError.write(Data("usage: storm-monitor NAMESPACE_PATH\n".utf8))
    exit(2)
}
let namespacePath = CommandLine.arguments[1]
let monitor = NetlinkMonitor(configuration: .init(networkNamespacePath: namespacePath))
try await monitor.start()

// A real client consumes verdicts, so their computation is part of the monitor's cost.
let latest = LatestVerdict()
// Detached: top-level code runs on the main actor, which then blocks in readLine(); a task that
// inherited it would run only between checks, so no verdict (and no kernel lookup for it) would
// be computed during the storm.
let consumer = Task.detached {
    for await verdict in ConnectivityMonitor.verdicts(from: monitor, for: .addresses([StormProtocol.host]), settle: .zero) {
        latest.value.withLock { $0 = verdict }
    }
}

/// Unbuffered writes: the benchmark waits for each answer line.
func reply(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

// The storm starts only once the kernel's route to the host is tracked, as in syncd.
await monitor.track([StormProtocol.host])
reply(StormProtocol.ready)
let encoder = JSONEncoder()
while let line = readLine() {
    guard line == StormProtocol.check else { continue }
    let kernel = try await NetlinkMonitor.dumpSnapshot(networkNamespacePath: namespacePath, lookingUp: [StormProtocol.host])
    let snapshot = monitor.snapshot
    let answer = StormCheck(
        snapshotMatchesKernel: snapshot == kernel,
        verdict: latest.value.withLock { $0 },
        kernelVerdict: ConnectivityPolicy.evaluate(kernel, for: .addresses([StormProtocol.host])),
        monitorRoutes: snapshot.routes.count,
        kernelRoutes: kernel.routes.count,
        statistics: monitor.statistics
    )
    reply(String(decoding: try encoder.encode(answer), as: UTF8.self))
}
consumer.cancel()
await monitor.stop()
