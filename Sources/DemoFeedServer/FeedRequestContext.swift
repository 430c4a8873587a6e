import Hummingbird
import NIOCore

/// The request context: Hummingbird's core storage plus the connection's channel, which a
/// request hook's interventions act on directly.
struct FeedRequestContext: RequestContext {
    var coreContext: CoreRequestContextStorage
    let channel: any Channel

    init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        channel = source.channel
    }

    /// Whether the peer is on this host; admin endpoints answer only then.
    var isLoopbackPeer: Bool {
        guard let address = channel.remoteAddress else { return false }
        switch address {
        case .unixDomainSocket: return true
        case .v4: return address.ipAddress?.hasPrefix("127.") ?? false
        case .v6: return address.ipAddress == "::1" || (address.ipAddress?.hasPrefix("::ffff:127.") ?? false)
        }
    }
}
