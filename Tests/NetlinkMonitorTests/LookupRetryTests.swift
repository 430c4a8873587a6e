@testable import NetlinkMonitor
import Testing

/// When the monitor asks the kernel's lookups again after one got no answer: soon at first, then
/// doubling up to the longest wait, and soon again once every lookup was answered.
@Suite struct LookupRetryTests {
    @Test func failuresBackOffToTheLongestWaitAndAnAnswerResetsIt() {
        let start = ContinuousClock.now
        var retry = LookupRetry()
        #expect(retry.due == nil)
        #expect(!retry.isDue(at: start))

        var waits: [Duration] = []
        var now = start
        for _ in 0..<12 {
            let wait = retry.failed(at: now)
            waits.append(wait)
            #expect(retry.due == now + wait)
            #expect(!retry.isDue(at: now + wait - .milliseconds(1)), "not due before its time")
            #expect(retry.isDue(at: now + wait))
            retry.taken()
            #expect(retry.due == nil, "a retry taken is not due again until the next failure")
            now += wait
        }
        #expect(Array(waits.prefix(4)) == [.milliseconds(20), .milliseconds(40), .milliseconds(80), .milliseconds(160)])
        #expect(waits.max() == LookupRetry.longest)
        #expect(waits.suffix(3).allSatisfy { $0 == LookupRetry.longest })

        retry.succeeded()
        #expect(retry.due == nil)
        #expect(retry.failed(at: now) == LookupRetry.first, "after an answer, the next failure is retried soon")
    }
}
