import Foundation

/// The JSON conventions shared by every Varlink endpoint in this package.
///
/// Dates travel as RFC 3339 strings with fractional seconds (Varlink has no date type and
/// strings stay readable in `varlinkctl` and `--json` output); decoding also accepts whole
/// seconds so foreign clients need not send fractions.
public enum VarlinkCoding {
    /// An encoder with the package's date convention and stable key order.
    public static func makeEncoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(formatDate(date))
        }
        return encoder
    }

    /// A decoder matching ``makeEncoder()``.
    public static func makeDecoder() -> JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .custom { decoder in
            let container = try decoder.singleValueContainer()
            let text = try container.decode(String.self)
            guard let date = parseDate(text) else {
                throw DecodingError.dataCorruptedError(in: container, debugDescription: "not an RFC 3339 date: \(text)")
            }
            return date
        }
        return decoder
    }

    /// Formats a date as RFC 3339 in UTC with milliseconds.
    public static func formatDate(_ date: Date) -> String {
        date.formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true))
    }

    /// Parses RFC 3339 with or without fractional seconds.
    public static func parseDate(_ text: String) -> Date? {
        if let date = try? Date.ISO8601FormatStyle(includingFractionalSeconds: true).parse(text) { return date }
        return try? Date.ISO8601FormatStyle().parse(text)
    }

    /// Converts any encodable value into a ``JSONValue``.
    public static func jsonValue(from value: some Encodable) throws -> JSONValue {
        let data = try makeEncoder().encode(value)
        return try makeDecoder().decode(JSONValue.self, from: data)
    }

    /// Decodes a typed value from a ``JSONValue``.
    public static func decode<T: Decodable>(_ type: T.Type, from value: JSONValue) throws -> T {
        let data = try makeEncoder().encode(value)
        return try makeDecoder().decode(type, from: data)
    }
}
