import ConnectivityPolicy
import Logging
import NameResolution
import NetlinkMonitor
import ServiceLifecycle
import Synchronization

/// One feed host's place on the connectivity ladder: offline (the kernel has no usable path),
/// limited (a path, but the name does not resolve, a portal intercepts, or the server does not
/// answer) or online, each with its reason.
///
/// It puts together what the layers know: the kernel's route to the host's addresses
/// (``NetlinkMonitor``, which asks the kernel itself), the host name's resolution
/// (``NameResolver``, re-resolved when the resolver's files change, on request and periodically),
/// and evidence above the route that the owner reports: a captive portal found by a connectivity
/// check (``portalChanged(_:)``), and requests to the server that got no answer
/// (``requestFailed(unanswered:)``). While the server is marked unreachable, ``run()`` probes it
/// with the injected `probe`, backing off, until it answers.
///
/// ```swift
/// let reachability = HostReachability(destination: Destination(urlHost: url.host),
///                                     monitor: monitor, resolver: resolver)
/// async let following: Void = reachability.run()
/// for await verdict in reachability.verdicts() { print(verdict) }
/// ```
public final class HostReachability<C: Clock<Duration>>: Sendable, Service {
    /// Connects to the server at one of its addresses; `true` when it answered at all (a
    /// connection, or a refusal: the host is there).
    public typealias Probe = @Sendable (IPAddress) async -> Bool

    /// How ``HostReachability`` judges the server.
    public struct Configuration: Sendable {
        /// Online must hold this long before it is published (offline and limited go at once).
        public var settle: Duration
        /// Requests in a row that get no answer (connect timeouts, host unreachable) before the
        /// server is marked unreachable: one lost SYN is not an outage.
        public var unansweredThreshold: Int
        /// The first pause between probes of an unreachable server; it doubles after each miss.
        public var probeDelay: Duration
        /// The longest pause between probes.
        public var maxProbeDelay: Duration

        /// The defaults: 2 s settle, 2 unanswered requests, probes from 1 s to 60 s apart.
        public init(settle: Duration = defaultSettleDelay, unansweredThreshold: Int = 2, probeDelay: Duration = .seconds(1), maxProbeDelay: Duration = .seconds(60)) {
            self.settle = settle
            self.unansweredThreshold = max(1, unansweredThreshold)
            self.probeDelay = probeDelay
            self.maxProbeDelay = maxProbeDelay
        }
    }

    private struct State {
        /// Resolved (or literal) addresses; empty while a name has never resolved.
        var addresses: [IPAddress]
        var dnsFailure: String?
        var portal: String?
        var serverUnreachable: String?
        var unanswered = 0
        var tracking: NetlinkMonitor.TrackingToken?
        var publisher: VerdictPublisher<C>?
        var observer: NetlinkMonitor.ObserverToken?
        /// Wakes the prober when the server is marked unreachable.
        var wake: AsyncStream<Void>.Continuation?

        /// What ``evaluate(_:)`` reads besides the snapshot.
        var judged: Judged { Judged(addresses: addresses, dnsFailure: dnsFailure, portal: portal, serverUnreachable: serverUnreachable) }
    }

    private struct Judged: Equatable {
        var addresses: [IPAddress]
        var dnsFailure: String?
        var portal: String?
        var serverUnreachable: String?
    }

    /// What is judged: addresses, or a host name resolved by the resolver.
    public let destination: Destination
    /// How the server is judged.
    public let configuration: Configuration
    private let monitor: NetlinkMonitor
    private let resolver: NameResolver?
    private let probe: Probe?
    private let clock: C
    private let logger: Logger
    private let state: Mutex<State>
    private let wakeups: AsyncStream<Void>

    /// - Parameters:
    ///   - destination: the host's addresses, or its name (then `resolver` resolves it; without
    ///     a resolver a name is judged as the internet at large).
    ///   - monitor: a started monitor.
    ///   - probe: how to check an unreachable server; without one the mark stays until a request
    ///     succeeds (``requestSucceeded()``).
    public init(
        destination: Destination,
        monitor: NetlinkMonitor,
        resolver: NameResolver? = nil,
        configuration: Configuration = .init(),
        clock: C,
        probe: Probe? = nil,
        logger: Logger = Logger(label: "syncd.reachability")
    ) {
        self.destination = destination
        self.configuration = configuration
        self.monitor = monitor
        self.resolver = resolver
        self.probe = probe
        self.clock = clock
        self.logger = logger
        let (wakeups, wake) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        self.wakeups = wakeups
        var initial = State(addresses: destination.addresses)
        initial.wake = wake
        self.state = Mutex(initial)
    }

    deinit {
        state.withLock { state in
            if let observer = state.observer { monitor.removeObserver(observer) }
            if let tracking = state.tracking { monitor.untrack(tracking) }
            state.publisher?.finish()
            state.wake?.finish()
        }
    }

    /// The verdicts: the first once the kernel has answered for the known addresses, then every
    /// change. One stream per instance: a second call finishes the first.
    public func verdicts() -> AsyncStream<Verdict> {
        let (output, continuation) = AsyncStream<Verdict>.makeStream()
        let publisher = VerdictPublisher(settle: configuration.settle, clock: clock, output: continuation) { [weak self] snapshot in
            self?.evaluate(snapshot) ?? .offline(.noCarrier)
        }
        let previous = state.withLock { state -> (VerdictPublisher<C>?, NetlinkMonitor.ObserverToken?) in
            defer { state.publisher = publisher }
            return (state.publisher, state.observer)
        }
        previous.0?.finish()
        if let observer = previous.1 { monitor.removeObserver(observer) }
        track()
        let token = monitor.addObserver(
            onSnapshot: { [weak self] snapshot in
                guard let self else { return }
                // Until the kernel has answered for these addresses, the model alone could say
                // "no route" where a policy rule routes them.
                let addresses = self.state.withLock { $0.addresses }
                guard addresses.allSatisfy({ snapshot.kernelRoutes[$0] != nil }) else { return }
                publisher.receive(snapshot)
            },
            onFinish: { publisher.finish() }
        )
        state.withLock { $0.observer = token }
        continuation.onTermination = { [weak self] _ in
            publisher.finish()
            self?.monitor.removeObserver(token)
        }
        return output
    }

