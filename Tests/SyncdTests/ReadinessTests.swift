import Foundation
import SyncControl
import Testing
import TestSupport

/// READY=1 is a promise: clients can connect and see a verdict. A second instance on the same
/// socket must not make it.
@Suite struct ReadinessTests {
    /// An sd_notify endpoint: a datagram socket whose messages a test can wait for.
    final class NotifySocket: Sendable {
        let path: String
        private let fd: Int32

        init(path: String) throws {
            self.path = path
            fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            var address = sockaddr_un()
            address.sun_family = sa_family_t(AF_UNIX)
            withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(path.utf8) + [0]) }
            let bound = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
            }
            guard bound == 0 else { throw CommandFailed(command: ["bind", path], status: errno, stderr: String(cString: strerror(errno))) }
            var timeout = timeval(tv_sec: 0, tv_usec: 200_000)
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        }

        deinit { close(fd) }

        /// Messages received until one contains `assignment` (returned last) or `timeout` passes.
        func messages(until assignment: String, timeout: Duration) async throws -> [String] {
            let deadline = ContinuousClock.now + timeout
            return try await onDedicatedThread { [fd] in
                var received: [String] = []
                var buffer = [UInt8](repeating: 0, count: 4096)
                while ContinuousClock.now < deadline {
                    let count = recv(fd, &buffer, buffer.count, 0)
                    guard count > 0 else { continue }
                    let message = String(decoding: buffer[..<count], as: UTF8.self)
                    received.append(message)
                    if message.split(separator: "\n").contains(Substring(assignment)) { break }
                }
                return received
            }
        }
    }

    static func configuration(in directory: TemporaryDirectory, store: String) -> String {
        SyncdConfig(
            store: directory.file(store),
            controlSocket: directory.file("io.syncd"),
            logLevel: "debug",
            feeds: [SyncdConfig.Feed(name: "home", url: "http://127.0.0.1:9/feeds/home")]
        ).toml
    }

    /// `GetStatus` from `daemon`, bounded; a failure names the moment and carries syncd's output.
    static func status(from client: SyncControlClient, of daemon: ChildProcess, _ moment: String) async throws -> ControlStatus {
        try await answer(from: client, of: daemon, "GetStatus \(moment)") { try await $0.status() }
    }

    /// ``SyncControlClient/bounded(_:timeout:_:)``, whose error, when no answer comes, also
    /// carries syncd's output (an answer that is an error is rethrown as it is).
    static func answer<T: Sendable>(
        from client: SyncControlClient, of daemon: ChildProcess, _ what: String,
        _ call: @escaping @Sendable (SyncControlClient) async throws -> T
    ) async throws -> T {
        do {
            return try await client.bounded(what, call)
        } catch let error as WaitTimedOut {
            throw WaitTimedOut(description: "\(error.description); syncd's output:\n\(daemon.output)")
        }
    }

    /// The time limits here are above the sum of the waits inside, each a hang guard or two.
    @Test(.timeLimit(.minutes(4))) func readyOnlyWhenServingAndASecondInstanceNeverIs() async throws {
        let directory = try TemporaryDirectory(prefix: "syncd-ready")
        let syncd = try BuildProducts.path("syncd")
        try Self.configuration(in: directory, store: "a.sqlite").write(toFile: directory.file("a.toml"), atomically: true, encoding: .utf8)
        try Self.configuration(in: directory, store: "b.sqlite").write(toFile: directory.file("b.toml"), atomically: true, encoding: .utf8)

        let notifyA = try NotifySocket(path: directory.file("notify-a"))
        let first = try ChildProcess(["NOTIFY_SOCKET=\(notifyA.path)", syncd, "--config", directory.file("a.toml")], logPath: directory.file("a.log"))
        let messagesA = try await notifyA.messages(until: "READY=1", timeout: hangGuard * 2)
        #expect(messagesA.last?.contains("READY=1") == true, "first instance never became ready: \(first.output)")
        // The moment READY=1 is read, the socket answers, with a connectivity verdict.
        let client = SyncControlClient(socketPath: directory.file("io.syncd"))
        let status = try await Self.status(from: client, of: first, "right after READY=1")
        #expect(status.connectivity.state != .unknown && status.feeds.allSatisfy { $0.connectivity != nil }, "READY=1 before the first verdict: \(status.connectivity)")
        #expect(status.feeds.map(\.name) == ["home"])

        let notifyB = try NotifySocket(path: directory.file("notify-b"))
        let second = try ChildProcess(["NOTIFY_SOCKET=\(notifyB.path)", syncd, "--config", directory.file("b.toml")], logPath: directory.file("b.log"))
        // It fails on its own; SIGKILL only ends one that did not within the wait (and fails the
        // test: its status is then the kill's, and its output lacks the reason).
        try? await waitUntil("the second instance exits", timeout: hangGuard * 2, interval: .milliseconds(50)) { !second.isRunning }
        let exitStatus = await second.stop(signal: SIGKILL)
        #expect(exitStatus != 0, "the second instance must fail")
        #expect(second.output.contains("another service is listening on \(directory.file("io.syncd"))"), "\(second.output)")
        let messagesB = try await notifyB.messages(until: "READY=1", timeout: .seconds(1))
        #expect(!messagesB.contains { $0.split(separator: "\n").contains("READY=1") }, "second instance reported ready: \(messagesB)")

        // The first instance still serves: the second neither stole nor removed its socket.
        #expect(try await Self.status(from: client, of: first, "after the second instance failed").version == status.version)
        #expect(first.isRunning)
        await first.stop()
    }

    /// LoadOlder answers the feeds that started loading, not the ones it was asked about: a
    /// feed whose first load cannot succeed (nothing listens at its URL) starts nothing.
    @Test(.timeLimit(.minutes(3))) func loadOlderAnswersOnlyFeedsThatStarted() async throws {
        let directory = try TemporaryDirectory(prefix: "syncd-older")
        try Self.configuration(in: directory, store: "a.sqlite").write(toFile: directory.file("a.toml"), atomically: true, encoding: .utf8)
        let notify = try NotifySocket(path: directory.file("notify"))
        let daemon = try ChildProcess(["NOTIFY_SOCKET=\(notify.path)", try BuildProducts.path("syncd"), "--config", directory.file("a.toml")], logPath: directory.file("a.log"))
        let messages = try await notify.messages(until: "READY=1", timeout: hangGuard * 2)
        #expect(messages.last?.contains("READY=1") == true, "\(daemon.output)")
        let client = SyncControlClient(socketPath: directory.file("io.syncd"))
        #expect(try await Self.answer(from: client, of: daemon, "LoadOlder") { try await $0.loadOlder() } == [], "nothing can load older before a first load")
        await #expect(throws: SyncControlError.notReady(feed: "home", reason: "the first load has not succeeded yet")) {
            try await Self.answer(from: client, of: daemon, "LoadOlder(home)") { try await $0.loadOlder(feed: "home") }
        }
        await daemon.stop()
    }

    /// An open that takes long (an upgrade of an old store, or another process holding its lock)
    /// keeps systemd's start timeout at bay: every second until the store is open, syncd extends
    /// it and says why. Here Python's sqlite3 holds the store's write lock until the test has heard
    /// two extensions, however long syncd takes to reach its store on a loaded machine.
    @Test(.timeLimit(.minutes(4))) func aSlowOpenExtendsTheStartTimeout() async throws {
        let directory = try TemporaryDirectory(prefix: "syncd-slow-open")
        try Self.configuration(in: directory, store: "held.sqlite").write(toFile: directory.file("held.toml"), atomically: true, encoding: .utf8)
        let release = directory.file("release")
        let holder = try ChildProcess(["python3", "-c", """
            import os, sqlite3, sys, time
            db = sqlite3.connect(sys.argv[1], isolation_level=None)
            db.execute('PRAGMA journal_mode = WAL')
            db.execute('BEGIN EXCLUSIVE')
            print('held', flush=True)
            deadline = time.monotonic() + 600
            while not os.path.exists(sys.argv[2]) and time.monotonic() < deadline:
                time.sleep(0.01)
            db.execute('COMMIT')
            print('released', flush=True)
            """, directory.file("held.sqlite"), release], logPath: directory.file("holder.log"))
        // The holder lets go by itself only after ten minutes, far past every wait below: until the
        // test releases it, the store stays held however slowly syncd comes.
        try? await waitUntil("the holder holds the store's lock", interval: .milliseconds(20)) { holder.output.contains("held") }
        try #require(holder.output.contains("held"), "the lock was never taken: \(holder.output)")

        let notify = try NotifySocket(path: directory.file("notify"))
        let daemon = try ChildProcess(["NOTIFY_SOCKET=\(notify.path)", try BuildProducts.path("syncd"), "--config", directory.file("held.toml")], logPath: directory.file("held.log"))
        var messages: [String] = []
        // The first extension comes once syncd has started and met the lock; the second a second later.
        messages += try await notify.messages(until: "EXTEND_TIMEOUT_USEC=10000000", timeout: hangGuard * 2)
        messages += try await notify.messages(until: "EXTEND_TIMEOUT_USEC=10000000", timeout: hangGuard)
        let extensions = messages.filter { $0.contains("EXTEND_TIMEOUT_USEC=") }
        #expect(extensions.count == 2, "\(messages) \(daemon.output)")
        #expect(extensions.allSatisfy { $0.contains("STATUS=opening the store") }, "\(extensions)")
        #expect(!messages.contains { $0.split(separator: "\n").contains("READY=1") }, "ready while the store was held: \(messages)")

        _ = FileManager.default.createFile(atPath: release, contents: nil)
        let rest = try await notify.messages(until: "READY=1", timeout: hangGuard * 2)
        #expect(rest.last?.contains("READY=1") == true, "\(rest) \(daemon.output)")
        // syncd can be ready before the holder has printed what it did after letting go.
        try? await waitUntil("the holder says it released the lock") { holder.output.contains("released") }
        #expect(holder.output.contains("released"), "\(holder.output)")
        await daemon.stop()
        _ = await holder.stop()
    }
}
