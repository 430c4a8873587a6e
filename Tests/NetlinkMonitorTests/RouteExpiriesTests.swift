import ConnectivityPolicy
@testable import NetlinkMonitor
import Testing

/// The earliest route lifetime, kept incrementally, against the plain definition: the minimum of
/// every route's lifetime, recomputed from scratch after each step.
@Suite struct RouteExpiriesTests {
    /// A small deterministic generator, so a failing seed reproduces.
    struct Generator {
        var state: UInt64
        mutating func next(_ bound: Int) -> Int {
            state = state &* 6364136223846793005 &+ 1442695040888963407
            return Int((state >> 33) % UInt64(bound))
        }
    }

    static func key(_ n: Int) -> RouteKey {
        RouteKey(destination: IPPrefix("2001:db8:\(String(n, radix: 16))::/64")!, table: 254, priority: 1024, tos: 0, source: nil)
    }

    @Test(arguments: 0..<20)
    func theEarliestLifetimeIsTheMinimumOfAll(seed: Int) {
        var generator = Generator(state: UInt64(seed) &+ 1)
        var expiries = RouteExpiries<Int>()
        var model: [Int: Int] = [:]
        for step in 0..<5000 {
            let route = generator.next(300)
            switch generator.next(10) {
            case 0:
                expiries.removeAll()
                model.removeAll()
            case 1, 2, 3:
                expiries.record(Self.key(route), expiry: nil)
                model[route] = nil
            default:
                // Few distinct instants, so routes share them, as a router advertisement's do.
                let instant = generator.next(50)
                expiries.record(Self.key(route), expiry: instant)
                model[route] = instant
            }
            let expected = model.values.min()
            #expect(expiries.next == expected, "seed \(seed) step \(step)")
            if expiries.next != expected { return }
            if let expected { #expect(expiries.isDue(at: expected) && !expiries.isDue(at: expected - 1)) }
        }
    }

    /// Routes deleted in the order they end, the storm that made the old scan quadratic: the
    /// earliest is right after every deletion.
    @Test func routesDeletedInTheOrderTheyEnd() {
        var expiries = RouteExpiries<Int>()
        for n in 0..<2000 { expiries.record(Self.key(n), expiry: n) }
        for n in 0..<2000 {
            #expect(expiries.next == n)
            expiries.record(Self.key(n), expiry: nil)
        }
        #expect(expiries.next == nil)
    }
}
