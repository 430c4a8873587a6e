import DemoFeedServer

/// A misbehaviour a ``FaultInjector`` makes the demo feed server commit on one feed request.
///
/// Written as a spec string in flags, query parameters and the admin API:
///
/// | spec | effect |
/// | --- | --- |
/// | `status:503` (or `503`) | that status, JSON error body |
/// | `status:429:2` | 429 with `Retry-After: 2` (seconds) |
/// | `status:503:date+3` | 503 with `Retry-After` as an HTTP-date 3 s ahead |
/// | `latency:250` | answer normally after 250 ms |
/// | `stall` / `stall:body` | never answer / send headers and part of the body, then nothing |
/// | `malformed` | 200 with a body that is not JSON |
/// | `truncated` | 200, correctly framed, JSON cut off mid-item |
/// | `oversized[:BYTES][:chunked]` | 200 with a valid page padded to BYTES (default 4 MiB), with `Content-Length` or chunked |
/// | `reset` / `reset:body` | TCP reset before any response / after the headers and part of the body |
public enum Fault: Sendable, Hashable, CustomStringConvertible {
    /// Answer with this status and a JSON error body, with `Retry-After` when given.
    case status(Int, retryAfter: RetryAfter?)
    /// Answer normally after this delay.
    case latency(milliseconds: Int)
    /// Stop answering at this point and hold the connection.
    case stall(StallPoint)
    /// Status 200 with a body that is not JSON.
    case malformed
    /// Status 200, correctly framed, with the JSON cut off mid-item.
    case truncated
    /// Status 200 with a valid page padded to `bytes`, with `Content-Length` or chunked.
    case oversized(bytes: Int, chunked: Bool)
    /// Reset the TCP connection at this point.
    case reset(ResetPoint)

    /// How a `Retry-After` header is written.
    public enum RetryAfter: Sendable, Hashable {
        /// `Retry-After: N` (delay-seconds).
        case seconds(Int)
        /// `Retry-After: <HTTP-date>` this many seconds after the response's `Date`.
        case date(secondsAhead: Int)
    }

    /// Where a stalled response stops.
    public enum StallPoint: String, Sendable, Hashable {
        /// Nothing is ever sent.
        case headers
        /// Headers and part of the body are sent, then nothing.
        case body
    }

    /// Where the connection is reset.
    public enum ResetPoint: String, Sendable, Hashable {
        /// The connection is reset before any byte of the response.
        case headers
        /// The connection is reset after the headers and part of the body.
        case body
    }

    /// The size of an `oversized` page when the spec gives none: 4 MiB.
    public static let defaultOversizedBytes = 4 << 20

