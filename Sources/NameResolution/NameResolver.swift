import CThread
import ConnectivityPolicy
import Foundation
import Logging
import ServiceLifecycle
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Why a host name did not resolve.
public struct ResolutionFailure: Error, Sendable, Hashable, CustomStringConvertible {
    /// The name that was asked for.
    public var host: String
    /// getaddrinfo's `EAI_*` code.
    public var code: Int32
    /// The resolver's words (`gai_strerror`), e.g. "Name or service not known".
    public var message: String

    /// A failure for `host` with getaddrinfo's `code` and words.
    public init(host: String, code: Int32, message: String) {
        self.host = host
        self.code = code
        self.message = message
    }

    /// `EAI_AGAIN`: no resolver answered; asking again later may work.
    public var isTemporary: Bool { code == EAI_AGAIN }

    /// `feed.example: Name or service not known`.
    public var description: String { "\(host): \(message)" }
}

/// The outcome of resolving one host name.
public enum Resolution: Sendable, Hashable, CustomStringConvertible {
    /// The addresses, de-duplicated, in getaddrinfo's order; never empty.
    case resolved([IPAddress])
    /// The name did not resolve: getaddrinfo's code and words.
    case failed(ResolutionFailure)

    /// For logs: the addresses comma-separated, or `failed: ` and the failure.
    public var description: String {
        switch self {
        case .resolved(let addresses): addresses.map(\.description).joined(separator: ",")
        case .failed(let failure): "failed: \(failure)"
        }
    }
}

/// Resolves host names with getaddrinfo(3) on a thread of its own, and resolves them again when
/// the resolver's files change (resolv.conf is usually replaced by rename: resolvconf,
/// systemd-resolved, NetworkManager), when asked (``reresolve()``, e.g. on reconnect) and
/// periodically, so a name that failed at boot or moved to another address is followed.
///
/// The thread sleeps in poll(2) on an inotify descriptor and a wake pipe; its only timeout is the
/// next periodic round, so an idle resolver costs one wake-up per refresh interval.
public final class NameResolver: Sendable, Service {
    /// When names are resolved again.
    public struct Configuration: Sendable {
        /// How often every name is resolved again, besides file changes and requests.
        public var refreshInterval: Duration
        /// Files whose change means answers may have changed.
        public var watchedFiles: [String]

        /// Every 5 minutes, and on changes to the usual resolver files (resolv.conf, hosts, nsswitch.conf, systemd-resolved's).
        public init(
            refreshInterval: Duration = .seconds(300),
            watchedFiles: [String] = [
                "/etc/resolv.conf", "/etc/hosts", "/etc/nsswitch.conf",
                "/run/systemd/resolve/stub-resolv.conf", "/run/systemd/resolve/resolv.conf",
            ]
        ) {
            self.refreshInterval = refreshInterval
            self.watchedFiles = watchedFiles
        }
    }

    /// Counters: lookups made and what caused the rounds.
    public struct Statistics: Sendable, Hashable {
        /// getaddrinfo calls made.
        public var lookups = 0
        /// Rounds caused by a change of a watched file.
        public var fileTriggers = 0
        /// Rounds asked for with ``NameResolver/reresolve()``.
        public var requestTriggers = 0
        /// Rounds at the refresh interval.
        public var periodicTriggers = 0
    }

    private struct Host {
        var subscribers: [Int: AsyncStream<Resolution>.Continuation] = [:]
        var current: Resolution?
    }

    private struct State {
        var hosts: [String: Host] = [:]
        var nextSubscriber = 0
        var wakeFD: Int32 = -1
        var stop = false
        var roundRequested = false
        var finished = false
        var statistics = Statistics()
        var threadID: Int32?
    }

    /// When names are resolved again.
    public let configuration: Configuration
    private let logger: Logger
    private let lookup: @Sendable (String) -> Resolution
    private let state = Mutex(State())

