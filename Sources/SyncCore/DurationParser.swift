import Foundation

/// Durations as syncd's configuration and syncctl's options write them.
public enum DurationParser {
    /// "500ms", "2s", "1.5s", "5m" or "1h" (spaces around are ignored); `nil` for anything else,
    /// a negative number or one too large to be finite.
    public static func parse(_ text: String) -> Duration? {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        let units: [(String, Double)] = [("ms", 0.001), ("s", 1), ("m", 60), ("h", 3600)]
        for (suffix, scale) in units where trimmed.hasSuffix(suffix) {
            guard let number = Double(trimmed.dropLast(suffix.count)), number.isFinite, number >= 0 else { return nil }
            let milliseconds = (number * scale * 1000).rounded()
            // Past Int64's range the conversion would trap.
            guard milliseconds < 9.2e18 else { return nil }
            return .milliseconds(Int64(milliseconds))
        }
        return nil
    }
}
