import CSystemdBus
import Logging

#if canImport(Glibc)
import Glibc
#endif

/// NetworkManager's names on D-Bus.
private enum NM {
    static let service = "org.freedesktop.NetworkManager"
    static let path = "/org/freedesktop/NetworkManager"
    static let interface = "org.freedesktop.NetworkManager"
    static let deviceInterface = "org.freedesktop.NetworkManager.Device"
    static let devicesPrefix = "/org/freedesktop/NetworkManager/Devices"
    static let properties = "org.freedesktop.DBus.Properties"
}

/// One run of ``NetworkManagerWatcher`` on its bus thread: the sd-bus connection, the devices read so far
/// and the calls awaiting replies.
///
/// Not `Sendable`, on purpose: sd-bus objects are not thread-safe, so the session is made, used and ended
/// on the one thread that calls ``run(stopFD:)``. sd-bus's callbacks come back to it on that thread, from
/// inside `sd_bus_process`.
final class NetworkManagerBusSession {
    /// A call whose reply is awaited, keyed by the call's cookie.
    private enum Request {
        case devices(generation: Int)
        case device(path: String, generation: Int)
    }

    /// What the watcher knows of one device object; only a device with both is in the map.
    private struct Device {
        var interface: String?
        var metered: NetworkManagerMetered?
    }

    /// The usable properties of one `a{sv}`: what was missing, mistyped or absurd is `nil`.
    private struct DeviceProperties {
        var interface: String?
        var metered: NetworkManagerMetered?
    }

    private enum Presence {
        case unknown, present, absent
    }

    private let configuration: NetworkManagerWatcher.Configuration
    private let logger: Logger
    private let publish: @Sendable ([String: NetworkManagerMetered]) -> Void
    private var bus: OpaquePointer?
    /// Counts NetworkManager's owners seen: a reply to a call made of an earlier one is dropped, since
    /// the new owner's devices are read afresh.
    private var generation = 0
    private var pending: [UInt64: Request] = [:]
    /// By D-Bus object path.
    private var devices: [String: Device] = [:]
    private var presence = Presence.unknown
    private var loggedDeviceLimit = false
    private let firstReading: @Sendable () -> Void
    private var firstReadingReported = false

    /// A session that hands each changed device map to `publish`, and calls `firstReading` once,
    /// when its first reading is over: every device's answer is in, NetworkManager is found absent,
    /// or the bus cannot be reached.
    init(
        configuration: NetworkManagerWatcher.Configuration, logger: Logger,
        firstReading: @escaping @Sendable () -> Void = {},
        publish: @escaping @Sendable ([String: NetworkManagerMetered]) -> Void
    ) {
        self.configuration = configuration
        self.logger = logger
        self.firstReading = firstReading
        self.publish = publish
    }

    /// Reports the first reading once nothing asked of the bus is unanswered (or there is no bus).
    private func reportFirstReadingWhenOver() {
        guard !firstReadingReported, bus == nil || pending.isEmpty else { return }
        firstReadingReported = true
        firstReading()
    }

    private var busName: String {
        configuration.busAddress.map { "D-Bus bus at \($0)" } ?? "system bus"
    }

    /// Connects, reads NetworkManager and follows it until `stopFD` becomes readable; the connection is
    /// closed and freed before this returns. A bus that cannot be reached or is lost leaves the session
    /// waiting on `stopFD` alone.
    func run(stopFD: Int32) {
        if connect() {
            subscribe()
            requestDevices()
        }
        reportFirstReadingWhenOver()
        defer {
            if let bus { sd_bus_close_unref(bus) }
            bus = nil
        }
        while true {
            if let bus {
                var result: Int32 = 0
                repeat { result = sd_bus_process(bus, nil) } while result > 0
                if result < 0 || sd_bus_is_open(bus) <= 0 {
                    connectionLost(result)
                    continue
                }
            }
            var fds = [pollfd(fd: stopFD, events: Int16(POLLIN), revents: 0)]
            var timeout: Int32 = -1
            if let bus {
                let fd = sd_bus_get_fd(bus), events = sd_bus_get_events(bus)
                guard fd >= 0, events >= 0 else {
                    connectionLost(fd < 0 ? fd : events)
                    continue
                }
                fds.append(pollfd(fd: fd, events: Int16(truncatingIfNeeded: events), revents: 0))
                timeout = pollTimeout(bus)
            }
            if poll(&fds, nfds_t(fds.count), timeout) < 0 {
                if errno == EINTR || errno == EAGAIN { continue }
                logger.error("the NetworkManager watcher cannot wait for its bus: \(String(cString: strerror(errno)))")
                return
            }
            if fds[0].revents != 0 { return }
        }
    }

