import Foundation

/// One generated item of a demo feed: its id and the exact JSON object the server sends.
///
/// Items are a pure function of (feed, sequence number, revision), so a test can recompute any
/// item and a restarted server serves the same bytes; an edit makes the next revision.
public struct DemoFeedItem: Sendable, Hashable {
    /// The item's id: its sequence number zero-padded, so string order equals numeric order.
    public let id: String
    /// The JSON object, exactly as written on the wire.
    public let json: String
    /// The item's number in its feed (1 is the oldest ever made).
    public let sequence: Int
    /// How many times the item was edited.
    public let revision: Int
    /// When the item was made, RFC 3339 (its `created_at`).
    public let createdAt: String

    /// The JSON object's UTF-8 bytes, as a client stores them.
    public var jsonData: Data { Data(json.utf8) }

    /// Builds item number `sequence` (1-based) of feed `feed`, edited `revision` times (an edited
    /// item's text says so, and it carries `edited_at`).
    ///
    /// Every fifth item carries escapes and non-ASCII text and every item a nested object, so
    /// clients that re-encode instead of storing the bytes as received are caught by tests.
    public static func generate(feed: String, sequence: Int, idWidth: Int, idField: String, revision: Int = 0) -> DemoFeedItem {
        let id = zeroPadded(sequence, width: idWidth)
        let createdAt = iso8601(epochSeconds: 1_700_000_000 + Int64(sequence) * 37)
        let text: String
        switch sequence % 5 {
        case 0: text = "Item \(sequence) of \(feed): caf\u{E9} \u{2615} \"quoted\", back\\slash\nnew line, tab\t, \u{1F389}"
        case 1: text = "Item \(sequence) of \(feed) \u{2014} \u{65E5}\u{672C}\u{8A9E}"
        default: text = "Item \(sequence) of \(feed)"
        }
        var json = "{"
        json += "\(jsonString(idField)):\(jsonString(id)),"
        json += "\"created_at\":\(jsonString(createdAt)),"
        json += "\"feed\":\(jsonString(feed)),"
        json += "\"sequence\":\(sequence),"
        json += "\"text\":\(jsonString(text)),"
        json += "\"author\":{\"name\":\"user\(sequence % 17)\",\"tags\":[\"demo\",\"n\(sequence % 3)\"],\"bot\":\(sequence % 2 == 0)},"
        json += "\"reply_to\":null"
        if revision > 0 {
            json += ",\"edited_at\":\(jsonString(iso8601(epochSeconds: 1_800_000_000 + Int64(sequence) * 37 + Int64(revision))))"
            json += ",\"revision\":\(revision)"
        }
        json += "}"
        return DemoFeedItem(id: id, json: json, sequence: sequence, revision: revision, createdAt: createdAt)
    }

    /// Zero-pads a non-negative number; numbers wider than `width` keep all their digits.
    static func zeroPadded(_ value: Int, width: Int) -> String {
        let digits = String(value)
        return digits.count >= width ? digits : String(repeating: "0", count: width - digits.count) + digits
    }
}

/// Encodes a Swift string as a JSON string literal (RFC 8259 escapes).
func jsonString(_ value: String) -> String {
    var out = "\""
    for scalar in value.unicodeScalars {
        switch scalar {
        case "\"": out += "\\\""
        case "\\": out += "\\\\"
        case "\n": out += "\\n"
        case "\r": out += "\\r"
        case "\t": out += "\\t"
        case _ where scalar.value < 0x20:
            let hex = String(scalar.value, radix: 16)
            out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
        default: out.unicodeScalars.append(scalar)
        }
    }
    return out + "\""
}

/// Formats seconds since 1970 as `YYYY-MM-DDTHH:MM:SSZ` without Foundation's locale machinery.
func iso8601(epochSeconds: Int64) -> String {
    let (days, secondsOfDay) = epochSeconds.quotientAndRemainder(dividingBy: 86_400)
    let (year, month, day) = civilFromDays(days)
    func two(_ v: Int64) -> String { v < 10 ? "0\(v)" : "\(v)" }
    return "\(year)-\(two(month))-\(two(day))T\(two(secondsOfDay / 3600)):\(two(secondsOfDay % 3600 / 60)):\(two(secondsOfDay % 60))Z"
}

/// Howard Hinnant's days-to-civil conversion (proleptic Gregorian, days since 1970-01-01).
func civilFromDays(_ z0: Int64) -> (year: Int64, month: Int64, day: Int64) {
    let z = z0 + 719_468
    let era = (z >= 0 ? z : z - 146_096) / 146_097
    let doe = z - era * 146_097
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
    let mp = (5 * doy + 2) / 153
    let day = doy - (153 * mp + 2) / 5 + 1
    let month = mp < 10 ? mp + 3 : mp - 9
    return (yoe + era * 400 + (month <= 2 ? 1 : 0), month, day)
}