    /// A resolver that asks getaddrinfo(3), the system's resolver.
    public init(configuration: Configuration = .init(), logger: Logger = Logger(label: "syncd.resolver")) {
        self.configuration = configuration
        self.logger = logger
        self.lookup = { NameResolver.getaddrinfo($0) }
    }

    /// Resolves with `lookup` instead of getaddrinfo: for tests, and clients with their own.
    public init(configuration: Configuration = .init(), logger: Logger = Logger(label: "syncd.resolver"), lookup: @escaping @Sendable (String) -> Resolution) {
        self.configuration = configuration
        self.logger = logger
        self.lookup = lookup
    }

    /// One resolution now, on a thread of its own (getaddrinfo blocks), without caching.
    public static func resolve(_ host: String) async -> Resolution {
        if let literal = literal(host) { return .resolved([literal]) }
        return await withCheckedContinuation { continuation in
            Thread { continuation.resume(returning: getaddrinfo(host)) }.start()
        }
    }

    /// The resolution of `host` once the first lookup finished, then every change (new
    /// addresses, or a failure in other words). A literal address is yielded once and never
    /// looked up. Streams of one host share its lookups; the stream ends when ``run()`` returns.
    public func resolutions(of host: String) -> AsyncStream<Resolution> {
        let (stream, continuation) = AsyncStream<Resolution>.makeStream(bufferingPolicy: .bufferingNewest(1))
        if let literal = Self.literal(host) {
            continuation.yield(.resolved([literal]))
            continuation.finish()
            return stream
        }
        let (id, fd) = state.withLock { state -> (Int?, Int32) in
            guard !state.finished else { return (nil, -1) }
            let id = state.nextSubscriber
            state.nextSubscriber += 1
            state.hosts[host, default: Host()].subscribers[id] = continuation
            if let current = state.hosts[host]?.current { continuation.yield(current) }
            return (id, state.wakeFD)
        }
        guard let id else {
            continuation.finish()
            return stream
        }
        continuation.onTermination = { [weak self] _ in
            self?.state.withLock { state in
                state.hosts[host]?.subscribers[id] = nil
                if state.hosts[host]?.subscribers.isEmpty == true { state.hosts[host] = nil }
            }
        }
        if fd >= 0 { Self.wake(fd) }
        return stream
    }

    /// The latest resolution of `host`, once it was resolved.
    public func current(_ host: String) -> Resolution? {
        state.withLock { $0.hosts[host]?.current }
    }

    /// Resolves every followed name again now.
    public func reresolve() {
        let fd = state.withLock { state -> Int32 in
            state.roundRequested = true
            state.statistics.requestTriggers += 1
            return state.wakeFD
        }
        if fd >= 0 { Self.wake(fd) }
    }

    /// Counters since creation.
    public var statistics: Statistics { state.withLock { $0.statistics } }

    /// The kernel's id of the resolver's thread, once it started: tests check it ends.
    package var threadID: Int32? { state.withLock { $0.threadID } }

    /// Follows the names until graceful shutdown or cancellation; then every stream finishes.
    ///
    /// The work runs on a thread named `syncd-resolver`; shutdown wakes it through its pipe and
    /// waits for it to end without blocking a cooperative thread. Throws only when the pipe that
    /// wakes the thread cannot be made.
    public func run() async throws {
        try await cancelWhenGracefulShutdown { try await self.follow() }
    }

