import HeapModule

/// When routes with a lifetime stop being used: IPv6 routes from router advertisements, or
/// added with `expires`.
///
/// The kernel says nothing when a route's lifetime ends: it stops choosing the route at once
/// but deletes it (and notifies) only at its next garbage collection, up to
/// `net.ipv6.route.gc_interval` (30 s) later. The monitor asks the kernel again when the
/// earliest lifetime here ends. Lifetimes can also be extended silently (a router advertisement
/// refreshes them without a notification), so what falls due is re-read from a fresh dump, not
/// trusted.
struct RouteExpiries<Instant: Hashable & Comparable> {
    private var due: [RouteKey: Instant] = [:]
    /// How many routes of `due` end at each instant.
    private var routesEnding: [Instant: Int] = [:]
    /// The instants routes end at, earliest on top. It may hold instants no route ends at any
    /// more (the route was deleted or given another lifetime): those are dropped when they reach
    /// the top, and the heap is rebuilt when they outnumber the live ones. So deleting the route
    /// that ends first costs O(log n), not a scan of every route's lifetime, which would make a
    /// storm of expiring routes deleted in the order they were added quadratic (BENCHMARKS.md,
    /// route storm, "route lifetimes").
    private var instants = Heap<Instant>()

    /// The earliest instant a route's lifetime ends, if any route has one.
    private(set) var next: Instant?

    /// Records what a notification or dumped route says about its lifetime: `expiry` is `nil`
    /// for a route without one, and for a deletion.
    mutating func record(_ key: RouteKey, expiry: Instant?) {
        let old: Instant?
        if let expiry {
            old = due.updateValue(expiry, forKey: key)
            guard old != expiry else { return }
            routesEnding[expiry, default: 0] += 1
            if routesEnding[expiry] == 1 { instants.insert(expiry) }
        } else {
            guard !due.isEmpty, let removed = due.removeValue(forKey: key) else { return }
            old = removed
        }
        if let old {
            if routesEnding[old] == 1 { routesEnding[old] = nil } else { routesEnding[old]? -= 1 }
        }
        if instants.count > 2 * routesEnding.count + 64 { instants = Heap(routesEnding.keys) }
        while let top = instants.min, routesEnding[top] == nil { instants.removeMin() }
        next = instants.min
    }

    /// Forgets every route, before a refill from a fresh dump records them again.
    mutating func removeAll() {
        due.removeAll()
        routesEnding.removeAll()
        instants = Heap()
        next = nil
    }

    /// Whether a lifetime has ended by `now`.
    func isDue(at now: Instant) -> Bool {
        next.map { $0 <= now } ?? false
    }
}