    /// Follows the host name and probes the server while it is marked unreachable, until
    /// graceful shutdown or cancellation.
    public func run() async {
        await cancelWhenGracefulShutdown { await self.follow() }
    }

    private func follow() async {
        await withTaskGroup(of: Void.self) { group in
            if case .host(let name) = destination, let resolver {
                group.addTask {
                    for await resolution in resolver.resolutions(of: name) { self.resolved(resolution) }
                }
            }
            if let probe {
                group.addTask { await self.probeWhileUnreachable(probe) }
            }
            await group.waitForAll()
        }
    }

    /// A captive portal was found (its URL), or the connectivity check passed (`nil`).
    public func portalChanged(_ url: String?) {
        update { $0.portal = url }
    }

    /// A request to the server was answered (whatever the status): the server is reachable.
    public func requestSucceeded() {
        update { state in
            state.unanswered = 0
            state.serverUnreachable = nil
        }
    }

    /// A request failed. `unanswered` is the failure in words when the server never answered
    /// (connect timeout, host unreachable); `nil` for failures that prove it is there (an HTTP
    /// error, a refused connection, a bad body), which reset the count.
    public func requestFailed(unanswered: String?) {
        update { state in
            guard let unanswered else {
                state.unanswered = 0
                return
            }
            state.unanswered += 1
            if state.unanswered >= configuration.unansweredThreshold, state.serverUnreachable == nil {
                state.serverUnreachable = unanswered
                state.wake?.yield()
            }
        }
    }

    // MARK: Internals

    private func evaluate(_ snapshot: NetworkSnapshot) -> Verdict {
        let (addresses, evidence) = state.withLock { state in
            (state.addresses, LimitedEvidence(dnsFailure: state.dnsFailure, portal: state.portal, serverUnreachable: state.serverUnreachable))
        }
        // A name that never resolved is judged by the internet at large: if that is offline, it
        // explains the failed resolution too.
        let route = ConnectivityPolicy.evaluate(snapshot, for: addresses.isEmpty ? .internet : .addresses(addresses))
        // A loopback host needs no name service, portal check or probe.
        if addresses.contains(where: \.isLoopback) { return route }
        return route.limited(by: evidence)
    }

    /// Changes the state, and judges again if what is judged changed. A request answered like
    /// the one before changes nothing, and every page of a backfill is one such request.
    private func update(_ body: (inout State) -> Void) {
        let publisher = state.withLock { state -> VerdictPublisher<C>? in
            let before = state.judged
            body(&state)
            return state.judged == before ? nil : state.publisher
        }
        publisher?.reevaluate()
    }

    private func reevaluate() {
        state.withLock { $0.publisher }?.reevaluate()
    }

    private func resolved(_ resolution: Resolution) {
        let changedAddresses: Bool
        switch resolution {
        case .resolved(let addresses):
            changedAddresses = state.withLock { state in
                state.dnsFailure = nil
                defer { state.addresses = addresses }
                return state.addresses != addresses
            }
        case .failed(let failure):
            // The last addresses stay for the route: the kernel's answer for them is still the
            // best guess of the path, and the verdict is limited by the failure anyway.
            state.withLock { $0.dnsFailure = failure.description }
            changedAddresses = false
        }
        if changedAddresses {
            logger.info("feed host resolved", metadata: ["destination": "\(destination)", "addresses": "\(state.withLock { $0.addresses })"])
            track()
        }
        reevaluate()
    }

    /// Asks the monitor to look up the current addresses, dropping the previous ones.
    private func track() {
        let addresses = state.withLock { $0.addresses }
        let token = addresses.isEmpty ? nil : monitor.startTracking(addresses).token
        let previous = state.withLock { state -> NetlinkMonitor.TrackingToken? in
            defer { state.tracking = token }
            return state.tracking
        }
        if let previous { monitor.untrack(previous) }
    }

    private func probeWhileUnreachable(_ probe: Probe) async {
        for await _ in wakeups {
            var delay = configuration.probeDelay
            while !Task.isCancelled {
                let (unreachable, addresses) = state.withLock { ($0.serverUnreachable, $0.addresses) }
                guard unreachable != nil else { break }
                do { try await clock.sleep(for: delay) } catch { return }
                var answered = false
                for address in addresses where !answered { answered = await probe(address) }
                if answered {
                    logger.notice("feed server answers again", metadata: ["destination": "\(destination)"])
                    requestSucceeded()
                    break
                }
                delay = min(delay * 2, configuration.maxProbeDelay)
            }
        }
    }
}

extension HostReachability where C == ContinuousClock {
    /// On the real monotonic clock.
    public convenience init(
        destination: Destination,
        monitor: NetlinkMonitor,
        resolver: NameResolver? = nil,
        configuration: Configuration = .init(),
        probe: Probe? = nil,
        logger: Logger = Logger(label: "syncd.reachability")
    ) {
        self.init(destination: destination, monitor: monitor, resolver: resolver, configuration: configuration, clock: ContinuousClock(), probe: probe, logger: logger)
    }
}