    // MARK: Connection

    private func connect() -> Bool {
        var bus: OpaquePointer?
        var result: Int32
        if let address = configuration.busAddress {
            result = sd_bus_new(&bus)
            if result >= 0 { result = sd_bus_set_address(bus, address) }
            if result >= 0 { result = sd_bus_set_bus_client(bus, 1) }
            if result >= 0 { result = sd_bus_start(bus) }
        } else {
            result = sd_bus_open_system(&bus)
        }
        if result >= 0 { result = sd_bus_set_method_call_timeout(bus, callTimeoutMicroseconds) }
        guard result >= 0, let bus else {
            if let bus { sd_bus_close_unref(bus) }
            logger.info("cannot connect to the \(busName) (\(Self.describe(result))): NetworkManager's link costs are not available, link costs come from the other sources")
            return false
        }
        self.bus = bus
        return true
    }

    private func connectionLost(_ result: Int32) {
        logger.info("lost the connection to the \(busName) (\(Self.describe(result < 0 ? result : -ECONNRESET))): link costs come from the other sources")
        if let bus { sd_bus_close_unref(bus) }
        bus = nil
        pending = [:]
        devices = [:]
        publishMap()
        reportFirstReadingWhenOver()
    }

    /// Milliseconds until sd-bus's next deadline (a call's timeout, authentication), -1 for none: an idle
    /// connection has none, so the thread sleeps until the bus or a stop request wakes it.
    private func pollTimeout(_ bus: OpaquePointer) -> Int32 {
        var deadline: UInt64 = 0
        guard sd_bus_get_timeout(bus, &deadline) >= 0, deadline != UInt64.max else { return -1 }
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        let nowMicroseconds = UInt64(now.tv_sec) * 1_000_000 + UInt64(now.tv_nsec) / 1000
        guard deadline > nowMicroseconds else { return 0 }
        // Rounded up: a timeout that ends just before the deadline would wake the thread for nothing.
        return Int32(clamping: (deadline - nowMicroseconds + 999) / 1000)
    }

    private var callTimeoutMicroseconds: UInt64 {
        let (seconds, attoseconds) = configuration.callTimeout.components
        guard seconds >= 0, attoseconds >= 0 else { return 1 }
        return max(1, UInt64(seconds) * 1_000_000 + UInt64(attoseconds / 1_000_000_000_000))
    }

    // MARK: Calls and signals

    /// Installs the matches before the first call: the bus handles one connection's messages in order,
    /// so no change made after NetworkManager answered can slip by unseen.
    private func subscribe() {
        let matches = [
            "type='signal',sender='org.freedesktop.DBus',path='/org/freedesktop/DBus',interface='org.freedesktop.DBus',member='NameOwnerChanged',arg0='\(NM.service)'",
            "type='signal',sender='\(NM.service)',path='\(NM.path)',interface='\(NM.interface)',member='DeviceAdded'",
            "type='signal',sender='\(NM.service)',path='\(NM.path)',interface='\(NM.interface)',member='DeviceRemoved'",
            "type='signal',sender='\(NM.service)',path_namespace='\(NM.devicesPrefix)',interface='\(NM.properties)',member='PropertiesChanged',arg0='\(NM.deviceInterface)'",
        ]
        for match in matches {
            let result = sd_bus_add_match_async(bus, nil, match, onSignal, onMatchInstalled, userdata)
            if result < 0 {
                logger.info("cannot follow NetworkManager's changes on the \(busName) (\(Self.describe(result)))")
            }
        }
    }

    private var userdata: UnsafeMutableRawPointer { Unmanaged.passUnretained(self).toOpaque() }

    /// Calls `member` of the properties interface at `path` and records what the reply is for.
    private func callProperties(_ member: String, path: String, _ arguments: [String], for request: Request) {
        guard let bus else { return }
        var cookie: UInt64 = 0
        let result = syncd_bus_call_async(
            bus, NM.service, path, NM.properties, member, arguments.first, arguments.dropFirst().first,
            callTimeoutMicroseconds, onReply, userdata, &cookie)
        if result < 0 {
            logger.debug("cannot ask NetworkManager for \(arguments.last ?? member) of \(path): \(Self.describe(result))")
            return
        }
        pending[cookie] = request
    }

