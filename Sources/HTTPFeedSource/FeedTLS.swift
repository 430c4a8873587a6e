import Foundation
import NIOSSL
import SyncCore

/// A feed's TLS settings: a private CA to trust, and a client certificate for feeds that
/// authenticate clients by certificate (mTLS).
public struct FeedTLS: Sendable, Hashable {
    /// PEM file of CA certificates trusted for this feed, in addition to the system store.
    public var caFile: String?
    /// PEM file of the client certificate (and its chain), sent when the server asks for one.
    public var certificateFile: String?
    /// PEM file of the client certificate's private key; `nil` reads it from ``certificateFile``.
    public var keyFile: String?

    /// TLS settings from PEM file paths; all `nil` is the system trust store and no client certificate.
    public init(caFile: String? = nil, certificateFile: String? = nil, keyFile: String? = nil) {
        self.caFile = caFile
        self.certificateFile = certificateFile
        self.keyFile = keyFile
    }

    /// Reads the files as a source would, so a configuration can be checked before use.
    public func validate() throws(FeedError) {
        _ = try configuration()
    }

    /// The NIOSSL configuration, with the files read now: a missing or unreadable file is a
    /// configuration error at startup, named, rather than a handshake failure later.
    func configuration() throws(FeedError) -> TLSConfiguration {
        var tls = TLSDefaults.client()
        if let caFile {
            tls.additionalTrustRoots = [.certificates(try Self.certificates(caFile, what: "ca_file"))]
        }
        if let certificateFile {
            tls.certificateChain = try Self.certificates(certificateFile, what: "client_certificate").map { .certificate($0) }
            let keyPath = keyFile ?? certificateFile
            do {
                tls.privateKey = .privateKey(try NIOSSLPrivateKey(file: keyPath, format: .pem))
            } catch {
                throw FeedError(.other, "client_key \(keyPath): cannot read a PEM private key (\(Self.reason(error, path: keyPath)))")
            }
        } else if keyFile != nil {
            throw FeedError(.other, "client_key is set without client_certificate")
        }
        return tls
    }

    private static func certificates(_ path: String, what: String) throws(FeedError) -> [NIOSSLCertificate] {
        let certificates: [NIOSSLCertificate]
        do {
            certificates = try NIOSSLCertificate.fromPEMFile(path)
        } catch {
            throw FeedError(.other, "\(what) \(path): cannot read PEM certificates (\(reason(error, path: path)))")
        }
        guard !certificates.isEmpty else { throw FeedError(.other, "\(what) \(path): no PEM certificate in the file") }
        return certificates
    }

    private static func reason(_ error: any Error, path: String) -> String {
        FileManager.default.isReadableFile(atPath: path) ? "not PEM, or damaged" : "no such readable file"
    }
}

/// TLS settings every request starts from.
enum TLSDefaults {
    /// A client configuration on the system's trust store; `SSL_CERT_FILE`, when set, names the
    /// store instead, as OpenSSL and curl read it (NIOSSL itself does not).
    static func client(environment: [String: String] = ProcessInfo.processInfo.environment) -> TLSConfiguration {
        var tls = TLSConfiguration.makeClientConfiguration()
        if let file = environment["SSL_CERT_FILE"], !file.isEmpty {
            tls.trustRoots = .file(file)
        }
        return tls
    }
}
