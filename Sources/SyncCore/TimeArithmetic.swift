import Foundation

extension Duration {
    /// The duration in seconds as a floating-point value (for `Date` arithmetic and scaling).
    package var secondsValue: Double {
        let parts = components
        return Double(parts.seconds) + Double(parts.attoseconds) * 1e-18
    }
}

extension Date {
    /// This date moved by a `Duration`.
    package func adding(_ duration: Duration) -> Date {
        addingTimeInterval(duration.secondsValue)
    }
}
