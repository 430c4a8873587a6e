import Foundation

/// What a feed does while its host is reached over a metered link (``LinkCostAssessment``).
public enum MeteredPolicy: String, Sendable, Hashable, Codable, CaseIterable, CustomStringConvertible {
    /// Syncs as on any other link.
    case sync
    /// Keeps the head current (the first load and refreshes of newer items) and holds back the
    /// backfill of older pages until the link is no longer metered.
    case newer
    /// Holds back every automatic load until the link is no longer metered.
    case pause

    /// `sync`, `newer` or `pause`, as the configuration spells it.
    public var description: String { rawValue }
}

/// How many bytes a feed may receive over metered links per day.
public struct MeteredBudget: Sendable, Hashable {
    /// Bytes per day; past them, every automatic load waits for the next day or another link.
    public var bytesPerDay: Int64
    /// Where a day begins and ends: local midnight in this zone.
    public var timeZone: TimeZone

    /// A budget of `bytesPerDay` (at least 1) per day of `timeZone`.
    public init(bytesPerDay: Int64, timeZone: TimeZone = .current) {
        self.bytesPerDay = max(1, bytesPerDay)
        self.timeZone = timeZone
    }

    /// The day `date` falls on, as `YYYY-MM-DD` in ``timeZone``.
    public func day(of date: Date) -> String {
        let parts = calendar.dateComponents([.year, .month, .day], from: date)
        return String(format: "%04d-%02d-%02d", parts.year ?? 0, parts.month ?? 0, parts.day ?? 0)
    }

    /// When the day after the one `date` falls on begins.
    public func nextDay(after date: Date) -> Date {
        let start = calendar.startOfDay(for: date)
        return calendar.date(byAdding: .day, value: 1, to: start) ?? date.addingTimeInterval(86_400)
    }

    private var calendar: Calendar {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = timeZone
        return calendar
    }
}

/// Bytes a feed received over metered links on one day.
public struct MeteredUsage: Sendable, Hashable, Codable {
    /// The day, `YYYY-MM-DD` in the budget's time zone.
    public var day: String
    /// Bytes received over metered links that day.
    public var bytes: Int64

    /// `bytes` received on `day`.
    public init(day: String, bytes: Int64) {
        self.day = day
        self.bytes = max(0, bytes)
    }

    /// This usage with `bytes` more received at `date`: a new day starts again from zero.
    public func adding(_ bytes: Int64, at date: Date, budget: MeteredBudget) -> MeteredUsage {
        let today = budget.day(of: date)
        let base = today == day ? self.bytes : 0
        let (sum, overflow) = base.addingReportingOverflow(max(0, bytes))
        return MeteredUsage(day: today, bytes: overflow ? .max : sum)
    }

    /// The bytes of this usage that count at `date`: none once its day has passed.
    public func bytes(at date: Date, budget: MeteredBudget) -> Int64 {
        budget.day(of: date) == day ? bytes : 0
    }
}

/// Why a direction that would load now waits while the host is reachable: the link's cost.
public enum LoadHold: Sendable, Hashable, CustomStringConvertible {
    /// The link is metered and the feed's ``MeteredPolicy`` holds this direction back.
    case meteredLink
    /// The feed received its ``MeteredBudget`` over metered links today: `used` of `budget` bytes.
    case meteredBudget(used: Int64, budget: Int64)

    /// `metered link`, `metered budget used: 50 MB today`, as a status line shows it.
    public var description: String {
        switch self {
        case .meteredLink: "metered link"
        case .meteredBudget(let used, _): "metered budget used: \(ByteCount.describe(used)) today"
        }
    }
}

/// Byte counts as people write and read them: `50MB`, `1.5 GB`, `512KiB`.
public enum ByteCount {
    /// Bytes in `text`: a number with an optional unit, `B`, `kB`/`KB`, `MB`, `GB`, `TB` (powers of
    /// 1000) or `KiB`, `MiB`, `GiB`, `TiB` (powers of 1024), a space allowed between them; `nil`
    /// when it is not one, is negative, or does not fit in 63 bits.
    public static func parse(_ text: String) -> Int64? {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        let digits = trimmed.prefix { $0.isASCII && ($0.isNumber || $0 == ".") }
        let unit = trimmed.dropFirst(digits.count).trimmingCharacters(in: .whitespaces).lowercased()
        guard !digits.isEmpty, digits.filter({ $0 == "." }).count <= 1, digits.last != ".", let number = Double(digits) else { return nil }
        let scale: Double
        switch unit {
        case "", "b": scale = 1
        case "kb": scale = 1e3
        case "mb": scale = 1e6
        case "gb": scale = 1e9
        case "tb": scale = 1e12
        case "kib": scale = 1024
        case "mib": scale = 1024 * 1024
        case "gib": scale = 1024 * 1024 * 1024
        case "tib": scale = 1024 * 1024 * 1024 * 1024
        default: return nil
        }
        let bytes = (number * scale).rounded()
        guard bytes.isFinite, bytes >= 0, bytes < 9.2e18 else { return nil }
        return Int64(bytes)
    }

    /// `bytes` in decimal units with at most one decimal: `812 B`, `3.4 kB`, `50 MB`, `1.2 GB`.
    public static func describe(_ bytes: Int64) -> String {
        let units = ["B", "kB", "MB", "GB", "TB", "PB", "EB"]
        var value = Double(bytes)
        var unit = 0
        while value >= 999.95, unit < units.count - 1 {
            value /= 1000
            unit += 1
        }
        if unit == 0 { return "\(bytes) B" }
        let rounded = (value * 10).rounded() / 10
        let text = rounded == rounded.rounded() ? String(Int64(rounded)) : String(format: "%.1f", rounded)
        return "\(text) \(units[unit])"
    }
}
