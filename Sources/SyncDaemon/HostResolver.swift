import ConnectivityPolicy
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Resolves a feed's host into the destination its connectivity verdict is computed for.
enum HostResolver {
    /// A literal address is used as is; a name is resolved with getaddrinfo(3). When the name
    /// cannot be resolved (offline at start, no DNS yet), the destination falls back to the
    /// internet at large: a default route of either family.
    static func destination(for url: URL) -> Destination {
        guard let host = url.host?.trimmingCharacters(in: CharacterSet(charactersIn: "[]")), !host.isEmpty else { return .internet }
        if let literal = IPAddress(host) { return .addresses([literal]) }
        let addresses = resolve(host)
        return addresses.isEmpty ? .internet : .addresses(addresses)
    }

    static func resolve(_ host: String) -> [IPAddress] {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var result: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, nil, &hints, &result) == 0, let first = result else { return [] }
        defer { freeaddrinfo(first) }
        var addresses: [IPAddress] = []
        var cursor: UnsafeMutablePointer<addrinfo>? = first
        while let info = cursor?.pointee {
            if info.ai_family == AF_INET, let raw = info.ai_addr {
                let address = raw.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { $0.pointee.sin_addr }
                if let ip = withUnsafeBytes(of: address, { IPAddress(bytes: Array($0)) }) { addresses.append(ip) }
            } else if info.ai_family == AF_INET6, let raw = info.ai_addr {
                let address = raw.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { $0.pointee.sin6_addr }
                if let ip = withUnsafeBytes(of: address, { IPAddress(bytes: Array($0)) }) { addresses.append(ip) }
            }
            cursor = info.ai_next
        }
        var seen = Set<IPAddress>()
        return addresses.filter { seen.insert($0).inserted }
    }
}
