/// Formats an IMF-fixdate (RFC 9110 §5.6.7), e.g. `Sun, 06 Nov 1994 08:49:37 GMT`.
func imfFixdate(epochSeconds: Int64) -> String {
    let weekdays = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"]  // 1970-01-01 was a Thursday
    let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
    let (days, secondsOfDay) = epochSeconds.quotientAndRemainder(dividingBy: 86_400)
    let (year, month, day) = civilFromDays(days)
    func two(_ v: Int64) -> String { v < 10 ? "0\(v)" : "\(v)" }
    let weekday = weekdays[Int(((days % 7) + 7) % 7)]
    return "\(weekday), \(two(day)) \(months[Int(month) - 1]) \(year) "
        + "\(two(secondsOfDay / 3600)):\(two(secondsOfDay % 3600 / 60)):\(two(secondsOfDay % 60)) GMT"
}
