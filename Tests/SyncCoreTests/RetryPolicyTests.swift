import Foundation
@_spi(StateMachine) import SyncCore
import Testing

@Suite struct RetryPolicyTests {
    @Test func defaultsAreGRPCConstantsWithFullJitterAndNoLimit() {
        let policy = RetryPolicy.default
        #expect(policy.base == .seconds(1))
        #expect(policy.multiplier == 1.6)
        #expect(policy.cap == .seconds(120))
        #expect(policy.maxAutomaticAttempts == nil)
        #expect(policy.jitter == .full)
    }

    @Test func defaultCeilingsGrowBy1Point6AndStopAtTheCap() {
        let policy = RetryPolicy.default
        var expected = 1.0
        for attempt in 1...20 {
            let ceiling = policy.ceiling(afterAttempt: attempt)
            #expect(ceiling.isClose(to: .seconds(min(expected, 120))), "attempt \(attempt): \(ceiling)")
            expected *= 1.6
        }
        // 1.6^10 ≈ 110 s, 1.6^11 ≈ 176 s: the 12th failure is the first at the cap.
        #expect(policy.ceiling(afterAttempt: 11) < .seconds(120))
        #expect(policy.ceiling(afterAttempt: 12) == .seconds(120))
        // A very long streak saturates instead of overflowing.
        #expect(policy.ceiling(afterAttempt: 10_000) == .seconds(120))
    }

    @Test func doublingSequenceIsExact() {
        let policy = RetryPolicy(base: .seconds(1), multiplier: 2, cap: .seconds(30), jitter: .none)
        let delays = (1...7).map { policy.delay(afterAttempt: $0, retryAfter: nil, fraction: 0.3) }
        #expect(delays == [.seconds(1), .seconds(2), .seconds(4), .seconds(8), .seconds(16), .seconds(30), .seconds(30)])
    }

    @Test func fullJitterScalesTheCeilingByTheFraction() {
        let policy = RetryPolicy(base: .seconds(2), multiplier: 2, cap: .seconds(60))
        #expect(policy.delay(afterAttempt: 3, retryAfter: nil, fraction: 0) == .zero)
        #expect(policy.delay(afterAttempt: 3, retryAfter: nil, fraction: 0.5) == .seconds(4))
        #expect(policy.delay(afterAttempt: 3, retryAfter: nil, fraction: 1) == .seconds(8))
        // Out-of-range fractions are clamped, never above the ceiling.
        #expect(policy.delay(afterAttempt: 3, retryAfter: nil, fraction: 7) == .seconds(8))
    }

    @Test func fullJitterStaysWithinZeroAndCeiling() {
        let policy = RetryPolicy.default
        var random = SeededRandomSource(seed: 42)
        for attempt in 1...30 {
            for _ in 0..<50 {
                let delay = policy.delay(afterAttempt: attempt, retryAfter: nil, fraction: random.nextFraction())
                #expect(delay >= .zero && delay <= policy.ceiling(afterAttempt: attempt))
            }
        }
    }

    @Test func retryAfterIsAFloorEvenAboveTheCap() {
        let policy = RetryPolicy(base: .seconds(1), multiplier: 2, cap: .seconds(10))
        #expect(policy.delay(afterAttempt: 1, retryAfter: .seconds(5), fraction: 0.1) == .seconds(5))
        #expect(policy.delay(afterAttempt: 5, retryAfter: .seconds(3), fraction: 1) == .seconds(10))
        #expect(policy.delay(afterAttempt: 5, retryAfter: .seconds(300), fraction: 1) == .seconds(300))
    }

    @Test func permanentErrorsAndSpentBudgetsAreNotRetriedAutomatically() {
        let unlimited = RetryPolicy.default
        for code in [400, 401, 403, 404, 410, 422] {
            #expect(!unlimited.retriesAutomatically(FeedError(.httpStatus(code), "x"), attempt: 1), "\(code)")
        }
        for error in [FeedError(.httpStatus(408), "x"), FeedError(.httpStatus(429), "x"), FeedError(.httpStatus(500), "x"),
                      FeedError(.httpStatus(503), "x"), FeedError(.transport, "x"), FeedError(.timeout, "x"), FeedError(.malformed, "x")] {
            #expect(unlimited.retriesAutomatically(error, attempt: 1_000), "\(error.kind)")
        }
        let limited = RetryPolicy(maxAutomaticAttempts: 3)
        #expect(limited.retriesAutomatically(transient, attempt: 2))
        #expect(!limited.retriesAutomatically(transient, attempt: 3))
    }

    @Test func seededRandomIsReproducibleAndInRange() {
        var a = SeededRandomSource(seed: 7), b = SeededRandomSource(seed: 7)
        for _ in 0..<1000 {
            let x = a.nextFraction()
            #expect(x == b.nextFraction())
            #expect(x >= 0 && x <= 1)
        }
    }
}
