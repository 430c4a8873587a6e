import SyncControl
import Foundation

/// Times as systemd tools print them: an absolute stamp and a relative span
/// (`2024-05-01 12:00:03 UTC; 3min 2s ago`).
public enum TimeFormatting {
    /// `3min 2s`, `1h 5min`, `2d 3h`, `450ms`: the two largest units, like systemd's timespans.
    public static func span(_ seconds: Double) -> String {
        let magnitude = abs(seconds)
        if magnitude < 1 { return "\(Int((magnitude * 1000).rounded()))ms" }
        var remaining = Int(magnitude.rounded(.down))
        let units: [(String, Int)] = [("d", 86_400), ("h", 3_600), ("min", 60), ("s", 1)]
        var parts: [String] = []
        for (name, size) in units where remaining >= size && parts.count < 2 {
            parts.append("\(remaining / size)\(name)")
            remaining %= size
        }
        return parts.joined(separator: " ")
    }

    /// `3min ago` or `in 12s`.
    public static func relative(_ date: Date, now: Date) -> String {
        let delta = date.timeIntervalSince(now)
        if abs(delta) < 1 { return "now" }
        return delta < 0 ? "\(span(delta)) ago" : "in \(span(delta))"
    }

    /// `2024-05-01 12:00:03 UTC`.
    public static func stamp(_ date: Date, timeZone: TimeZone) -> String {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = timeZone
        let c = calendar.dateComponents([.year, .month, .day, .hour, .minute, .second], from: date)
        func two(_ value: Int?) -> String { String(format: "%02d", value ?? 0) }
        // Foundation calls UTC "GMT"; systemd tools say UTC.
        let abbreviation = timeZone.abbreviation(for: date) ?? timeZone.identifier
        let zone = timeZone.secondsFromGMT(for: date) == 0 && ["GMT", "UTC"].contains(abbreviation) ? "UTC" : abbreviation
        return "\(c.year ?? 0)-\(two(c.month))-\(two(c.day)) \(two(c.hour)):\(two(c.minute)):\(two(c.second)) \(zone)"
    }

    /// `12:00:03`, for compact views.
    public static func clock(_ date: Date, timeZone: TimeZone) -> String {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = timeZone
        let c = calendar.dateComponents([.hour, .minute, .second], from: date)
        return String(format: "%02d:%02d:%02d", c.hour ?? 0, c.minute ?? 0, c.second ?? 0)
    }

    /// `2024-05-01 12:00:03 UTC; 3min ago`.
    public static func full(_ date: Date, now: Date, timeZone: TimeZone) -> String {
        "\(stamp(date, timeZone: timeZone)); \(relative(date, now: now))"
    }
}
