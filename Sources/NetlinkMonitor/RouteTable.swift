import ConnectivityPolicy

/// The kernel's routes, kept from route notifications in a hash set keyed by the kernel's route
/// identity (``RouteKey``): O(1) per notification whatever the table size.
///
/// This replaces libnl's route cache, whose fixed-size hash table makes every add, delete and
/// lookup walk a chain that grows with the table (most of the monitor's CPU in a route storm;
/// measured: BENCHMARKS.md, route storm), and whose IPv6 merging (`route_update`) broke
/// `nl_cache_resync`.
///
/// The rules follow what the kernel (checked on 6.x) sends:
/// - One key can hold several routes ("aliases"): IPv4 `append`/`prepend`, or IPv6 routes that
///   are not ECMP siblings (a device route next to a gateway route, a blackhole). `REPLACE`
///   replaces the first of them, as `fib_table_insert` does.
/// - IPv6 ECMP: a new or appended sibling is announced as the whole route (`RTA_MULTIPATH` with
///   every sibling), so it replaces the alias it overlaps; deleting one sibling
///   (`ip -6 route del … via GW`) is announced as an `RTM_DELROUTE` with that next hop alone,
///   which removes only that hop.
///
/// Besides the set it records what changed since the last snapshot, so that the next
/// snapshot's sorted route list is a linear merge of the previous one instead of a full sort.
struct RouteTable {
    /// One route of an identity, hashed and compared by the identity alone, so the set can be
    /// probed with the route of a notification. Kept small (the route plus one reference): at
    /// 100,000 routes the table's size is most of the monitor's memory.
    private struct Slot: Hashable {
        var route: RouteInfo
        /// tos and IPv6 source prefix, which nearly every route lacks (`nil` then).
        var extra: KeyExtra?

        init(_ key: RouteKey, _ route: RouteInfo) {
            self.route = route
            extra = key.tos == 0 && key.source == nil ? nil : KeyExtra(tos: key.tos, source: key.source)
        }

        static func == (a: Slot, b: Slot) -> Bool {
            a.route.destination == b.route.destination && a.route.table == b.route.table
                && a.route.priority == b.route.priority && a.extra == b.extra
        }

        func hash(into hasher: inout Hasher) {
            hasher.combine(route.destination)
            hasher.combine(route.table)
            hasher.combine(route.priority)
            hasher.combine(extra)
        }
    }

    private final class KeyExtra: Hashable {
        let tos: UInt8
        let source: IPPrefix?
        init(tos: UInt8, source: IPPrefix?) {
            self.tos = tos
            self.source = source
        }
        static func == (a: KeyExtra, b: KeyExtra) -> Bool { a.tos == b.tos && a.source == b.source }
        func hash(into hasher: inout Hasher) {
            hasher.combine(tos)
            hasher.combine(source)
        }
    }

    /// The first route of every identity, in the kernel's order of aliases.
    private var first: Set<Slot> = []
    /// Further routes of an identity (aliases), rare: keyed by a slot of that identity.
    private var more: [Slot: [RouteInfo]] = [:]
    /// Number of routes (aliases counted one by one).
    private(set) var count = 0
    /// Routes added and removed since ``takeSortedRoutes(previous:)`` last ran.
    private var added: [RouteInfo] = []
    private var removed: [RouteInfo] = []
    /// Set when the changes were not recorded (the table was refilled from a dump).
    private var needsFullSort = true

    init() {}

    /// Drops every route, before a refill from a fresh dump.
    mutating func removeAll() {
        first = []
        more = [:]
        count = 0
        added = []
        removed = []
        needsFullSort = true
    }

    /// Adds a route from a dump, after the routes dumped before it under the same key.
    mutating func insertDumped(_ message: RouteMessage) {
        let message = interned(message)
        let slot = Slot(message.key, message.route)
        if first.contains(slot) {
            more[slot, default: []].append(message.route)
        } else {
            first.insert(slot)
        }
        count += 1
    }

    /// Recent next-hop lists, so routes through the same gateway share one array: a 100,000-route
    /// table usually has a handful of distinct next hops, and an array per route costs ~8 MB.
    private var hopLists: [[NextHop]: [NextHop]] = [:]

    private mutating func interned(_ message: RouteMessage) -> RouteMessage {
        var message = message
        if let shared = hopLists[message.route.nextHops] {
            message.route.nextHops = shared
        } else {
            if hopLists.count >= 1024 { hopLists.removeAll(keepingCapacity: true) }
            hopLists[message.route.nextHops] = message.route.nextHops
        }
        return message
    }

    /// Applies one notification. Returns whether the table changed.
    @discardableResult
    mutating func apply(_ message: RouteMessage) -> Bool {
        let message = message.kind == .new ? interned(message) : message
        let probe = Slot(message.key, message.route)
        // Fast paths, which a storm takes for every message: a new identity, or the deletion of
        // the only route of an identity.
        guard let index = first.firstIndex(of: probe) else {
            guard message.kind == .new else { return false }
            first.insert(probe)
            count += 1
            if !needsFullSort { added.append(message.route) }
            return true
        }
        let current = first[index]
        if message.kind == .delete, more[probe] == nil, Self.sameRoute(current.route, message.route) {
            first.remove(at: index)
            count -= 1
            if !needsFullSort { removed.append(current.route) }
            return true
        }

        let before = [current.route] + (more[probe] ?? [])
        var routes = before
        switch message.kind {
        case .new: Self.add(message, to: &routes)
        case .delete: Self.remove(message, from: &routes)
        }
        guard routes != before else { return false }
        if !needsFullSort {
            // A multiset difference; aliases are few, so quadratic is fine.
            var gone = before
            for route in routes {
                if let i = gone.firstIndex(of: route) { gone.remove(at: i) } else { added.append(route) }
            }
            removed.append(contentsOf: gone)
        }
        count += routes.count - before.count
        if let head = routes.first {
            var slot = current
            slot.route = head
            first.update(with: slot)
            more[probe] = routes.count > 1 ? Array(routes.dropFirst()) : nil
        } else {
            first.remove(at: index)
            more[probe] = nil
        }
        return true
    }

