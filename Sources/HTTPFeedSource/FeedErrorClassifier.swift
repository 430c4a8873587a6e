import AsyncHTTPClient
import Glibc
import NIOCore
import NIOHTTP1
import NIOPosix
import SyncCore

/// Maps errors from the HTTP stack onto ``FeedError`` kinds, which is what the retry policy
/// reads: timeouts and transport failures are retried, malformed bodies too (a proxy hiccup),
/// 4xx other than 408/429 are not.
enum FeedErrorClassifier {
    static func classify(_ error: any Error, request: String) -> FeedError {
        if let feedError = error as? FeedError { return feedError }
        if let client = error as? HTTPClientError {
            switch client {
            case .connectTimeout, .readTimeout, .writeTimeout, .deadlineExceeded, .getConnectionFromPoolTimeout,
                .tlsHandshakeTimeout, .socksHandshakeTimeout, .httpProxyHandshakeTimeout:
                return FeedError(.timeout, "\(request): timed out (\(client))")
            case .remoteConnectionClosed:
                return FeedError(.transport, "\(request): the server closed the connection before the response was complete")
            case .bodyLengthMismatch:
                return FeedError(.transport, "\(request): the body ended before its Content-Length")
            default:
                return FeedError(.transport, "\(request): \(client)")
            }
        }
        if let connection = error as? NIOConnectionError {
            return FeedError(.transport, "\(request): \(describe(connection))")
        }
        if let channel = error as? ChannelError {
            if case .connectTimeout = channel { return FeedError(.timeout, "\(request): connect timed out") }
            return FeedError(.transport, "\(request): \(channel)")
        }
        if error is IOError {
            return FeedError(.transport, "\(request): \(reason(error))")
        }
        if error is NIOTooManyBytesError {
            return FeedError(.tooLarge, "\(request): the body exceeds the size limit")
        }
        if error is HTTPParserError {
            return FeedError(.transport, "\(request): the server sent an invalid HTTP response (\(error))")
        }
        // NIOHTTPCompression's DecompressionError is not visible to this module (it is not a
        // direct dependency), so it is recognised by name: `.limit` means too large, anything
        // else a corrupt encoding.
        let typeName = String(reflecting: type(of: error))
        if typeName.hasSuffix("DecompressionError") {
            if String(describing: error).contains("limit") {
                return FeedError(.tooLarge, "\(request): the decompressed body exceeds the size limit")
            }
            return FeedError(.malformed, "\(request): the compressed body is corrupt (\(error))")
        }
        // Connection failures from NIOPosix (NIOConnectionError with per-address errors) and
        // anything else raised below HTTP: the request did not get a usable answer.
        return FeedError(.transport, "\(request): \(error)")
    }

    /// "cannot connect to HOST port N: 127.0.0.1: Connection refused", one reason per address tried.
    private static func describe(_ connection: NIOConnectionError) -> String {
        if let dns = connection.dnsAError ?? connection.dnsAAAAError {
            return "cannot resolve \(connection.host): \(dns)"
        }
        let reasons = connection.connectionErrors.map { failure in
            "\(failure.target.ipAddress ?? connection.host): \(reason(failure.error))"
        }
        return "cannot connect to \(connection.host) port \(connection.port): "
            + (reasons.isEmpty ? "no address to try" : reasons.joined(separator: "; "))
    }

    /// The system's words for a socket error ("Connection refused"), not NIO's wrapping of them.
    private static func reason(_ error: any Error) -> String {
        (error as? IOError).map { String(cString: strerror($0.errnoCode)) } ?? "\(error)"
    }
}
