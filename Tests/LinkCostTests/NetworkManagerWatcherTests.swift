import ConnectivityPolicy
import Foundation
import LinkCost
import Logging
import Testing
import TestSupport

/// The watcher against a real dbus-daemon and a stand-in NetworkManager in Python
/// (`Oracle/fake_networkmanager.py`), each test with a bus of its own.
@Suite(.enabled(
    if: NetworkManagerOracle.isAvailable || Privileges.isCI,
    "needs dbus-daemon, python3-dbus and python3-gi (under CI it runs and fails instead)"))
struct NetworkManagerWatcherTests {
    @Test func readsTheDevicesPresentAtStart() async throws {
        let log = RecordedLog()
        try await withNetworkManagerAndWatcher(devices: ["eth0": "2", "wwan0": "3"], log: log) { networkManager, watcher in
            try await waitForDevices(watcher, ["eth0": .no, "wwan0": .guessYes], "NetworkManager's two devices are read")
            #expect(watcher.devices["eth0"]?.cost == .unmetered)
            #expect(watcher.devices["wwan0"]?.cost == .metered)
            #expect(watcher.devices["wwan0"]?.description == "guess-yes")
            #expect(log.messages(at: .info).contains { $0.contains("NetworkManager is on the bus") }, "\(log.all)")
        }
    }

    /// The first reading is over only once every device's Metered is in: a caller that waited for
    /// it reads the whole map, never a part.
    @Test func theFirstReadingIsOverWithEveryDevicesCost() async throws {
        try await withNetworkManagerAndWatcher(devices: ["eth0": "2", "wwan0": "3", "usb0": "1"]) { _, watcher in
            #expect(await watcher.firstReading(within: hangGuard))
            #expect(watcher.devices == ["eth0": .no, "wwan0": .guessYes, "usb0": .yes])
            #expect(await watcher.firstReading(within: .zero), "over stays over while it runs")
        }
    }

    @Test func theFirstReadingWithoutABusIsOverAtOnceAndNeverWithoutARun() async throws {
        let directory = try TemporaryDirectory(prefix: "nm-nobus")
        let watcher = NetworkManagerWatcher(configuration: .init(busAddress: "unix:path=\(directory.file("nothing"))"))
        #expect(await !watcher.firstReading(within: .milliseconds(50)), "not running: nothing to wait for but the time")
        let waiting = BoundedTask { await watcher.firstReading(within: hangGuard) }
        let running = BoundedTask { try await watcher.run() }
        #expect(try await waiting.value("firstReading(within:) of a watcher whose bus is absent"))
        #expect(watcher.devices == [:])
        running.cancel()
        try await running.value("the watcher's run() after cancellation")
        #expect(await !watcher.firstReading(within: .milliseconds(50)), "a run that ended is over no more")
    }

    @Test func followsMeteredChanges() async throws {
        try await withNetworkManagerAndWatcher(devices: ["wlan0": "4"]) { networkManager, watcher in
            try await waitForDevices(watcher, ["wlan0": .guessNo], "wlan0 is read")
            // The stream starts with the map as it is, then follows; a slow reader skips to the newest.
            let updates = watcher.updates()
            let first = try await withHangGuard("the first map of a new updates stream") {
                var iterator = watcher.updates().makeAsyncIterator()
                return await iterator.next()
            }
            #expect(first == ["wlan0": .guessNo])
            try await networkManager.send("set wlan0 1")
            try await waitForDevices(watcher, ["wlan0": .yes], "wlan0's change to metered is seen")
            try await networkManager.send("set wlan0 0")
            try await waitForDevices(watcher, ["wlan0": .unknown], "wlan0's change to unknown is seen")
            let reached = try await withHangGuard("the updates stream reaches wlan0=unknown") {
                for await devices in updates where devices == ["wlan0": .unknown] { return true }
                return false
            }
            #expect(reached)
        }
    }

    @Test func followsDevicesAddedRemovedAndRenamed() async throws {
        try await withNetworkManagerAndWatcher(devices: ["eth0": "2"]) { networkManager, watcher in
            try await waitForDevices(watcher, ["eth0": .no], "eth0 is read")
            try await networkManager.send("add wwan0 1")
            try await waitForDevices(watcher, ["eth0": .no, "wwan0": .yes], "the added wwan0 is read")
            try await networkManager.send("remove eth0")
            try await waitForDevices(watcher, ["wwan0": .yes], "the removed eth0 is gone")
            try await networkManager.send("rename wwan0 wwan1")
            try await waitForDevices(watcher, ["wwan1": .yes], "wwan0's new name is seen")
        }
    }