    private func follow() async throws {
        var fds: [Int32] = [-1, -1]
        guard pipe(&fds) == 0 else { throw ResolutionFailure(host: "", code: EAI_SYSTEM, message: String(cString: strerror(errno))) }
        for fd in fds { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        _ = fcntl(fds[0], F_SETFL, O_NONBLOCK)
        let (readFD, writeFD) = (fds[0], fds[1])
        state.withLock { state in
            state.wakeFD = writeFD
            state.stop = false
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
                let thread = Thread { [self] in
                    // Foundation's Thread.name does not reach the kernel on Linux.
                    _ = syncd_set_thread_name("syncd-resolver")
                    let tid = syncd_gettid()
                    state.withLock { $0.threadID = tid }
                    loop(wakeFD: readFD)
                    done.resume()
                }
                thread.start()
            }
        } onCancel: {
            let fd = state.withLock { state -> Int32 in
                state.stop = true
                return state.wakeFD
            }
            if fd >= 0 { Self.wake(fd) }
        }
        let subscribers = state.withLock { state -> [AsyncStream<Resolution>.Continuation] in
            state.finished = true
            state.wakeFD = -1
            defer { state.hosts = [:] }
            return state.hosts.values.flatMap(\.subscribers.values)
        }
        close(readFD)
        close(writeFD)
        for subscriber in subscribers { subscriber.finish() }
    }

    // MARK: The resolver's thread

    private func loop(wakeFD: Int32) {
        let watcher = FileWatcher(files: configuration.watchedFiles, logger: logger)
        var nextRound = ContinuousClock.now + configuration.refreshInterval
        while true {
            if state.withLock({ $0.stop }) { return }
            // Names not yet resolved, or all of them when a round is due.
            let (round, fresh) = state.withLock { state -> (Bool, [String]) in
                defer { state.roundRequested = false }
                return (state.roundRequested, state.hosts.filter { $0.value.current == nil }.map(\.key))
            }
            resolve(round ? state.withLock { Array($0.hosts.keys) } : fresh)
            if round { nextRound = ContinuousClock.now + configuration.refreshInterval }

            var fds = [pollfd(fd: wakeFD, events: Int16(POLLIN), revents: 0), pollfd(fd: watcher.fd, events: Int16(POLLIN), revents: 0)]
            let (seconds, attoseconds) = ContinuousClock.now.duration(to: nextRound).components
            // Rounded up: a timeout short of the round would wake the thread once per millisecond.
            let timeout = Int32(clamping: max(0, seconds * 1000 + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000))
            let ready = poll(&fds, watcher.fd >= 0 ? 2 : 1, timeout)
            if ready < 0 && errno != EINTR { return }
            if ready == 0 {
                state.withLock { state in
                    state.roundRequested = true
                    state.statistics.periodicTriggers += 1
                }
                continue
            }
            if fds[0].revents != 0 {
                var bytes = (UInt64(0), UInt64(0))
                while read(wakeFD, &bytes, MemoryLayout.size(ofValue: bytes)) > 0 {}
            }
            if fds[1].revents != 0, watcher.readEvents() {
                // A burst of writes (a rename, then an attribute change) is one change.
                var quiet = pollfd(fd: watcher.fd, events: Int16(POLLIN), revents: 0)
                while poll(&quiet, 1, 50) > 0 { _ = watcher.readEvents() }
                logger.debug("resolver configuration changed: resolving names again")
                state.withLock { state in
                    state.roundRequested = true
                    state.statistics.fileTriggers += 1
                }
            }
        }
    }

    private func resolve(_ hosts: [String]) {
        for host in hosts {
            // glibc (2.26 and later) reloads resolv.conf by itself when it changed: asking again is enough.
            let resolution = lookup(host)
            let (changed, previous, subscribers) = state.withLock { state -> (Bool, Resolution?, [AsyncStream<Resolution>.Continuation]) in
                state.statistics.lookups += 1
                guard var entry = state.hosts[host] else { return (false, nil, []) }
                let previous = entry.current
                guard previous != resolution else { return (false, previous, []) }
                entry.current = resolution
                state.hosts[host] = entry
                return (true, previous, Array(entry.subscribers.values))
            }
            logger.debug("resolved", metadata: ["host": "\(host)", "result": "\(resolution)"])
            guard changed else { continue }
            if previous != nil {
                logger.info("host name answer changed", metadata: ["host": "\(host)", "from": "\(previous!)", "to": "\(resolution)"])
            }
            for subscriber in subscribers { subscriber.yield(resolution) }
        }
    }

