import AsyncHTTPClient
import Glibc
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import SyncCore

/// Maps errors from the HTTP stack onto ``FeedError`` kinds, which is what the retry policy
/// reads: timeouts and transport failures are retried, malformed bodies too (a proxy hiccup),
/// 4xx other than 408/429 are not.
enum FeedErrorClassifier {
    static func classify(_ error: any Error, request: String) -> FeedError {
        if let feedError = error as? FeedError { return feedError }
        var feedError = classifyKind(error, request: request)
        feedError.serverDidNotAnswer = serverDidNotAnswer(error)
        return feedError
    }

    /// Whether no connection could be made at all: a connect timeout, or every address
    /// unreachable (EHOSTUNREACH, ENETUNREACH, ETIMEDOUT). A refusal is an answer.
    static func serverDidNotAnswer(_ error: any Error) -> Bool {
        let silent: Set<Int32> = [EHOSTUNREACH, ENETUNREACH, ETIMEDOUT]
        if let client = error as? HTTPClientError { return client == .connectTimeout }
        if let channel = error as? ChannelError, case .connectTimeout = channel { return true }
        if let connection = error as? NIOConnectionError {
            guard connection.dnsAError == nil, connection.dnsAAAAError == nil, !connection.connectionErrors.isEmpty else { return false }
            return connection.connectionErrors.allSatisfy { failure in
                if let io = failure.error as? IOError { return silent.contains(io.errnoCode) }
                if let channel = failure.error as? ChannelError, case .connectTimeout = channel { return true }
                return false
            }
        }
        if let io = error as? IOError { return silent.contains(io.errnoCode) }
        return false
    }

    private static func classifyKind(_ error: any Error, request: String) -> FeedError {
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
        if let tls = classifyTLS(error, request: request) { return tls }
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

    /// The words of a certificate that no trusted CA signed.
    static let untrusted = "certificate not trusted"

    /// TLS failures in words, without BoringSSL's error stack (codes and build paths). Failures
    /// on certificates are `.tls` (permanent until the configuration changes); others transport.
    private static func classifyTLS(_ error: any Error, request: String) -> FeedError? {
        if let extra = error as? NIOSSLExtraError, extra == .failedToValidateHostname {
            return FeedError(.tls, "\(request): host name mismatch: the server's certificate does not name the host in the url")
        }
        let reasons: [String]
        if let boring = error as? BoringSSLError {
            // An alert from the server after the handshake started (a client certificate refused).
            reasons = boringSSLReasons(boring)
        } else if let ssl = error as? NIOSSLError {
            switch ssl {
            case .handshakeFailed(let failure):
                reasons = boringSSLReasons(failure)
            case .unableToValidateCertificate, .noCertificateToValidate:
                return FeedError(.tls, "\(request): certificate not trusted (it could not be validated)")
            default:
                return FeedError(.transport, "\(request): TLS failed (\(ssl))")
            }
        } else {
            return nil
        }
        if reasons.contains("CERTIFICATE_VERIFY_FAILED") {
            return FeedError(.tls, "\(request): \(untrusted) (its issuer is not in the trust store; set ca_file to the CA that issued it)")
        }
        let refused = ["ALERT_CERTIFICATE_REQUIRED", "ALERT_BAD_CERTIFICATE", "ALERT_UNKNOWN_CA", "ALERT_CERTIFICATE_UNKNOWN",
                       "ALERT_HANDSHAKE_FAILURE", "ALERT_ACCESS_DENIED"]
        if let reason = reasons.first(where: { reason in refused.contains { reason.hasSuffix($0) } }) {
            return FeedError(.tls, "\(request): the server refused the TLS handshake (\(reason)): "
                + "check client_certificate and client_key")
        }
        return FeedError(.transport, "\(request): TLS handshake failed (\(reasons.isEmpty ? "no reason given" : reasons.joined(separator: ", ")))")
    }

    /// The reason names in a BoringSSL error ("…:OPENSSL_internal:CERTIFICATE_VERIFY_FAILED at
    /// /build/path.cc:123" gives "CERTIFICATE_VERIFY_FAILED").
    private static func boringSSLReasons(_ error: BoringSSLError) -> [String] {
        let text = String(describing: error)
        var reasons: [String] = []
        var rest = Substring(text)
        while let range = rest.range(of: "OPENSSL_internal:") {
            let tail = rest[range.upperBound...]
            let name = tail.prefix { $0.isLetter || $0.isNumber || $0 == "_" }
            if !name.isEmpty { reasons.append(String(name)) }
            rest = tail
        }
        return reasons
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
