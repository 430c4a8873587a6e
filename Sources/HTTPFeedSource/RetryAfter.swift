import Foundation

/// Parses `Retry-After` (RFC 9110 §10.2.3): delay-seconds or an HTTP-date.
public enum RetryAfter {
    /// The delay the header asks for, measured from when the response was sent.
    ///
    /// An HTTP-date is measured against the response's own `Date` header when there is one, so
    /// a client whose clock is off still waits as long as the server meant; without it, against
    /// `now`. Dates in the past mean "now" (zero). Unparseable values give `nil`, which the retry
    /// policy treats as no header at all rather than failing the response.
    public static func parse(_ value: String, responseDate: String? = nil, now: Date = Date()) -> Duration? {
        let trimmed = value.trimmingCharacters(in: .whitespaces)
        if !trimmed.isEmpty, trimmed.allSatisfy(\.isASCII), trimmed.allSatisfy(\.isNumber) {
            // Absurd values are clamped rather than overflowing; a day is already "much later".
            guard let seconds = Int64(trimmed) else { return .seconds(86_400) }
            return .seconds(min(seconds, 86_400))
        }
        guard let target = HTTPDate.parse(trimmed) else { return nil }
        let reference = responseDate.flatMap(HTTPDate.parse) ?? now.timeIntervalSince1970
        let delay = target - reference
        guard delay > 0 else { return .zero }
        return .milliseconds(Int64((min(delay, 86_400) * 1000).rounded()))
    }
}

/// HTTP-date parsing (RFC 9110 §5.6.7): IMF-fixdate and the two obsolete forms recipients must
/// accept, RFC 850 and asctime. Written out rather than through `DateFormatter` so it does not
/// depend on locale data.
public enum HTTPDate {
    private static let months = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]

    /// Seconds since 1970 (UTC), or `nil` when `value` is no HTTP-date.
    public static func parse(_ value: String) -> TimeInterval? {
        let tokens = value.split(whereSeparator: { $0 == " " || $0 == "," }).map(String.init)
        switch tokens.count {
        case 6 where tokens[5] == "GMT":
            // IMF-fixdate: Sun, 06 Nov 1994 08:49:37 GMT
            guard tokens[3].count == 4, let year = Int(tokens[3]) else { return nil }
            return compose(year: year, month: tokens[2], day: tokens[1], clock: tokens[4])
        case 4 where tokens[3] == "GMT":
            // RFC 850: Sunday, 06-Nov-94 08:49:37 GMT
            let parts = tokens[1].split(separator: "-").map(String.init)
            guard parts.count == 3, parts[2].count == 2, let yy = Int(parts[2]) else { return nil }
            // RFC 9110: a two-digit year more than 50 years ahead is in the past century.
            return compose(year: yy < 70 ? 2000 + yy : 1900 + yy, month: parts[1], day: parts[0], clock: tokens[2])
        case 5:
            // asctime: Sun Nov  6 08:49:37 1994
            guard tokens[4].count == 4, let year = Int(tokens[4]) else { return nil }
            return compose(year: year, month: tokens[1], day: tokens[2], clock: tokens[3])
        default:
            return nil
        }
    }

    private static func compose(year: Int, month monthName: String, day dayText: String, clock: String) -> TimeInterval? {
        guard let monthIndex = months.firstIndex(of: monthName.lowercased()),
            dayText.count <= 2, let day = Int(dayText), (1...31).contains(day)
        else { return nil }
        let parts = clock.split(separator: ":")
        guard parts.count == 3, parts.allSatisfy({ $0.count == 2 }),
            let hour = Int(parts[0]), let minute = Int(parts[1]), let second = Int(parts[2]),
            (0...23).contains(hour), (0...59).contains(minute), (0...60).contains(second)
        else { return nil }
        let days = daysFromCivil(year: year, month: monthIndex + 1, day: day)
        return TimeInterval(days * 86_400 + hour * 3600 + minute * 60 + second)
    }

    /// Howard Hinnant's civil-to-days conversion (proleptic Gregorian, days since 1970-01-01).
    static func daysFromCivil(year y0: Int, month m: Int, day d: Int) -> Int {
        let y = m <= 2 ? y0 - 1 : y0
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }
}
