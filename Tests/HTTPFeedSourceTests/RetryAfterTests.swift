import Foundation
import HTTPFeedSource
import Testing

@Suite("Retry-After and HTTP-date parsing")
struct RetryAfterTests {
    @Test("delay-seconds")
    func seconds() {
        #expect(RetryAfter.parse("120") == .seconds(120))
        #expect(RetryAfter.parse(" 0 ") == .zero)
        #expect(RetryAfter.parse("99999999999999999999999") == .seconds(86_400))
        #expect(RetryAfter.parse("-5") == nil)
        #expect(RetryAfter.parse("1.5") == nil)
        #expect(RetryAfter.parse("") == nil)
        #expect(RetryAfter.parse("soon") == nil)
    }

    @Test("the three HTTP-date forms parse to the same instant")
    func dateForms() {
        let expected: TimeInterval = 784_111_777  // 1994-11-06T08:49:37Z
        #expect(HTTPDate.parse("Sun, 06 Nov 1994 08:49:37 GMT") == expected)
        #expect(HTTPDate.parse("Sunday, 06-Nov-94 08:49:37 GMT") == expected)
        #expect(HTTPDate.parse("Sun Nov  6 08:49:37 1994") == expected)
        #expect(HTTPDate.parse("Thu, 01 Jan 1970 00:00:00 GMT") == 0)
        #expect(HTTPDate.parse("Tue, 29 Feb 2028 23:59:59 GMT") == 1_835_481_599)
        #expect(HTTPDate.parse("Sun, 06 Nov 1994 08:49:37 CET") == nil)
        #expect(HTTPDate.parse("Sun, 06 Foo 1994 08:49:37 GMT") == nil)
        #expect(HTTPDate.parse("Sun, 06 Nov 1994 25:49:37 GMT") == nil)
    }

    @Test("an HTTP-date is measured against the response's Date header, not the local clock")
    func dateAgainstResponseDate() {
        let delay = RetryAfter.parse(
            "Wed, 21 Oct 2015 07:28:30 GMT", responseDate: "Wed, 21 Oct 2015 07:28:00 GMT",
            now: Date(timeIntervalSince1970: 0))
        #expect(delay == .seconds(30))
    }

    @Test("without a Date header, against now; a past date means now")
    func dateAgainstNow() {
        let now = Date(timeIntervalSince1970: 1_445_412_480)  // 07:28:00
        #expect(RetryAfter.parse("Wed, 21 Oct 2015 07:28:10 GMT", now: now) == .seconds(10))
        #expect(RetryAfter.parse("Wed, 21 Oct 2015 07:00:00 GMT", now: now) == .zero)
    }
}