    @Test func followsNetworkManagerLeavingAndComing() async throws {
        try await withTestBus { bus in
            let log = RecordedLog()
            try await withWatcher(on: bus, log: log) { watcher in
                try await waitUntil("the watcher logs that NetworkManager is not running") {
                    log.messages(at: .info).contains { $0.contains("NetworkManager is not running") }
                }
                #expect(watcher.devices == [:])
                let first = try await FakeNetworkManager.start(on: bus, devices: ["eth0": "2"])
                try await waitForDevices(watcher, ["eth0": .no], "the first NetworkManager's eth0 is read")
                try await first.quit()
                try await waitForDevices(watcher, [:], "the map is empty after NetworkManager left")
                #expect(log.messages(at: .info).contains { $0.contains("NetworkManager left the bus") }, "\(log.all)")
                let second = try await FakeNetworkManager.start(on: bus, devices: ["eth0": "1", "wwan0": "3"])
                try await waitForDevices(watcher, ["eth0": .yes, "wwan0": .guessYes], "the second NetworkManager's devices are read")
                await second.stop()
            }
            #expect(log.messages(at: .info).filter { $0.contains("NetworkManager is not running") }.count == 1, "\(log.all)")
        }
    }

    @Test func ignoresWrongTypesAndAbsurdNames() async throws {
        let log = RecordedLog()
        try await withNetworkManagerAndWatcher(devices: ["eth0": "2", "bad0": "s:yes", "mark0": "1"], log: log) { networkManager, watcher in
            try await waitForDevices(watcher, ["eth0": .no, "mark0": .yes], "the devices are read, bad0 without its string Metered")
            try await waitUntil("the watcher has read bad0 and ignored its Metered") {
                log.messages(at: .debug).contains { $0.contains("Metered") && $0.contains("type s") }
            }
            #expect(watcher.devices == ["eth0": .no, "mark0": .yes])

            try await networkManager.send("set eth0 s:yes")
            try await networkManager.send("set eth0 9")
            try await networkManager.send(#"add eth\x01 1"#)
            try await networkManager.send("add 0123456789abcdef 1")
            try await networkManager.send("add averyveryverylongname 1")
            try await networkManager.send("rename mark0 bad/name")
            try await networkManager.send("add abcdefghijklmno 4")
            // The last change comes after the others on the bus: once it is seen, so were they.
            try await waitForDevices(
                watcher, ["eth0": .no, "mark0": .yes, "abcdefghijklmno": .guessNo],
                "the 15-byte name is read, the changes before it ignored")
        }
        let ignored = log.messages(at: .debug).filter { $0.hasPrefix("ignoring") }
        #expect(ignored.contains { $0.contains("Metered") && $0.contains("type s") }, "\(log.all)")
        #expect(ignored.contains { $0.contains("Metered=9") }, "\(log.all)")
        #expect(ignored.filter { $0.contains("not a usable interface name") }.count == 4, "\(log.all)")
    }

    @Test func tracksAtMostTheConfiguredNumberOfDevices() async throws {
        let log = RecordedLog()
        try await withNetworkManagerAndWatcher(devices: ["eth0": "2", "eth1": "2", "eth2": "2"], maximumDevices: 2, log: log) { networkManager, watcher in
            // NetworkManager lists its devices in the order they came; the first two are kept.
            try await waitForDevices(watcher, ["eth0": .no, "eth1": .no], "the first two devices are read")
            #expect(log.messages(at: .debug).contains { $0.contains("beyond 2") }, "\(log.all)")
            try await networkManager.send("add wwan0 1")
            try await networkManager.send("set eth0 1")
            try await waitForDevices(watcher, ["eth0": .yes, "eth1": .no], "eth0's change, after wwan0 was added, is seen")
        }
    }

    @Test func runReturnsWhenCancelledAndLetsGoOfTheBus() async throws {
        try await withTestBus { bus in
            let networkManager = try await FakeNetworkManager.start(on: bus, devices: ["eth0": "2"])
            let watcher = NetworkManagerWatcher(configuration: .init(busAddress: bus.address), logger: RecordedLog().logger)
            let running = BoundedTask { try await watcher.run() }
            do {
                try await waitForDevices(watcher, ["eth0": .no], "eth0 is read")
                let thread = try #require(watcher.threadID)
                #expect(try await busClients(bus).contains(getpid()))
                running.cancel()
                try await running.value("the watcher's run() after cancellation")
                #expect(watcher.devices == [:])
                #expect(watcher.threadID == nil)
                #expect(try await ProcessThreads.waitUntilGone(thread), "the bus thread \(thread) has ended")
                try await waitUntil("the dbus-daemon has dropped the watcher's connection") {
                    try await !busClients(bus).contains(getpid())
                }
                // Streams asked for after the run end at once.
                let after = try await withHangGuard("an updates stream of a stopped watcher ends") {
                    var values: [[String: NetworkManagerMetered]] = []
                    for await devices in watcher.updates() { values.append(devices) }
                    return values
                }
                #expect(after.allSatisfy { $0.isEmpty })
            } catch {
                running.cancel()
                _ = try? await running.result("the watcher's run() after cancellation")
                throw error
            }
            await networkManager.stop()
            let status = await bus.stop()
            #expect(status != 128 + SIGKILL, "dbus-daemon stopped on SIGTERM")
        }
    }

    @Test func runCancelledBeforeItStartsReturns() async throws {
        try await withTestBus { bus in
            let watcher = NetworkManagerWatcher(configuration: .init(busAddress: bus.address), logger: RecordedLog().logger)
            let running = BoundedTask {
                withUnsafeCurrentTask { $0?.cancel() }
                try await watcher.run()
            }
            try await running.value("the watcher's run() in a cancelled task")
            #expect(watcher.devices == [:])
        }
    }

    @Test func busWhereNothingListensIsNotAnError() async throws {
        let directory = try TemporaryDirectory(prefix: "nm-nobus")
        let log = RecordedLog()
        let watcher = NetworkManagerWatcher(
            configuration: .init(busAddress: "unix:path=\(directory.file("nothing"))"), logger: log.logger)
        try await whileRunning(watcher) { watcher, running in
            try await waitUntil("the watcher logs that it cannot connect") {
                log.messages(at: .info).contains { $0.contains("cannot connect") }
            }
            #expect(watcher.devices == [:])
            let first = try await withHangGuard("the first map of the updates stream") {
                var iterator = watcher.updates().makeAsyncIterator()
                return await iterator.next()
            }
            #expect(first == [:])
            #expect(!running.hasEnded, "run() waits for cancellation")
            await #expect(throws: NetworkManagerWatcher.Failure.self, "a second run() at the same time") {
                try await watcher.run()
            }
        }
        #expect(log.messages(at: .info).filter { $0.contains("cannot connect") }.count == 1, "\(log.all)")
        #expect(log.messages(at: .error).isEmpty, "\(log.all)")
    }

