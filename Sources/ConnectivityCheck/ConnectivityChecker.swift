import AsyncHTTPClient
import ConnectivityPolicy
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix

/// What the connectivity check asks for and expects, as NetworkManager's `[connectivity]`.
public struct ConnectivityCheckConfiguration: Sendable, Hashable {
    /// A URL whose answer is known, e.g. `http://check.example/generate_204`. Plain http on
    /// purpose: a portal can only intercept what it can read.
    public var url: URL
    /// The expected status; `nil`: 204, or 200 when a body is expected.
    public var expectedStatus: Int?
    /// The body must start with this (NetworkManager compares the start); `nil`: not checked.
    public var expectedBody: String?
    /// How often the check runs; the owner schedules it.
    public var interval: Duration
    /// The whole check's time limit.
    public var timeout: Duration

    /// How often the check runs while online unless configured.
    public static let defaultInterval: Duration = .seconds(300)
    /// The limit on one check unless configured.
    public static let defaultTimeout: Duration = .seconds(10)

    /// A check of `url`; by default every 5 minutes, with 10 seconds to answer.
    public init(
        url: URL, expectedStatus: Int? = nil, expectedBody: String? = nil,
        interval: Duration = Self.defaultInterval, timeout: Duration = Self.defaultTimeout
    ) {
        self.url = url
        self.expectedStatus = expectedStatus
        self.expectedBody = expectedBody
        self.interval = interval
        self.timeout = timeout
    }

    var status: Int { expectedStatus ?? (expectedBody == nil ? 204 : 200) }
}

/// The answer of one connectivity check.
public enum ConnectivityCheckResult: Sendable, Hashable, CustomStringConvertible {
    /// The expected answer came back: the network reaches the internet.
    case full
    /// Something answered in place of the check server: a redirect (the portal is its
    /// `Location`) or a wrong status or body (the portal is the check URL itself: a browser
    /// opening it lands on the portal's page).
    case portal(URL)
    /// Nothing answered: the reason in words ("connection timed out", "connection refused").
    case noAnswer(String)

    /// The result in words for logs: `full`, `portal at <url>`, `no answer: <reason>`.
    public var description: String {
        switch self {
        case .full: "full"
        case .portal(let url): "portal at \(url.absoluteString)"
        case .noAnswer(let reason): "no answer: \(reason)"
        }
    }
}

/// NetworkManager's connectivity check: one request to a known URL, never following redirects
/// (a redirect is the evidence of a portal), its answer compared with the expected one.
public final class ConnectivityChecker: Sendable {
    /// What the check asks for and expects.
    public let configuration: ConnectivityCheckConfiguration
    private let client: HTTPClient
    private let ownsClient: Bool
    private let logger: Logger

    /// Uses `client` when given (its owner shuts it down); otherwise makes one, which
    /// ``shutdown()`` releases.
    public init(configuration: ConnectivityCheckConfiguration, client: HTTPClient? = nil, logger: Logger = Logger(label: "syncd.connectivity-check")) {
        self.configuration = configuration
        self.logger = logger
        if let client {
            self.client = client
            ownsClient = false
        } else {
            var settings = HTTPClient.Configuration(redirectConfiguration: .disallow)
            settings.timeout = .init(connect: TimeAmount(configuration.timeout))
            settings.connectionPool = .init(idleTimeout: .seconds(1))
            self.client = HTTPClient(eventLoopGroupProvider: .shared(MultiThreadedEventLoopGroup.singleton), configuration: settings)
            ownsClient = true
        }
    }

    /// Runs one check. Every failure is a result; cancellable.
    public func check() async -> ConnectivityCheckResult {
        var request = HTTPClientRequest(url: configuration.url.absoluteString)
        request.headers.add(name: "User-Agent", value: "syncd connectivity check")
        request.headers.add(name: "Cache-Control", value: "no-cache")
        request.headers.add(name: "Connection", value: "close")
        do {
            let timeout = TimeAmount(configuration.timeout)
            let response = try await client.execute(request, timeout: timeout, logger: logger)
            let status = Int(response.status.code)
            if (300..<400).contains(status) {
                let target = response.headers.first(name: "Location").flatMap { URL(string: $0, relativeTo: configuration.url)?.absoluteURL }
                return .portal(target ?? configuration.url)
            }
            guard status == configuration.status else { return .portal(configuration.url) }
            if let expected = configuration.expectedBody {
                let body = try await response.body.collect(upTo: 64 << 10)
                guard String(buffer: body).hasPrefix(expected) else { return .portal(configuration.url) }
            }
            return .full
        } catch {
            return .noAnswer(Self.words(for: error))
        }
    }

    /// Releases the client this checker made.
    public func shutdown() async throws {
        if ownsClient { try await client.shutdown() }
    }

    /// The failure in a few words, the system's where there are some.
    static func words(for error: any Error) -> String {
        if let client = error as? HTTPClientError {
            switch client {
            case .connectTimeout: return "connection timed out"
            case .deadlineExceeded, .readTimeout: return "timed out waiting for an answer"
            case .remoteConnectionClosed: return "the connection closed without an answer"
            default: return "\(client)"
            }
        }
        if let connection = error as? NIOConnectionError {
            if let dns = connection.dnsAError ?? connection.dnsAAAAError { return "name resolution failed: \(dns)" }
            if let first = connection.connectionErrors.first { return words(for: first.error) }
        }
        if let channel = error as? ChannelError, case .connectTimeout = channel { return "connection timed out" }
        if let io = error as? IOError {
            switch io.errnoCode {
            case ECONNREFUSED: return "connection refused"
            case ECONNRESET: return "connection reset"
            case ETIMEDOUT: return "connection timed out"
            case EHOSTUNREACH: return "host unreachable"
            case ENETUNREACH: return "network unreachable"
            default: return String(cString: strerror(io.errnoCode)).lowercased()
            }
        }
        return "\(error)"
    }
}

/// The answer of one TCP connect attempt.
public enum ServerProbeResult: Sendable, Hashable, CustomStringConvertible {
    /// A connection was made (and closed at once).
    case answered
    /// The host answered with a reset: it is there, nothing listens.
    case refused
    /// Nothing answered: timed out, host or network unreachable.
    case unreachable(String)

    /// The result in words for logs: `answered`, `refused`, `unreachable: <reason>`.
    public var description: String {
        switch self {
        case .answered: "answered"
        case .refused: "refused"
        case .unreachable(let reason): "unreachable: \(reason)"
        }
    }
}

/// Does the server answer at all: one TCP connect, closed at once.
public enum ServerProbe {
    /// Connects to `address` port `port` on an event loop (never blocking a cooperative thread).
    public static func connect(to address: IPAddress, port: Int, timeout: Duration, group: (any EventLoopGroup)? = nil) async -> ServerProbeResult {
        let group = group ?? MultiThreadedEventLoopGroup.singleton
        let nanoseconds = Int64(timeout.components.seconds) * 1_000_000_000 + timeout.components.attoseconds / 1_000_000_000
        do {
            let socketAddress = try SocketAddress(ipAddress: address.description, port: port)
            let channel = try await ClientBootstrap(group: group)
                .connectTimeout(.nanoseconds(nanoseconds))
                .connect(to: socketAddress).get()
            try? await channel.close()
            return .answered
        } catch {
            if let io = error as? IOError, io.errnoCode == ECONNREFUSED { return .refused }
            if let connection = error as? NIOConnectionError,
               connection.connectionErrors.contains(where: { ($0.error as? IOError)?.errnoCode == ECONNREFUSED }) {
                return .refused
            }
            return .unreachable(ConnectivityChecker.words(for: error))
        }
    }
}
