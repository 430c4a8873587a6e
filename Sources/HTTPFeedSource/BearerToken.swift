import Foundation
import SyncCore

/// A bearer token that never shows up in logs, descriptions, dumps or mirrors.
public struct BearerToken: Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    let secret: String

    /// Wraps a token; surrounding whitespace (a trailing newline from a file) is dropped.
    public init(_ token: String) {
        secret = token.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Always `<redacted>`: the secret never reaches a log line.
    public var description: String { "<redacted>" }
    /// Always `BearerToken(<redacted>)`, so debug output hides the secret too.
    public var debugDescription: String { "BearerToken(<redacted>)" }
    /// A mirror without children, so `dump` and debuggers cannot show the secret.
    public var customMirror: Mirror { Mirror(self, children: [:]) }
}

/// How requests authenticate.
public enum FeedAuthorization: Sendable, Hashable, CustomStringConvertible {
    /// `Authorization: Bearer <token>` with a token from configuration.
    case bearer(BearerToken)
    /// `Authorization: Bearer <token>` with the token read from a file before every request,
    /// so a rotated token is picked up without a restart (systemd credentials, Kubernetes secrets).
    case bearerTokenFile(path: String)

    /// Where the token comes from, never the token: safe for logs.
    public var description: String {
        switch self {
        case .bearer: return "bearer token <redacted>"
        case .bearerTokenFile(let path): return "bearer token from \(path)"
        }
    }

    /// The header value; errors name the file, never its content.
    func headerValue() throws(FeedError) -> String {
        let token: BearerToken
        switch self {
        case .bearer(let value):
            token = value
        case .bearerTokenFile(let path):
            let data: Data
            do {
                data = try Data(contentsOf: URL(fileURLWithPath: path))
            } catch {
                throw FeedError(.other, "cannot read bearer token file \(path): \(Self.reason(error))")
            }
            guard let text = String(data: data, encoding: .utf8) else {
                throw FeedError(.other, "bearer token file \(path) is not UTF-8 text")
            }
            token = BearerToken(text)
        }
        guard !token.secret.isEmpty else { throw FeedError(.other, "the bearer token is empty") }
        guard !token.secret.contains(where: { $0.isNewline || $0 == "\0" }) else {
            throw FeedError(.other, "the bearer token contains a line break or NUL")
        }
        return "Bearer \(token.secret)"
    }

    private static func reason(_ error: any Error) -> String {
        let nsError = error as NSError
        if let underlying = nsError.userInfo[NSUnderlyingErrorKey] as? NSError, underlying.domain == NSPOSIXErrorDomain,
            let code = POSIXErrorCode(rawValue: Int32(underlying.code)) {
            return String(cString: strerror(code.rawValue))
        }
        return nsError.localizedDescription
    }
}