    private static func add(_ message: RouteMessage, to routes: inout [RouteInfo]) {
        let new = message.route
        if message.replaces {
            // The kernel replaces the first alias; IPv6 the first that is ECMP-capable like the new
            // one, or else the first of the same metric (`fallback_ins` in fib6_add_rt2: a unicast
            // route replacing a prohibit route, found by the randomized tests' policy tables).
            let index = new.destination.family == .ipv6
                ? routes.firstIndex { isECMPCapable($0) == isECMPCapable(new) } ?? routes.indices.first
                : routes.indices.first
            if let index { routes[index] = new } else { routes.append(new) }
            return
        }
        // The same route again (announced twice, or replayed after a dump that already had it).
        if let index = routes.firstIndex(where: { sameRoute($0, new) }) {
            routes[index] = new
            return
        }
        // IPv6: a sibling joined an ECMP route and the whole route was announced.
        if new.destination.family == .ipv6, isECMPCapable(new),
           let index = routes.firstIndex(where: { isECMPCapable($0) && !hops($0).isDisjoint(with: hops(new)) }) {
            routes[index] = new
            return
        }
        if message.appends || new.destination.family == .ipv6 {
            routes.append(new)
        } else {
            // IPv4 without APPEND (`ip route prepend`) goes before the others.
            routes.insert(new, at: 0)
        }
    }

    private static func remove(_ message: RouteMessage, from routes: inout [RouteInfo]) {
        let gone = message.route
        if let index = routes.firstIndex(where: { sameRoute($0, gone) }) {
            routes.remove(at: index)
            return
        }
        // IPv6: one sibling of an ECMP route was deleted; the rest of the route stays.
        if gone.destination.family == .ipv6, gone.nextHops.count == 1, let hop = hops(gone).first,
           let index = routes.firstIndex(where: { $0.nextHops.count > 1 && hops($0).contains(hop) }) {
            routes[index].nextHops.removeAll { HopIdentity($0) == hop }
            return
        }
        // Not found as announced (state missed silently, e.g. a linkdown flag): the kernel deleted
        // one route of this key; prefer one of the same type.
        if let index = routes.firstIndex(where: { $0.type == gone.type }) ?? routes.indices.first {
            routes.remove(at: index)
        }
    }

    /// A next hop without its flags: the flags change silently (linkdown), the identity does not.
    private struct HopIdentity: Hashable {
        var linkIndex: Int32
        var gateway: IPAddress?
        init(_ hop: NextHop) {
            linkIndex = hop.linkIndex
            gateway = hop.gateway
        }
    }

    private static func hops(_ route: RouteInfo) -> Set<HopIdentity> {
        Set(route.nextHops.map(HopIdentity.init))
    }

    private static func sameRoute(_ a: RouteInfo, _ b: RouteInfo) -> Bool {
        a.type == b.type && a.nextHops.count == b.nextHops.count
            && zip(a.nextHops, b.nextHops).allSatisfy { HopIdentity($0) == HopIdentity($1) }
    }

    /// The kernel only makes IPv6 gateway routes ECMP siblings (`rt6_qualify_for_ecmp`).
    private static func isECMPCapable(_ route: RouteInfo) -> Bool {
        route.type == .unicast && !route.nextHops.isEmpty && route.nextHops.allSatisfy { $0.gateway != nil }
    }

    /// Every route in ``NetworkSnapshot``'s canonical order, and forgets the recorded changes.
    ///
    /// `previous` must be the list this returned last time. When the changes since then are
    /// known, the result is a linear merge of `previous` with the sorted additions, minus the
    /// removals: O(n + k log k) for k changes, against O(n log n) for sorting the whole table.
    mutating func takeSortedRoutes(previous: [RouteInfo]) -> [RouteInfo] {
        defer {
            added = []
            removed = []
            needsFullSort = false
        }
        if !needsFullSort, let merged = Self.merge(previous, adding: added.sorted(), removing: removed.sorted()), merged.count == count {
            return merged
        }
        var all: [RouteInfo] = []
        all.reserveCapacity(count)
        for slot in first { all.append(slot.route) }
        for aliases in more.values { all.append(contentsOf: aliases) }
        all.sort()
        return all
    }

    /// `base` + `adding` − `removing` as multisets, all three sorted; `nil` if a removal is missing.
    private static func merge(_ base: [RouteInfo], adding: [RouteInfo], removing: [RouteInfo]) -> [RouteInfo]? {
        if adding.isEmpty && removing.isEmpty { return base }
        var result: [RouteInfo] = []
        result.reserveCapacity(base.count + adding.count)
        var i = 0, j = 0, r = 0
        while i < base.count || j < adding.count {
            let next: RouteInfo
            if j == adding.count || (i < base.count && !(adding[j] < base[i])) {
                next = base[i]
                i += 1
            } else {
                next = adding[j]
                j += 1
            }
            if r < removing.count {
                if removing[r] < next { return nil }
                if removing[r] == next {
                    r += 1
                    continue
                }
            }
            result.append(next)
        }
        return r == removing.count ? result : nil
    }
}