    private func requestDevices() {
        callProperties("Get", path: NM.path, [NM.interface, "Devices"], for: .devices(generation: generation))
    }

    private func requestDevice(_ path: String) {
        callProperties("GetAll", path: path, [NM.deviceInterface], for: .device(path: path, generation: generation))
    }

    fileprivate func handleReply(_ message: OpaquePointer) {
        var cookie: UInt64 = 0
        guard sd_bus_message_get_reply_cookie(message, &cookie) >= 0,
              let request = pending.removeValue(forKey: cookie),
              let bus, sd_bus_is_open(bus) > 0  // Closing: sd-bus fails the calls still pending.
        else { return }
        switch request {
        case .devices(let asked) where asked == generation:
            devicesReply(message)
        case .device(let path, let asked) where asked == generation:
            deviceReply(message, path: path)
        default:
            break  // Asked of an earlier owner.
        }
        reportFirstReadingWhenOver()
    }

    fileprivate func handleMatchInstalled(_ message: OpaquePointer) {
        guard let error = Self.errorName(message) else { return }
        logger.info("cannot follow NetworkManager's changes on the \(busName) (\(error))")
    }

    fileprivate func handleSignal(_ message: OpaquePointer) {
        if sd_bus_message_is_signal(message, "org.freedesktop.DBus", "NameOwnerChanged") > 0 {
            nameOwnerChanged(message)
        } else if sd_bus_message_is_signal(message, NM.interface, "DeviceAdded") > 0 {
            guard let path = Self.readString(message, type: "o") else { return ignored("DeviceAdded without a device") }
            deviceAdded(path)
        } else if sd_bus_message_is_signal(message, NM.interface, "DeviceRemoved") > 0 {
            guard let path = Self.readString(message, type: "o") else { return ignored("DeviceRemoved without a device") }
            if devices.removeValue(forKey: path) != nil { publishMap() }
        } else if sd_bus_message_is_signal(message, NM.properties, "PropertiesChanged") > 0 {
            propertiesChanged(message)
        }
    }

    // MARK: NetworkManager's answers

    private func nameOwnerChanged(_ message: OpaquePointer) {
        guard let name = Self.readString(message), name == NM.service,
              Self.readString(message) != nil, let owner = Self.readString(message)
        else { return }
        generation += 1
        devices = [:]
        if owner.isEmpty {
            if presence == .present {
                logger.info("NetworkManager left the bus: link costs come from the other sources until it is back")
            }
            presence = .absent
            publishMap()
        } else {
            publishMap()
            requestDevices()
        }
    }

    private func devicesReply(_ message: OpaquePointer) {
        if let error = Self.errorName(message) {
            let missing = ["org.freedesktop.DBus.Error.ServiceUnknown", "org.freedesktop.DBus.Error.NameHasNoOwner"]
            if missing.contains(error) {
                if presence != .absent {
                    logger.info("NetworkManager is not running: link costs come from the other sources")
                }
            } else {
                logger.info("NetworkManager did not list its devices (\(error)): link costs come from the other sources")
            }
            presence = .absent
            devices = [:]
            publishMap()
            return
        }
        guard let paths = readDevicePaths(message) else {
            logger.debug("ignoring NetworkManager's Devices: not an array of object paths")
            return
        }
        if presence != .present {
            logger.info("NetworkManager is on the bus: following the Metered property of its \(paths.count) devices")
        }
        presence = .present
        // The reply is the truth as of its sending; signals about later changes come after it.
        devices = devices.filter { paths.contains($0.key) }
        for path in paths where devices[path] == nil {
            deviceAdded(path)
        }
        publishMap()
    }

    private func deviceAdded(_ path: String) {
        guard devices[path] == nil else { return }
        guard devices.count < configuration.maximumDevices else {
            if !loggedDeviceLimit {
                logger.debug("ignoring NetworkManager's devices beyond \(configuration.maximumDevices), such as \(path)")
                loggedDeviceLimit = true
            }
            return
        }
        devices[path] = Device()
        requestDevice(path)
    }

    private func deviceReply(_ message: OpaquePointer, path: String) {
        guard devices[path] != nil else { return }  // Removed meanwhile.
        if let error = Self.errorName(message) {
            logger.debug("cannot read NetworkManager's device \(path): \(error)")
            return
        }
        guard let properties = readDeviceProperties(message, path: path) else {
            return ignored("properties of \(path): not a dictionary of variants")
        }
        apply(properties, to: path)
    }

