import SyncControl
/// The skeleton shimmer: a soft highlight sweeping left to right.
///
/// Every skeleton row is drawn from the same phase, so the highlight crosses all rows in step
/// (one clock drives the whole view), and the highlight's edge follows smoothstep so it reads
/// as a gradient rather than a moving block.
public enum Shimmer {
    /// Seconds for one sweep.
    public static let period = 1.6
    /// Half-width of the highlight, in columns.
    static let halfWidth = 8.0

    /// The phase in 0..<1 at animation time `t` (seconds).
    public static func phase(at t: Double) -> Double {
        let cycles = t / period
        return cycles - cycles.rounded(.down)
    }

    /// 0 below `edge0`, 1 above `edge1`, an S-curve between: what softens the highlight's edge.
    public static func smoothstep(_ edge0: Double, _ edge1: Double, _ x: Double) -> Double {
        let t = max(0, min(1, (x - edge0) / (edge1 - edge0)))
        return t * t * (3 - 2 * t)
    }

    /// Highlight strength 0...1 at `column` of a row `width` columns wide. The sweep starts and
    /// ends off-screen so the highlight enters and leaves smoothly.
    public static func intensity(column: Int, width: Int, phase: Double) -> Double {
        let travel = Double(width) + 2 * halfWidth
        let center = phase * travel - halfWidth
        let distance = abs(Double(column) - center) / halfWidth
        return 1 - smoothstep(0, 1, distance)
    }

    /// The bar widths of skeleton row `index`, as fractions of the line: a short "avatar"
    /// block and a text bar whose length varies by row so the placeholder looks like content.
    static func rowShape(_ index: Int) -> Double {
        let widths = [0.92, 0.74, 0.86, 0.62, 0.8, 0.7]
        return widths[index % widths.count]
    }

    /// One skeleton row of `width` columns.
    public static func row(_ index: Int, width: Int, phase: Double, style: TerminalStyle) -> String {
        let avatar = 2
        let gap = 1
        let textWidth = max(1, Int(Double(width - avatar - gap) * rowShape(index)))
        var out = ""
        var currentShade = -1
        for column in 0..<(avatar + gap + textWidth) {
            if column >= avatar && column < avatar + gap {
                out += " "
                continue
            }
            let level = intensity(column: column, width: width, phase: phase)
            if style.color {
                // Grey 237 at rest up to 250 under the highlight; a new sequence only where the shade changes.
                let shade = 237 + Int((level * 13).rounded())
                if shade != currentShade {
                    out += "\u{1B}[38;5;\(shade)m"
                    currentShade = shade
                }
                out += "█"
            } else {
                out += level > 0.66 ? "▓" : level > 0.33 ? "▒" : "░"
            }
        }
        return style.color ? out + "\u{1B}[0m" : out
    }
}
