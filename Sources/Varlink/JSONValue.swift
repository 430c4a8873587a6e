/// A JSON value as carried in Varlink `parameters`.
///
/// Varlink payloads are dynamic at the protocol layer (the generic server routes calls before it
/// knows their types), so the envelope keeps parameters in this form; typed code converts with
/// ``VarlinkCoding``.
public enum JSONValue: Sendable, Hashable {
    /// JSON `null`.
    case null
    /// `true` or `false`.
    case bool(Bool)
    /// Integers are kept apart from doubles so 64-bit ids and counts survive a round trip.
    case int(Int64)
    /// A number with a fraction or exponent, or beyond 64-bit integers.
    case double(Double)
    /// A string.
    case string(String)
    /// An array.
    case array([JSONValue])
    /// An object; member order is not kept.
    case object([String: JSONValue])

    /// The members when this is an object.
    public var objectValue: [String: JSONValue]? {
        if case .object(let members) = self { return members }
        return nil
    }

    /// The text when this is a string.
    public var stringValue: String? {
        if case .string(let text) = self { return text }
        return nil
    }

    /// Member lookup for objects; `nil` for other values.
    public subscript(key: String) -> JSONValue? {
        objectValue?[key]
    }
}

extension JSONValue: Codable {
    /// Decodes any JSON value, integers as `int` when they fit in 64 bits.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Int64.self) {
            self = .int(value)
        } else if let value = try? container.decode(Double.self) {
            self = .double(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([JSONValue].self) {
            self = .array(value)
        } else {
            self = .object(try container.decode([String: JSONValue].self))
        }
    }

    /// Encodes the value as the JSON it stands for.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .bool(let value): try container.encode(value)
        case .int(let value): try container.encode(value)
        case .double(let value): try container.encode(value)
        case .string(let value): try container.encode(value)
        case .array(let value): try container.encode(value)
        case .object(let value): try container.encode(value)
        }
    }
}

extension JSONValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByBooleanLiteral,
    ExpressibleByDictionaryLiteral, ExpressibleByArrayLiteral, ExpressibleByNilLiteral
{
    /// A string from a literal.
    public init(stringLiteral value: String) { self = .string(value) }
    /// An integer from a literal.
    public init(integerLiteral value: Int64) { self = .int(value) }
    /// A boolean from a literal.
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    /// An object from a literal; a repeated key keeps its last value.
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        self = .object(Dictionary(elements, uniquingKeysWith: { _, last in last }))
    }
    /// An array from a literal.
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    /// `null` from `nil`.
    public init(nilLiteral: ()) { self = .null }
}