    /// Parses a fault spec (see the type's documentation).
    public init(spec: String) throws(DemoFeedServerError) {
        let parts = spec.split(separator: ":", omittingEmptySubsequences: false).map(String.init)
        func bad(_ why: String) -> DemoFeedServerError { .invalidArgument("fault '\(spec)': \(why)") }
        func statusCode(_ raw: String) throws(DemoFeedServerError) -> Int {
            guard let code = Int(raw), (400...599).contains(code) else { throw bad("status must be 400...599") }
            return code
        }
        switch parts[0] {
        case "status":
            guard (2...3).contains(parts.count) else { throw bad("expected status:CODE[:RETRY_AFTER]") }
            let code = try statusCode(parts[1])
            var retryAfter: RetryAfter?
            if parts.count == 3 {
                let raw = parts[2]
                if raw.hasPrefix("date+"), let ahead = Int(raw.dropFirst(5)), ahead >= 0 {
                    retryAfter = .date(secondsAhead: ahead)
                } else if let seconds = Int(raw), seconds >= 0 {
                    retryAfter = .seconds(seconds)
                } else {
                    throw bad("Retry-After must be SECONDS or date+SECONDS")
                }
            }
            self = .status(code, retryAfter: retryAfter)
        case "latency":
            guard parts.count == 2, let ms = Int(parts[1]), ms >= 0 else { throw bad("expected latency:MILLISECONDS") }
            self = .latency(milliseconds: ms)
        case "stall":
            guard parts.count <= 2, let point = StallPoint(rawValue: parts.count == 2 ? parts[1] : "headers") else {
                throw bad("expected stall or stall:body")
            }
            self = .stall(point)
        case "reset":
            guard parts.count <= 2, let point = ResetPoint(rawValue: parts.count == 2 ? parts[1] : "headers") else {
                throw bad("expected reset or reset:body")
            }
            self = .reset(point)
        case "malformed":
            guard parts.count == 1 else { throw bad("takes no argument") }
            self = .malformed
        case "truncated":
            guard parts.count == 1 else { throw bad("takes no argument") }
            self = .truncated
        case "oversized":
            var rest = parts.dropFirst()
            let chunked = rest.last == "chunked"
            if chunked { rest = rest.dropLast() }
            guard rest.count <= 1 else { throw bad("expected oversized[:BYTES][:chunked]") }
            var bytes = Fault.defaultOversizedBytes
            if let raw = rest.first {
                guard let value = Int(raw), value > 0 else { throw bad("BYTES must be a positive integer") }
                bytes = value
            }
            self = .oversized(bytes: bytes, chunked: chunked)
        default:
            guard parts.count == 1, Int(parts[0]) != nil else {
                throw bad("unknown fault; use status, latency, stall, malformed, truncated, oversized or reset")
            }
            self = .status(try statusCode(parts[0]), retryAfter: nil)
        }
    }

    /// The spec string that parses back to this fault.
    public var description: String {
        switch self {
        case .status(let code, nil): return "status:\(code)"
        case .status(let code, .seconds(let s)?): return "status:\(code):\(s)"
        case .status(let code, .date(let ahead)?): return "status:\(code):date+\(ahead)"
        case .latency(let ms): return "latency:\(ms)"
        case .stall(let point): return point == .headers ? "stall" : "stall:body"
        case .malformed: return "malformed"
        case .truncated: return "truncated"
        case .oversized(let bytes, let chunked): return "oversized:\(bytes)" + (chunked ? ":chunked" : "")
        case .reset(let point): return point == .headers ? "reset" : "reset:body"
        }
    }
}

/// A fault with the probability that any one feed request gets it (startup flags).
public struct RandomFault: Sendable, Hashable {
    /// The fault.
    public var fault: Fault
    /// 0...1.
    public var probability: Double

    /// `fault` for each request with probability `probability`.
    public init(fault: Fault, probability: Double) {
        self.fault = fault
        self.probability = probability
    }

    /// Parses `SPEC=PROBABILITY`, e.g. `status:503=0.1` or `reset=0.02`.
    public init(spec: String) throws(DemoFeedServerError) {
        guard let equals = spec.lastIndex(of: "=") else {
            throw .invalidArgument("random fault '\(spec)': expected SPEC=PROBABILITY")
        }
        let fault = try Fault(spec: String(spec[..<equals]))
        guard let p = Double(spec[spec.index(after: equals)...]), (0...1).contains(p) else {
            throw .invalidArgument("random fault '\(spec)': PROBABILITY must be within 0...1")
        }
        self.init(fault: fault, probability: p)
    }
}

/// Faults scripted for upcoming requests: "the next `count` matching requests get `fault`".
public struct ScriptedFault: Sendable, Hashable {
    /// The fault.
    public var fault: Fault
    /// How many requests still get it.
    public var remaining: Int
    /// Only requests to this feed; `nil` for any feed.
    public var feed: String?
    /// Only requests paging this way; `nil` for any.
    public var kind: RequestKind?

    /// `fault` for the next `count` requests that match `feed` and `kind`.
    public init(_ fault: Fault, count: Int = 1, feed: String? = nil, kind: RequestKind? = nil) {
        self.fault = fault
        self.remaining = count
        self.feed = feed
        self.kind = kind
    }

    func matches(feed: String, kind: RequestKind) -> Bool {
        (self.feed == nil || self.feed == feed) && (self.kind == nil || self.kind == kind)
    }
}
