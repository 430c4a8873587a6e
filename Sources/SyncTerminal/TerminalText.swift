import SyncControl
/// Text drawn from feed content, made safe to print and measured in terminal columns.
///
/// Feed content is untrusted: a summary, an id or an error message a server chose must never
/// move the cursor, set the title or reorder the line. Every renderer in this folder passes
/// such text through ``sanitize(_:)`` and lays it out with ``columns(of:)``.
public enum TerminalText {
    /// Shown in place of a control character, so the reader sees that something was there.
    static let replacement: Unicode.Scalar = "\u{FFFD}"

    /// The text with everything that could control a terminal taken out: C0 controls and DEL
    /// (ESC, BEL, CR, …) and C1 controls (U+0080–U+009F, which some terminals treat like
    /// ESC sequences) become U+FFFD; tabs and line breaks become spaces (a row is one line);
    /// bidirectional overrides, embeddings, isolates and marks are dropped, so text cannot
    /// display in an order other than the one it has.
    public static func sanitize(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: needsAttention) else { return text }
        var scalars = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            switch scalar.value {
            case 0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x85, 0x2028, 0x2029:
                scalars.append(" ")
            case 0x00...0x1F, 0x7F, 0x80...0x9F:
                scalars.append(replacement)
            case _ where isBidiControl(scalar):
                continue
            default:
                scalars.append(scalar)
            }
        }
        return String(scalars)
    }

    static func needsAttention(_ scalar: Unicode.Scalar) -> Bool {
        let value = scalar.value
        return value < 0x20 || (0x7F...0x9F).contains(value) || value == 0x2028 || value == 0x2029 || isBidiControl(scalar)
    }

    /// LRE, RLE, PDF, LRO, RLO (U+202A–U+202E), the isolates (U+2066–U+2069) and the marks
    /// LRM, RLM, ALM.
    public static func isBidiControl(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x202A...0x202E, 0x2066...0x2069, 0x200E, 0x200F, 0x061C: true
        default: false
        }
    }

    /// Columns `text` takes on a terminal: the sum of ``columns(of:)-swift.type.method`` over
    /// its grapheme clusters.
    public static func columns(of text: String) -> Int {
        text.reduce(0) { $0 + columns(of: $1) }
    }

    /// Columns one grapheme cluster takes, by wcwidth's rules: 2 for East Asian wide and
    /// fullwidth characters and for emoji shown as emoji, 0 for controls and for clusters of
    /// only combining or format characters, else 1. Combining marks, joiners and variation
    /// selectors add nothing to the cluster they belong to.
    public static func columns(of character: Character) -> Int {
        let scalars = character.unicodeScalars
        guard let base = scalars.first else { return 0 }
        // A text-default emoji followed by VS16 is drawn as emoji: two columns.
        if scalars.contains("\u{FE0F}") && base.properties.isEmoji { return 2 }
        return columns(of: base)
    }

    static func columns(of scalar: Unicode.Scalar) -> Int {
        let value = scalar.value
        if value == 0 || value < 0x20 || (0x7F...0x9F).contains(value) { return 0 }
        switch scalar.properties.generalCategory {
        case .nonspacingMark, .enclosingMark, .format:
            return 0
        default:
            break
        }
        // Hangul medial vowels and final consonants join the syllable before them.
        if (0x1160...0x11FF).contains(value) || value == 0x200B { return 0 }
        if scalar.properties.isEmojiPresentation { return 2 }
        return isWide(value) ? 2 : 1
    }

    /// East Asian Wide and Fullwidth ranges (as in Markus Kuhn's wcwidth).
    static func isWide(_ value: UInt32) -> Bool {
        guard value >= 0x1100 else { return false }
        return value <= 0x115F
            || value == 0x2329 || value == 0x232A
            || (0x2E80...0xA4CF).contains(value) && value != 0x303F
            || (0xAC00...0xD7A3).contains(value)
            || (0xF900...0xFAFF).contains(value)
            || (0xFE10...0xFE19).contains(value)
            || (0xFE30...0xFE6F).contains(value)
            || (0xFF00...0xFF60).contains(value)
            || (0xFFE0...0xFFE6).contains(value)
            || (0x1F300...0x1F64F).contains(value)
            || (0x1F900...0x1F9FF).contains(value)
            || (0x20000...0x2FFFD).contains(value)
            || (0x30000...0x3FFFD).contains(value)
    }
}

extension String {
    /// ``TerminalText/sanitize(_:)`` of this text.
    public var terminalSafe: String { TerminalText.sanitize(self) }

    /// Columns this text takes on a terminal.
    public var columns: Int { TerminalText.columns(of: self) }

    /// Cuts to at most `width` columns, marking the cut with an ellipsis. A wide character
    /// that would straddle the edge is left out rather than split.
    func fitted(to width: Int) -> String {
        guard columns > width else { return self }
        guard width > 0 else { return "" }
        var result = ""
        var used = 0
        for character in self {
            let needed = TerminalText.columns(of: character)
            if used + needed > width - 1 { break }
            result.append(character)
            used += needed
        }
        return result + "…"
    }

    /// Pads with spaces to `width` columns.
    func padded(to width: Int) -> String {
        let used = columns
        return used >= width ? self : self + String(repeating: " ", count: width - used)
    }
}
