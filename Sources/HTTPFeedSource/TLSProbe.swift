import Foundation
import NIOCore
import NIOPosix
import NIOSSL
import NIOTLS

/// Reads the issuer of a server's certificate without trusting it, to say which CA an untrusted
/// certificate comes from. Used only after a handshake failed verification; never for content.
enum TLSProbe {
    /// The issuer as `CN=…, O=…`, or `nil` when the server cannot be reached or shows no
    /// certificate within `timeout`.
    static func issuer(of url: URL, timeout: Duration = .seconds(5)) async -> String? {
        guard let host = url.host, url.scheme?.lowercased() == "https" else { return nil }
        let port = url.port ?? 443
        var tls = TLSConfiguration.makeClientConfiguration()
        // Only the certificate is read; nothing is sent over this connection.
        tls.certificateVerification = .none
        guard let context = try? NIOSSLContext(configuration: tls) else { return nil }
        let isAddress = host.contains(":") || host.allSatisfy { $0.isNumber || $0 == "." }
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        let handshake = loop.makePromise(of: Void.self)
        let nanoseconds = Int64(timeout.components.seconds) * 1_000_000_000 + timeout.components.attoseconds / 1_000_000_000
        let bootstrap = ClientBootstrap(group: loop)
            .connectTimeout(.nanoseconds(nanoseconds))
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let ssl = try NIOSSLClientHandler(context: context, serverHostname: isAddress ? nil : host)
                    try channel.pipeline.syncOperations.addHandler(ssl)
                    try channel.pipeline.syncOperations.addHandler(HandshakeWatcher(done: handshake))
                }
            }
        let expiry = loop.scheduleTask(in: .nanoseconds(nanoseconds)) { handshake.fail(ChannelError.connectTimeout(.nanoseconds(nanoseconds))) }
        defer { expiry.cancel() }
        guard let channel = try? await bootstrap.connect(host: host, port: port).get() else {
            handshake.fail(ChannelError.ioOnClosedChannel)
            return nil
        }
        defer { channel.close(promise: nil) }
        guard (try? await handshake.futureResult.get()) != nil,
              let certificate = try? await channel.nioSSL_peerCertificate().get()
        else { return nil }
        let names = certificate.issuerName.compactMap { name -> String? in
            let key: String? = switch name.type {
            case .commonName: "CN"
            case .organization: "O"
            case .organizationalUnit: "OU"
            case .country: "C"
            default: nil
            }
            return key.map { "\($0)=\(name.value)" }
        }
        return names.isEmpty ? nil : names.joined(separator: ", ")
    }

    /// Completes when the TLS handshake does.
    private final class HandshakeWatcher: ChannelInboundHandler {
        typealias InboundIn = Any
        let done: EventLoopPromise<Void>

        init(done: EventLoopPromise<Void>) {
            self.done = done
        }

        func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
            if case .handshakeCompleted? = event as? TLSUserEvent { done.succeed() }
            context.fireUserInboundEventTriggered(event)
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) {
            done.fail(error)
        }

        func channelInactive(context: ChannelHandlerContext) {
            done.fail(ChannelError.ioOnClosedChannel)
            context.fireChannelInactive()
        }
    }
}
