#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import NIOCore

/// What faults do to a connection.
enum ConnectionFaults {
    /// Closes the connection with a TCP RST rather than an orderly FIN: `SO_LINGER` with a
    /// zero timeout makes `close(2)` discard unsent data and reset, as a crashing peer or a
    /// middlebox would.
    static func reset(_ channel: any Channel) async {
        if let provider = channel as? any SocketOptionProvider {
            try? await provider.setSoLinger(linger(l_onoff: 1, l_linger: 0)).get()
        }
        try? await channel.close()
    }
}
