import Foundation

/// Decodes `Decodable` types straight from a ``JSONValue``, with every type mismatch reported as
/// a `DecodingError` that carries the path to the value.
///
/// Foundation's `JSONDecoder` on Linux reports a number that does not fit the field (`1.5`,
/// `1e300` or 2^63 for an `Int`) as "not valid JSON" with no path, so a reply could only name
/// `parameters`; this decoder names the field (`limit`). Dates are RFC 3339 strings, as in
/// ``VarlinkCoding``.
struct JSONValueDecoder {
    static func decode<T: Decodable>(_ type: T.Type, from value: JSONValue) throws -> T {
        try Node(value: value, codingPath: []).decodeValue(type)
    }

    private struct Key: CodingKey {
        var stringValue: String
        var intValue: Int?
        init(stringValue: String) { self.stringValue = stringValue }
        init(intValue: Int) {
            self.stringValue = String(intValue)
            self.intValue = intValue
        }
    }

    private struct Node: Decoder, SingleValueDecodingContainer {
        let value: JSONValue
        let codingPath: [any CodingKey]
        var userInfo: [CodingUserInfoKey: Any] { [:] }

        func container<K: CodingKey>(keyedBy type: K.Type) throws -> KeyedDecodingContainer<K> {
            guard case .object(let members) = value else { throw mismatch([String: JSONValue].self) }
            return KeyedDecodingContainer(Keyed<K>(members: members, codingPath: codingPath))
        }

        func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
            guard case .array(let elements) = value else { throw mismatch([JSONValue].self) }
            return Unkeyed(elements: elements, codingPath: codingPath)
        }

        func singleValueContainer() throws -> any SingleValueDecodingContainer { self }

        func mismatch(_ type: Any.Type) -> DecodingError {
            DecodingError.typeMismatch(type, .init(codingPath: codingPath, debugDescription: "expected \(type), found \(value)"))
        }

        func decodeNil() -> Bool { value == .null }

        func decode(_ type: Bool.Type) throws -> Bool {
            guard case .bool(let flag) = value else { throw mismatch(type) }
            return flag
        }

        func decode(_ type: String.Type) throws -> String {
            guard case .string(let text) = value else { throw mismatch(type) }
            return text
        }

        func decode(_ type: Double.Type) throws -> Double {
            switch value {
            case .double(let number): return number
            case .int(let number): return Double(number)
            default: throw mismatch(type)
            }
        }

        func decode(_ type: Float.Type) throws -> Float { Float(try decode(Double.self)) }

        func decodeInteger<I: FixedWidthInteger>(_ type: I.Type) throws -> I {
            // Only JSON integers that fit: 1.5, 1e300 and 2^63 are not an Int64 field's values.
            guard case .int(let number) = value, let exact = I(exactly: number) else { throw mismatch(type) }
            return exact
        }

        func decode(_ type: Int.Type) throws -> Int { try decodeInteger(type) }
        func decode(_ type: Int8.Type) throws -> Int8 { try decodeInteger(type) }
        func decode(_ type: Int16.Type) throws -> Int16 { try decodeInteger(type) }
        func decode(_ type: Int32.Type) throws -> Int32 { try decodeInteger(type) }
        func decode(_ type: Int64.Type) throws -> Int64 { try decodeInteger(type) }
        func decode(_ type: UInt.Type) throws -> UInt { try decodeInteger(type) }
        func decode(_ type: UInt8.Type) throws -> UInt8 { try decodeInteger(type) }
        func decode(_ type: UInt16.Type) throws -> UInt16 { try decodeInteger(type) }
        func decode(_ type: UInt32.Type) throws -> UInt32 { try decodeInteger(type) }
        func decode(_ type: UInt64.Type) throws -> UInt64 { try decodeInteger(type) }

        func decode<T: Decodable>(_ type: T.Type) throws -> T { try decodeValue(type) }

        func decodeValue<T: Decodable>(_ type: T.Type) throws -> T {
            if type == JSONValue.self, let value = value as? T { return value }
            if type == Date.self {
                guard case .string(let text) = value, let date = VarlinkCoding.parseDate(text) as? T else { throw mismatch(type) }
                return date
            }
            return try T(from: self)
        }
    }

    private struct Keyed<K: CodingKey>: KeyedDecodingContainerProtocol {
        let members: [String: JSONValue]
        let codingPath: [any CodingKey]
        var allKeys: [K] { members.keys.compactMap { K(stringValue: $0) } }

        func contains(_ key: K) -> Bool { members[key.stringValue] != nil }

        func node(_ key: K) throws -> Node {
            guard let value = members[key.stringValue] else {
                throw DecodingError.keyNotFound(key, .init(codingPath: codingPath, debugDescription: "no member \(key.stringValue)"))
            }
            return Node(value: value, codingPath: codingPath + [key])
        }

        func decodeNil(forKey key: K) throws -> Bool { try node(key).decodeNil() }
        func decode<T: Decodable>(_ type: T.Type, forKey key: K) throws -> T { try node(key).decodeValue(type) }

        func nestedContainer<N: CodingKey>(keyedBy type: N.Type, forKey key: K) throws -> KeyedDecodingContainer<N> {
            try node(key).container(keyedBy: type)
        }

        func nestedUnkeyedContainer(forKey key: K) throws -> any UnkeyedDecodingContainer { try node(key).unkeyedContainer() }
        func superDecoder() throws -> any Decoder { Node(value: .object(members), codingPath: codingPath) }
        func superDecoder(forKey key: K) throws -> any Decoder { try node(key) }
    }

    private struct Unkeyed: UnkeyedDecodingContainer {
        let elements: [JSONValue]
        let codingPath: [any CodingKey]
        var currentIndex = 0
        var count: Int? { elements.count }
        var isAtEnd: Bool { currentIndex >= elements.count }

        mutating func next() throws -> Node {
            guard !isAtEnd else {
                throw DecodingError.valueNotFound(JSONValue.self, .init(codingPath: codingPath + [Key(intValue: currentIndex)], debugDescription: "no more elements"))
            }
            defer { currentIndex += 1 }
            return Node(value: elements[currentIndex], codingPath: codingPath + [Key(intValue: currentIndex)])
        }

        mutating func decodeNil() throws -> Bool {
            guard !isAtEnd, elements[currentIndex] == .null else { return false }
            currentIndex += 1
            return true
        }

        mutating func decode<T: Decodable>(_ type: T.Type) throws -> T { try next().decodeValue(type) }

        mutating func nestedContainer<N: CodingKey>(keyedBy type: N.Type) throws -> KeyedDecodingContainer<N> {
            try next().container(keyedBy: type)
        }

        mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer { try next().unkeyedContainer() }
        mutating func superDecoder() throws -> any Decoder { try next() }
    }
}