    /// The system bus of whatever host runs the tests: none (a container), one without NetworkManager, or
    /// a real NetworkManager, which is only read (calls never activate it). Each is fine; run() must say
    /// which and return when cancelled.
    @Test func systemBusOfThisHostIsHandled() async throws {
        let log = RecordedLog()
        let watcher = NetworkManagerWatcher(configuration: .init(), logger: log.logger)
        let outcomes = ["cannot connect", "NetworkManager is not running", "NetworkManager is on the bus", "did not list its devices"]
        try await whileRunning(watcher) { _, _ in
            try await waitUntil("the watcher logs what it found on the system bus") {
                log.messages(at: .info).contains { message in outcomes.contains { message.contains($0) } }
            }
        }
        #expect(log.messages(at: .error).isEmpty, "\(log.all)")
    }

    @Test func idleBusThreadDoesNotWake() async throws {
        try await withNetworkManagerAndWatcher(devices: ["eth0": "2", "wwan0": "3"]) { networkManager, watcher in
            try await waitForDevices(watcher, ["eth0": .no, "wwan0": .guessYes], "the devices are read")
            let thread = try #require(watcher.threadID)
            try await waitUntil("the bus thread sleeps") { threadState(thread) == "S" }
            let before = try #require(voluntarySwitches(thread))
            // A quiet period with no bus traffic; what is counted is wake-ups, not time.
            try await Task.sleep(for: .seconds(2))
            let after = try #require(voluntarySwitches(thread))
            #expect(after - before <= 1, "the bus thread woke \(after - before) times with nothing on the bus")
        }
    }
}