    private func propertiesChanged(_ message: OpaquePointer) {
        guard let pathPointer = sd_bus_message_get_path(message) else { return }
        let path = String(cString: pathPointer)
        guard devices[path] != nil, let interface = Self.readString(message), interface == NM.deviceInterface else { return }
        guard let properties = readDeviceProperties(message, path: path) else {
            return ignored("PropertiesChanged of \(path): not a dictionary of variants")
        }
        apply(properties, to: path)
        // Invalidated rather than sent: ask for the values (NetworkManager itself always sends them).
        if let invalidated = Self.readStrings(message), invalidated.contains(where: { $0 == "Interface" || $0 == "Metered" }) {
            requestDevice(path)
        }
    }

    private func apply(_ properties: DeviceProperties, to path: String) {
        guard var device = devices[path] else { return }
        if let interface = properties.interface { device.interface = interface }
        if let metered = properties.metered { device.metered = metered }
        devices[path] = device
        publishMap()
    }

    /// Devices that share an interface name (NetworkManager can have two objects for one name) resolve
    /// the same way every time: the first in path order that knows anything, else `unknown`.
    private func publishMap() {
        var map: [String: NetworkManagerMetered] = [:]
        for path in devices.keys.sorted() {
            guard let device = devices[path], let name = device.interface, let metered = device.metered else { continue }
            if let earlier = map[name], earlier != .unknown { continue }
            map[name] = metered
        }
        publish(map)
    }

    private func ignored(_ what: String) {
        logger.debug("ignoring \(what)")
    }

    // MARK: Reading messages

    /// The `v` of `Get(…, "Devices")`: its `ao`, at most `maximumDevices` paths (the rest logged).
    private func readDevicePaths(_ message: OpaquePointer) -> Set<String>? {
        guard Self.variantSignature(message) == "ao",
              sd_bus_message_enter_container(message, Self.type("v"), "ao") > 0,
              sd_bus_message_enter_container(message, Self.type("a"), "o") > 0
        else { return nil }
        var paths = Set<String>()
        while let path = Self.readString(message, type: "o") {
            if paths.count >= configuration.maximumDevices {
                if !loggedDeviceLimit {
                    logger.debug("ignoring NetworkManager's devices beyond \(configuration.maximumDevices), such as \(path)")
                    loggedDeviceLimit = true
                }
                continue
            }
            paths.insert(path)
        }
        return paths
    }

    /// An `a{sv}` of device properties: `Interface` and `Metered` when they have their types and sane
    /// values; anything else is left out (and logged at debug level). `nil` when the message is not an
    /// `a{sv}` there.
    private func readDeviceProperties(_ message: OpaquePointer, path: String) -> DeviceProperties? {
        guard sd_bus_message_enter_container(message, Self.type("a"), "{sv}") > 0 else { return nil }
        var properties = DeviceProperties()
        while true {
            let entered = sd_bus_message_enter_container(message, Self.type("e"), "sv")
            if entered < 0 { return nil }
            if entered == 0 { break }
            guard let key = Self.readString(message), let signature = Self.variantSignature(message) else { return nil }
            switch (key, signature) {
            case ("Interface", "s"):
                guard sd_bus_message_enter_container(message, Self.type("v"), "s") > 0 else { return nil }
                if let name = Self.readInterfaceName(message) {
                    properties.interface = name
                } else {
                    ignored("the Interface of \(path): not a usable interface name")
                }
                guard sd_bus_message_exit_container(message) >= 0 else { return nil }
            case ("Metered", "u"):
                guard sd_bus_message_enter_container(message, Self.type("v"), "u") > 0 else { return nil }
                var value: UInt32 = 0
                guard sd_bus_message_read_basic(message, Self.type("u"), &value) > 0 else { return nil }
                if let metered = NetworkManagerMetered(rawValue: value) {
                    properties.metered = metered
                } else {
                    ignored("Metered=\(value) of \(path): not a value NetworkManager defines")
                }
                guard sd_bus_message_exit_container(message) >= 0 else { return nil }
            case ("Interface", _), ("Metered", _):
                ignored("the \(key) of \(path): of type \(signature.prefix(32)), not \(key == "Metered" ? "u" : "s")")
                guard sd_bus_message_skip(message, "v") >= 0 else { return nil }
            default:
                guard sd_bus_message_skip(message, "v") >= 0 else { return nil }
            }
            guard sd_bus_message_exit_container(message) >= 0 else { return nil }
        }
        guard sd_bus_message_exit_container(message) >= 0 else { return nil }
        return properties
    }

