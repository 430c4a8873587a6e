import DemoFeedServer
import Foundation
import NIOCore
import SyncCore

/// The demo feed server's fault injection: a ``FeedRequestHook`` that gives feed requests the
/// ``Fault`` they ask for (`fault=SPEC`), else the next scripted one that matches, else one rolled
/// from the random faults.
///
/// Its admin endpoints (loopback peers only, as all of `/admin/`): `POST faults?fault=SPEC&count=N&feed=NAME&kind=initial|older|newer`
/// scripts a fault for the next matching requests, `GET faults` lists those not used up,
/// `DELETE faults` drops them.
public actor FaultInjector: FeedRequestHook {
    /// What the injector starts with.
    public struct Settings: Sendable {
        /// Faults rolled for every feed request that asks for none and matches no scripted one.
        public var randomFaults: [RandomFault]
        /// Seed for the random faults, so a run can be reproduced.
        public var seed: UInt64
        /// How long a stalled request is held before its connection is closed, if the server
        /// is not stopped first. Longer than any sane client timeout.
        public var stallLimit: Duration

        /// Settings; the defaults roll no faults and hold stalls for five minutes.
        public init(randomFaults: [RandomFault] = [], seed: UInt64 = 1, stallLimit: Duration = .seconds(300)) {
            self.randomFaults = randomFaults
            self.seed = seed
            self.stallLimit = stallLimit
        }
    }

    /// What the injector was made with.
    public nonisolated let settings: Settings
    private let feeds: Set<String>
    private var scripted: [ScriptedFault] = []
    /// Seeded, so a `--seed` reproduces the same random faults.
    private var rng: SeededRandomSource
    private let gate = StallGate()

    /// An injector for a server of these feeds (scripted faults may name only them).
    public init(feeds: [String], settings: Settings = Settings()) throws(DemoFeedServerError) {
        guard settings.stallLimit > .zero else { throw .invalidArgument("stall limit must be positive") }
        self.feeds = Set(feeds)
        self.settings = settings
        self.rng = SeededRandomSource(seed: settings.seed)
    }

    // MARK: FeedRequestHook

    /// `fault`, read from the query.
    public nonisolated var queryParameters: Set<String> { ["fault"] }

    /// Rejects a `fault` parameter that is not a fault spec.
    public nonisolated func validate(parameters: [String: String]) throws(DemoFeedServerError) {
        if let spec = parameters["fault"] { _ = try Fault(spec: spec) }
    }

    /// The request's own fault, else the first matching scripted one (used up by one), else a
    /// roll of the random faults; `nil` when none applies.
    public func intervention(for request: FeedRequest) async -> FeedIntervention? {
        var fault = request.parameters["fault"].flatMap { try? Fault(spec: $0) }
        if fault == nil, let index = scripted.firstIndex(where: { $0.matches(feed: request.feed, kind: request.kind) }) {
            fault = scripted[index].fault
            scripted[index].remaining -= 1
            if scripted[index].remaining <= 0 { scripted.remove(at: index) }
        }
        if fault == nil {
            for candidate in settings.randomFaults where candidate.probability > 0 {
                if rng.nextFraction() < candidate.probability {
                    fault = candidate.fault
                    break
                }
            }
        }
        return fault.map(intervention(for:))
    }

    /// `POST faults`, `GET faults`, `DELETE faults`.
    public nonisolated func adminRoutes() -> [AdminRoute] {
        [
            AdminRoute(.post, "faults") { parameters throws(DemoFeedServerError) in
                guard let spec = parameters["fault"] else { throw .invalidArgument("missing fault=SPEC") }
                var kind: RequestKind?
                if let raw = parameters["kind"] {
                    guard let parsed = RequestKind(rawValue: raw) else { throw .invalidArgument("kind must be initial, older or newer") }
                    kind = parsed
                }
                let scripted = ScriptedFault(
                    try Fault(spec: spec), count: try AdminRoute.positiveInteger(parameters, "count", default: 1),
                    feed: parameters["feed"], kind: kind)
                try await self.script(scripted)
                return "{\"scripted\":\(AdminRoute.json(string: scripted.fault.description)),\"count\":\(scripted.remaining)}"
            },
            AdminRoute(.get, "faults") { _ in
                let rows = await self.pendingScriptedFaults.map { fault in
                    "{\"fault\":\(AdminRoute.json(string: fault.fault.description)),\"remaining\":\(fault.remaining),"
                        + "\"feed\":\(fault.feed.map(AdminRoute.json(string:)) ?? "null"),"
                        + "\"kind\":\(fault.kind.map { AdminRoute.json(string: $0.rawValue) } ?? "null")}"
                }
                return "[\(rows.joined(separator: ","))]"
            },
            AdminRoute(.delete, "faults") { _ in
                await self.clearScriptedFaults()
                return "{}"
            },
        ]
    }

    /// Requests held by a stall fault.
    public func heldRequestCount() async -> Int { await gate.stalledCount }

    /// Releases every stalled request, now and later.
    public func serverStopping() async { await gate.open() }

    // MARK: Scripting

    /// Scripts a fault for the next matching requests.
    public func script(_ fault: ScriptedFault) throws(DemoFeedServerError) {
        if let name = fault.feed, !feeds.contains(name) { throw .unknownFeed(name) }
        guard fault.remaining > 0 else { throw .invalidArgument("count must be positive") }
        scripted.append(fault)
    }

    /// Drops faults scripted but not yet used.
    public func clearScriptedFaults() { scripted.removeAll() }

    /// Scripted faults not yet used up.
    public var pendingScriptedFaults: [ScriptedFault] { scripted }

    // MARK: Faults as interventions

    private func intervention(for fault: Fault) -> FeedIntervention {
        let label = fault.description
        let gate = self.gate
        let limit = settings.stallLimit
        let stall: @Sendable (any Channel) async -> Void = { channel in
            await gate.wait(upTo: limit)
            try? await channel.close()
        }
        let reset: @Sendable (any Channel) async -> Void = { await ConnectionFaults.reset($0) }
        switch fault {
        case .status(let code, let retryAfter):
            var headers: [String: String] = [:]
            switch retryAfter {
            case .seconds(let seconds)?: headers["Retry-After"] = String(seconds)
            case .date(let ahead)?:
                // The Date header the server adds comes from the same clock, so the client can
                // compute the delay without trusting its own clock.
                headers["Retry-After"] = Self.imfFixdate(Date(timeIntervalSinceNow: Double(ahead)))
            case nil: break
            }
            return FeedIntervention(label: label, action: .respond(status: code, headers: headers, body: Self.error("injected status \(code)")))
        case .latency(let milliseconds):
            return FeedIntervention(label: label, delay: .milliseconds(milliseconds), action: .servePage)
        case .stall(.headers):
            return FeedIntervention(label: label, action: .abandon(stall))
        case .reset(.headers):
            return FeedIntervention(label: label, action: .abandon(reset))
        case .malformed:
            // What a misconfigured proxy sends with a 200: not JSON at all.
            return FeedIntervention(label: label, action: .respond(
                status: 200, headers: [:], body: Array("<html><body><h1>502 Bad Gateway</h1></body></html>\n".utf8)))
        case .truncated:
            // A real page cut in half: framed correctly (the Content-Length matches), invalid as
            // JSON, as a proxy that lost the end of an upstream response would send it.
            return FeedIntervention(label: label, action: .replacePageBody { .whole(Array($0.prefix(Self.half($0)))) })
        case .oversized(let bytes, let chunked):
            // A real page padded with trailing whitespace (still valid JSON) up to `bytes`.
            return FeedIntervention(label: label, action: .replacePageBody { page in
                let padded = page.count < bytes ? page + [UInt8](repeating: 0x20, count: bytes - page.count) : page
                return .streamed(padded, declaringLength: !chunked)
            })
        case .reset(.body):
            return FeedIntervention(label: label, action: .replacePageBody { .partial($0, sending: Self.half($0), then: reset) })
        case .stall(.body):
            return FeedIntervention(label: label, action: .replacePageBody { .partial($0, sending: Self.half($0), then: stall) })
        }
    }

    /// Half of a body, at least one byte.
    private static func half(_ body: [UInt8]) -> Int { max(1, body.count / 2) }

    /// The server's JSON error body.
    private static func error(_ message: String) -> [UInt8] {
        Array("{\"error\":\(AdminRoute.json(string: message))}\n".utf8)
    }

    /// An IMF-fixdate (RFC 9110 §5.6.7), e.g. `Sun, 06 Nov 1994 08:49:37 GMT`.
    static func imfFixdate(_ date: Date) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        return formatter.string(from: date)
    }
}
