/// When routes with a lifetime stop being used: IPv6 routes from router advertisements, or
/// added with `expires`.
///
/// The kernel says nothing when a route's lifetime ends: it stops choosing the route at once
/// but deletes it (and notifies) only at its next garbage collection, up to
/// `net.ipv6.route.gc_interval` (30 s) later. The monitor asks the kernel again when the
/// earliest lifetime here ends. Lifetimes can also be extended silently (a router advertisement
/// refreshes them without a notification), so what falls due is re-read from a fresh dump, not
/// trusted.
struct RouteExpiries<Instant: Comparable> {
    private var due: [RouteKey: Instant] = [:]

    /// The earliest instant a route's lifetime ends, if any route has one.
    private(set) var next: Instant?

    /// Records what a notification or dumped route says about its lifetime: `expiry` is `nil`
    /// for a route without one, and for a deletion.
    mutating func record(_ key: RouteKey, expiry: Instant?) {
        if let expiry {
            due[key] = expiry
            if next.map({ expiry < $0 }) ?? true { next = expiry }
        } else if !due.isEmpty, let old = due.removeValue(forKey: key), old == next {
            next = due.values.min()
        }
    }

    /// Forgets every route, before a refill from a fresh dump records them again.
    mutating func removeAll() {
        due.removeAll()
        next = nil
    }

    /// Whether a lifetime has ended by `now`.
    func isDue(at now: Instant) -> Bool {
        next.map { $0 <= now } ?? false
    }
}