    /// An interface name as the kernel would accept it (`dev_valid_name`): 1 to 15 bytes (IFNAMSIZ - 1),
    /// not `.` or `..`, without `/`, `:`, white space or control characters. Anything else from the bus is
    /// not a link of this host.
    private static func readInterfaceName(_ message: OpaquePointer) -> String? {
        var pointer: UnsafePointer<CChar>?
        guard sd_bus_message_read_basic(message, type("s"), &pointer) > 0, let pointer else { return nil }
        let length = strnlen(pointer, 16)
        guard length >= 1, length <= 15 else { return nil }
        let bytes = UnsafeBufferPointer(start: UnsafeRawPointer(pointer).assumingMemoryBound(to: UInt8.self), count: length)
        guard bytes.allSatisfy({ $0 > 0x20 && $0 != 0x7f && $0 != UInt8(ascii: "/") && $0 != UInt8(ascii: ":") }) else { return nil }
        let name = String(decoding: bytes, as: UTF8.self)
        guard name != ".", name != ".." else { return nil }
        return name
    }

    /// The next basic value of `type` (`s`, `o`) as a string; `nil` at the end of a container or on a
    /// type mismatch.
    private static func readString(_ message: OpaquePointer, type: Character = "s") -> String? {
        var pointer: UnsafePointer<CChar>?
        guard sd_bus_message_read_basic(message, Self.type(type), &pointer) > 0, let pointer else { return nil }
        return String(cString: pointer)
    }

    /// An `as`, such as PropertiesChanged's invalidated properties.
    private static func readStrings(_ message: OpaquePointer) -> [String]? {
        guard sd_bus_message_enter_container(message, type("a"), "s") > 0 else { return nil }
        var strings: [String] = []
        while let string = readString(message) { strings.append(string) }
        _ = sd_bus_message_exit_container(message)
        return strings
    }

    /// The signature inside the variant that comes next, `nil` when a variant does not come next.
    private static func variantSignature(_ message: OpaquePointer) -> String? {
        var kind: CChar = 0
        var contents: UnsafePointer<CChar>?
        guard sd_bus_message_peek_type(message, &kind, &contents) > 0, kind == type("v"), let contents else { return nil }
        return String(cString: contents)
    }

    /// The D-Bus error name of a failed call, `nil` for a reply.
    private static func errorName(_ message: OpaquePointer) -> String? {
        guard sd_bus_message_is_method_error(message, nil) > 0 else { return nil }
        guard let error = sd_bus_message_get_error(message), let name = error.pointee.name else { return "an unnamed error" }
        return String(cString: name)
    }

    private static func type(_ character: Character) -> CChar {
        CChar(bitPattern: character.asciiValue!)
    }

    private static func describe(_ result: Int32) -> String {
        String(cString: strerror(result < 0 ? -result : result))
    }
}

// sd-bus calls back through plain C functions; the session comes back as the userdata pointer. It is
// unretained: the session outlives its bus, which it frees before it ends, and the bus calls nothing then.
// They return 0: a negative return would come back out of sd_bus_process as if the connection failed.

private func onReply(_ message: OpaquePointer?, _ userdata: UnsafeMutableRawPointer?, _: UnsafeMutablePointer<sd_bus_error>?) -> Int32 {
    guard let message, let userdata else { return 0 }
    Unmanaged<NetworkManagerBusSession>.fromOpaque(userdata).takeUnretainedValue().handleReply(message)
    return 0
}

private func onSignal(_ message: OpaquePointer?, _ userdata: UnsafeMutableRawPointer?, _: UnsafeMutablePointer<sd_bus_error>?) -> Int32 {
    guard let message, let userdata else { return 0 }
    Unmanaged<NetworkManagerBusSession>.fromOpaque(userdata).takeUnretainedValue().handleSignal(message)
    return 0
}

private func onMatchInstalled(_ message: OpaquePointer?, _ userdata: UnsafeMutableRawPointer?, _: UnsafeMutablePointer<sd_bus_error>?) -> Int32 {
    guard let message, let userdata else { return 0 }
    Unmanaged<NetworkManagerBusSession>.fromOpaque(userdata).takeUnretainedValue().handleMatchInstalled(message)
    return 0
}
