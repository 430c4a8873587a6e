/// Writes JSON text byte by byte, for replies assembled from parts that are already JSON (a
/// stored item's payload) without decoding and encoding them again.
///
/// Strings are escaped as `JSONEncoder` escapes them (quote, backslash, and control characters
/// as `\n`, `\t`… or `\u00XX`); everything else is the caller's job: members and elements in
/// order, with ``comma()`` between them.
package struct JSONWriter: Sendable {
    /// The text so far.
    package private(set) var bytes: [UInt8] = []

    /// An empty text with room for `capacity` bytes.
    package init(capacity: Int = 256) {
        bytes.reserveCapacity(capacity)
    }

    /// Appends raw punctuation or a literal (`{`, `]`, `null`).
    package mutating func punctuation(_ text: StaticString) {
        text.withUTF8Buffer { bytes.append(contentsOf: $0) }
    }

    /// Appends `,`.
    package mutating func comma() { bytes.append(UInt8(ascii: ",")) }

    /// Appends `"key":`.
    package mutating func key(_ name: String) {
        string(name)
        bytes.append(UInt8(ascii: ":"))
    }

    /// Appends `value` as a JSON string.
    package mutating func string(_ value: String) {
        bytes.append(UInt8(ascii: "\""))
        for byte in value.utf8 {
            switch byte {
            case UInt8(ascii: "\""): bytes += [0x5C, UInt8(ascii: "\"")]
            case UInt8(ascii: "\\"): bytes += [0x5C, 0x5C]
            case 0x0A: bytes += [0x5C, UInt8(ascii: "n")]
            case 0x0D: bytes += [0x5C, UInt8(ascii: "r")]
            case 0x09: bytes += [0x5C, UInt8(ascii: "t")]
            case 0x08: bytes += [0x5C, UInt8(ascii: "b")]
            case 0x0C: bytes += [0x5C, UInt8(ascii: "f")]
            case 0x00..<0x20:
                let hex = Array("0123456789abcdef".utf8)
                bytes += [0x5C, UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"), hex[Int(byte >> 4)], hex[Int(byte & 0x0F)]]
            default: bytes.append(byte)
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }

    /// Appends bytes that are one complete JSON value, as they are. The caller has validated
    /// them (``StrictJSON/parse(_:)`` accepted them): nothing here checks.
    package mutating func validatedJSON(_ value: some Collection<UInt8>) {
        bytes.append(contentsOf: value)
    }
}

/// A method's reply parameters, already encoded as one JSON object (see ``JSONWriter``).
public struct VarlinkEncodedParameters: Sendable {
    /// The object's text.
    package let bytes: [UInt8]

    /// Takes the text of a JSON object that `writer` built.
    package init(_ writer: JSONWriter) {
        bytes = writer.bytes
    }
}
