import CNetlink
import ConnectivityPolicy
import Foundation

extension NetlinkMonitor {
    /// Reads the kernel's tables once with fresh sockets, bypassing any cache.
    ///
    /// Used to check a running monitor against the kernel, and by tools that want one look.
    /// The kernel's route to each of `addresses` is looked up too (``NetworkSnapshot/kernelRoutes``).
    public static func dumpSnapshot(networkNamespacePath: String? = nil, lookingUp addresses: [IPAddress] = []) async throws -> NetworkSnapshot {
        try await withCheckedThrowingContinuation { (result: CheckedContinuation<NetworkSnapshot, any Error>) in
            // A thread of its own: entering a namespace changes the calling thread for good.
            let thread = Thread {
                do throws(NetlinkError) {
                    if let networkNamespacePath { try NetlinkEventLoop.enterNamespace(networkNamespacePath) }
                    var snapshot = try dumpOnThisThread()
                    if !addresses.isEmpty { snapshot.kernelRoutes = try KernelRouteLookup().lookup(addresses).routes }
                    result.resume(returning: snapshot)
                } catch {
                    result.resume(throwing: error)
                }
            }
            thread.start()
        }
    }

    private static func dumpOnThisThread() throws(NetlinkError) -> NetworkSnapshot {
        guard let socket = nl_socket_alloc() else { throw NetlinkError("nl_socket_alloc", errno: ENOMEM) }
        defer { nl_socket_free(socket) }
        try check("connect netlink socket", nl_connect(socket, NETLINK_ROUTE))
        var links: OpaquePointer?, addresses: OpaquePointer?
        defer {
            nl_cache_free(links)
            nl_cache_free(addresses)
        }
        try check("dump links", rtnl_link_alloc_cache(socket, AF_UNSPEC, &links))
        try check("dump addresses", rtnl_addr_alloc_cache(socket, &addresses))
        // Routes as the kernel lists them, one entry per dumped route. Not libnl's route cache: it
        // folds routes that share an identity (IPv4 `ip route append`, IPv6 non-ECMP twins) into
        // one, so it is not a faithful picture to check the monitor against.
        var routes: [RouteInfo] = []
        try RouteMessage.dump(socket: socket, restart: { routes.removeAll() }) { routes.append($0.route) }
        return KernelObjects.snapshot(links: links, addresses: addresses, routes: routes)
    }
}