    private static func wake(_ fd: Int32) {
        var byte: UInt8 = 1
        _ = write(fd, &byte, 1)
    }

    static func literal(_ host: String) -> IPAddress? {
        let trimmed = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        return IPAddress(trimmed)
    }

    /// getaddrinfo(3) for TCP, both families. No `AI_ADDRCONFIG`: an offline machine would get
    /// no answer even for names in /etc/hosts.
    static func getaddrinfo(_ host: String) -> Resolution {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var result: UnsafeMutablePointer<addrinfo>?
        let code = Glibc.getaddrinfo(host, nil, &hints, &result)
        guard code == 0, let first = result else {
            let message = code == EAI_SYSTEM ? String(cString: strerror(errno)) : String(cString: gai_strerror(code))
            return .failed(ResolutionFailure(host: host, code: code, message: message))
        }
        defer { freeaddrinfo(first) }
        var addresses: [IPAddress] = []
        var cursor: UnsafeMutablePointer<addrinfo>? = first
        while let info = cursor?.pointee {
            if info.ai_family == AF_INET, let raw = info.ai_addr {
                let address = raw.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { $0.pointee.sin_addr }
                if let ip = withUnsafeBytes(of: address, { IPAddress(bytes: Array($0)) }), !addresses.contains(ip) { addresses.append(ip) }
            } else if info.ai_family == AF_INET6, let raw = info.ai_addr {
                let address = raw.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { $0.pointee.sin6_addr }
                if let ip = withUnsafeBytes(of: address, { IPAddress(bytes: Array($0)) }), !addresses.contains(ip) { addresses.append(ip) }
            }
            cursor = info.ai_next
        }
        guard !addresses.isEmpty else { return .failed(ResolutionFailure(host: host, code: EAI_NONAME, message: "no address")) }
        return .resolved(addresses)
    }
}

/// inotify on the watched files and their directories, owned by the resolver's thread.
private final class FileWatcher {
    let fd: Int32
    private var names: Set<String> = []
    private let buffer = UnsafeMutableRawPointer.allocate(byteCount: 4096, alignment: 8)

    init(files: [String], logger: Logger) {
        fd = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        guard fd >= 0 else {
            logger.warning("cannot watch the resolver's files; names are resolved again only periodically and on request")
            return
        }
        var directories = Set<String>()
        for file in files {
            let url = URL(fileURLWithPath: file)
            names.insert(url.lastPathComponent)
            directories.insert(url.deletingLastPathComponent().path)
            // The file itself too: `ip netns exec` bind-mounts a resolv.conf over it, and writes
            // to that are seen only on the file.
            _ = inotify_add_watch(fd, file, UInt32(IN_CLOSE_WRITE | IN_MODIFY | IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF))
        }
        for directory in directories {
            _ = inotify_add_watch(fd, directory, UInt32(IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE | IN_DELETE | IN_ATTRIB))
        }
    }

    deinit {
        if fd >= 0 { close(fd) }
        buffer.deallocate()
    }

    /// Reads pending events; whether any concerns a watched file.
    func readEvents() -> Bool {
        var relevant = false
        while true {
            let count = read(fd, buffer, 4096)
            guard count > 0 else { return relevant }
            var offset = 0
            while offset + MemoryLayout<inotify_event>.size <= count {
                let event = buffer.load(fromByteOffset: offset, as: inotify_event.self)
                let nameLength = Int(event.len)
                if nameLength == 0 {
                    relevant = true   // an event on a watched file itself
                } else {
                    let start = buffer.advanced(by: offset + MemoryLayout<inotify_event>.size).assumingMemoryBound(to: CChar.self)
                    if names.contains(String(cString: start)) { relevant = true }
                }
                offset += MemoryLayout<inotify_event>.size + nameLength
            }
        }
    }
}
