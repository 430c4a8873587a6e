import Foundation
import Synchronization
import SyncDaemon
import Testing
import TestSupport

/// sd_notify against a reader that stopped reading: the kernel queues a few datagrams for it
/// (`net.unix.max_dgram_qlen`), and a blocking send after that waited for good on the thread that
/// made it. In syncd that thread ran the control socket's tasks too: GetStatus went unanswered
/// once a dozen status lines had queued (ReadinessTests' first daemon, whose notify socket the
/// test stops reading at READY=1, timed out that way in loaded full runs).
@Suite struct SystemdNotifierTests {
    /// What a sending thread got back, call by call.
    final class Sent: Sendable {
        private let results = Mutex<[Bool]>([])
        func append(_ result: Bool) { results.withLock { $0.append(result) } }
        var all: [Bool] { results.withLock { $0 } }
    }

    @Test func aReaderThatStopsReadingNeverHoldsTheSender() async throws {
        let directory = try TemporaryDirectory(prefix: "syncd-notify")
        let reader = try ReadinessTests.NotifySocket(path: directory.file("notify"))
        let notifier = SystemdNotifier(environment: ["NOTIFY_SOCKET": reader.path])
        let count = 100
        let sent = Sent()
        // A thread of its own: a send that blocks holds it, not the test, which then fails below.
        Thread { for index in 0..<count { sent.append(notifier.notify("STATUS=\(index)")) } }.start()
        try await waitUntil("\(count) notifications are sent to a socket nobody reads") { sent.all.count == count }

        let results = sent.all
        #expect(results.first == true, "the first notification fits the queue")
        #expect(results.contains(false), "a queue nobody empties refuses some: \(results.filter { $0 }.count) of \(count) accepted")
        // What was accepted arrives, oldest first; what did not fit is gone.
        let messages = try await reader.messages(until: "STATUS=\(count - 1)", timeout: .seconds(1))
        #expect(messages.first == "STATUS=0")
        #expect(messages.count == results.filter { $0 }.count, "\(messages)")
    }
}