// MARK: Helpers

/// A private bus with the fake NetworkManager holding `devices`, and a watcher on that bus while
/// `body` runs; each stopped on every path (the watcher first, then the fake, then the bus).
private func withNetworkManagerAndWatcher<T: Sendable>(
    devices: KeyValuePairs<String, String>,
    maximumDevices: Int = NetworkManagerWatcher.Configuration().maximumDevices,
    log: RecordedLog = RecordedLog(),
    _ body: (FakeNetworkManager, NetworkManagerWatcher) async throws -> T
) async throws -> T {
    try await withTestBus { bus in
        let networkManager = try await FakeNetworkManager.start(on: bus, devices: devices)
        do {
            let result = try await withWatcher(on: bus, maximumDevices: maximumDevices, log: log) { try await body(networkManager, $0) }
            await networkManager.stop()
            return result
        } catch {
            await networkManager.stop()
            throw error
        }
    }
}

/// Runs a watcher on `bus` while `body` runs, then cancels it and waits (bounded) for `run()` to return,
/// on every path.
private func withWatcher<T: Sendable>(
    on bus: TestBus, maximumDevices: Int = NetworkManagerWatcher.Configuration().maximumDevices,
    log: RecordedLog = RecordedLog(), _ body: (NetworkManagerWatcher) async throws -> T
) async throws -> T {
    let configuration = NetworkManagerWatcher.Configuration(busAddress: bus.address, maximumDevices: maximumDevices)
    return try await whileRunning(NetworkManagerWatcher(configuration: configuration, logger: log.logger)) { watcher, _ in
        try await body(watcher)
    }
}

/// Runs `watcher` while `body` runs (which also gets the run, to see whether it has ended), then
/// cancels it and waits (bounded) for `run()` to return, on every path.
private func whileRunning<T: Sendable>(
    _ watcher: NetworkManagerWatcher, _ body: (NetworkManagerWatcher, BoundedTask<Void>) async throws -> T
) async throws -> T {
    try await whileRunning("the watcher's run() after cancellation", { try await watcher.run() }) { running in
        try await body(watcher, running)
    }
}

/// Waits (bounded) until the watcher's map is `expected`; the failure says what it was instead.
private func waitForDevices(
    _ watcher: NetworkManagerWatcher, _ expected: [String: NetworkManagerMetered], _ what: String
) async throws {
    do {
        try await waitUntil("\(what) (map \(expected))") { watcher.devices == expected }
    } catch let error as WaitTimedOut {
        throw WaitTimedOut(description: "\(error.description); the map is \(watcher.devices)")
    }
}

/// The process ids of the bus's clients, as the bus itself says (`GetConnectionUnixProcessID`).
private func busClients(_ bus: TestBus) async throws -> Set<Int32> {
    let script = """
        import sys, dbus
        bus = dbus.bus.BusConnection(sys.argv[1])
        driver = bus.get_object("org.freedesktop.DBus", "/org/freedesktop/DBus")
        for name in driver.ListNames(dbus_interface="org.freedesktop.DBus"):
            if name.startswith(":"):
                try:
                    print(driver.GetConnectionUnixProcessID(name, dbus_interface="org.freedesktop.DBus"))
                except dbus.exceptions.DBusException:
                    pass  # Gone meanwhile.
        """
    let output = try await runCommand([try await NetworkManagerOracle.python(), "-c", script, bus.address])
    return Set(output.split(separator: "\n").compactMap { Int32($0) })
}

/// The scheduler state of thread `tid` of this process (`R`, `S`, …), from /proc.
private func threadState(_ tid: Int32) -> String? {
    guard let stat = try? String(contentsOfFile: "/proc/self/task/\(tid)/stat", encoding: .utf8),
          let end = stat.lastIndex(of: ")")
    else { return nil }
    return stat[stat.index(after: end)...].split(separator: " ").first.map(String.init)
}

/// How many times thread `tid` of this process has blocked (each sleep in poll(2) is one).
private func voluntarySwitches(_ tid: Int32) -> Int? {
    guard let status = try? String(contentsOfFile: "/proc/self/task/\(tid)/status", encoding: .utf8) else { return nil }
    return status.split(separator: "\n").first { $0.hasPrefix("voluntary_ctxt_switches:") }
        .flatMap { Int($0.split(separator: ":")[1].trimmingCharacters(in: .whitespaces)) }
}
