import Foundation

/// The ids of one page, checked for repeats without hashing while they keep one order.
///
/// Servers send a page's ids sorted (newest first), so while each id is strictly below (or each
/// strictly above) the one before it, in bytes, no two can be equal; only a page that breaks the
/// order pays for the set, which is then filled with every id so far.
package struct DistinctIDs {
    private enum Order { case unknown, falling, rising, none }
    private var order = Order.unknown
    /// Every id so far while they keep one order; emptied into ``seen`` when it breaks.
    private var all: [String] = []
    /// Exact ids: NFC and NFD spellings of one name are two items, as on the server.
    private var seen = Set<ExactID>()

    /// No ids yet.
    package init() {}

    /// Adds `id`; `false` when it was there already.
    package mutating func insert(_ id: String) -> Bool {
        if order != .none, let previous = all.last {
            let comparison = Self.compareBytes(id, previous)
            let falling = comparison < 0, rising = comparison > 0
            switch (order, falling, rising) {
            case (.unknown, true, _): order = .falling
            case (.unknown, _, true): order = .rising
            case (.falling, true, _), (.rising, _, true): break
            default:
                order = .none
                seen = Set(all.map(ExactID.init))
                all = []
            }
        }
        switch order {
        case .none: return seen.insert(ExactID(id)).inserted
        default:
            all.append(id)
            return true
        }
    }

    /// Negative, zero or positive as `a`'s UTF-8 bytes sort before, equal or after `b`'s.
    private static func compareBytes(_ a: String, _ b: String) -> Int {
        var a = a, b = b
        return a.withUTF8 { x in
            b.withUTF8 { y in
                let common = min(x.count, y.count)
                if common > 0, let xs = x.baseAddress, let ys = y.baseAddress {
                    let order = memcmp(xs, ys, common)
                    if order != 0 { return Int(order) }
                }
                return x.count - y.count
            }
        }
    }
}
