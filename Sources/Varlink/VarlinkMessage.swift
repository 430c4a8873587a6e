import Foundation

/// A method call as sent by a client.
public struct VarlinkCall: Sendable, Hashable {
    /// Fully qualified method name, e.g. `io.syncd.GetStatus`.
    public var method: String
    /// The call's parameters.
    public var parameters: [String: JSONValue]
    /// The client wants no reply.
    public var oneway: Bool
    /// The client accepts several replies (`continues: true` on all but the last).
    public var more: Bool
    /// The client asks to switch the connection to another protocol (not supported here).
    public var upgrade: Bool

    /// A call of `method`; `oneway`, `more` and `upgrade` are the protocol's flags.
    public init(method: String, parameters: [String: JSONValue] = [:], oneway: Bool = false, more: Bool = false, upgrade: Bool = false) {
        self.method = method
        self.parameters = parameters
        self.oneway = oneway
        self.more = more
        self.upgrade = upgrade
    }

    /// The interface part of ``method`` (everything before the last dot).
    public var interface: String {
        guard let dot = method.lastIndex(of: ".") else { return "" }
        return String(method[..<dot])
    }

    /// The member part of ``method`` (after the last dot).
    public var member: String {
        guard let dot = method.lastIndex(of: ".") else { return method }
        return String(method[method.index(after: dot)...])
    }

    /// Decodes one JSON message (without its NUL) into a call.
    ///
    /// Throws a ``VarlinkError`` (`InvalidParameter`) that can be sent back as is, so a
    /// malformed message costs the client one error reply and nothing else.
    public static func decode(_ bytes: some Collection<UInt8>) throws(VarlinkError) -> VarlinkCall {
        let value: JSONValue
        do throws(StrictJSON.Failure) {
            value = try StrictJSON.parse(bytes)
        } catch {
            // A problem inside a member is reported by that member's name (`limit` for a
            // duplicate or out-of-range limit, `method` for a second method); one in the
            // message's framing only as not valid JSON.
            guard let first = error.path.first else { throw .invalidParameter("message is not valid JSON") }
            if first == "parameters", error.path.count > 1 {
                throw .invalidParameter(error.path.dropFirst().joined(separator: "."))
            }
            throw .invalidParameter(first)
        }
        guard let object = value.objectValue else { throw .invalidParameter("message is not a JSON object") }
        guard case .string(let method)? = object["method"], isValidMethodName(method) else {
            throw .invalidParameter("method")
        }
        var call = VarlinkCall(method: method)
        switch object["parameters"] {
        case nil, .null?: break
        case .object(let parameters)?: call.parameters = parameters
        default: throw .invalidParameter("parameters")
        }
        for (key, flag) in [("oneway", \VarlinkCall.oneway), ("more", \.more), ("upgrade", \.upgrade)] as [(String, WritableKeyPath<VarlinkCall, Bool>)] {
            switch object[key] {
            case nil, .null?: break
            case .bool(let value)?: call[keyPath: flag] = value
            default: throw .invalidParameter(key)
            }
        }
        return call
    }

    /// Encodes the call as one JSON message (without its NUL).
    public func encoded() throws -> Data {
        var object: [String: JSONValue] = ["method": .string(method)]
        if !parameters.isEmpty { object["parameters"] = .object(parameters) }
        if oneway { object["oneway"] = true }
        if more { object["more"] = true }
        if upgrade { object["upgrade"] = true }
        return try VarlinkCoding.makeEncoder().encode(JSONValue.object(object))
    }

    /// `interface.Member`, where the interface is a reverse-domain name and the member starts
    /// with an upper-case letter, as the Varlink grammar requires.
    static func isValidMethodName(_ name: String) -> Bool {
        guard name.utf8.count <= 255, let dot = name.lastIndex(of: "."), dot != name.startIndex else { return false }
        let member = name[name.index(after: dot)...]
        guard let first = member.first, first.isASCII, first.isUppercase else { return false }
        return member.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber) }
            && name[..<dot].allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "." || $0 == "-") }
    }
}

/// One reply from a service.
public struct VarlinkReply: Sendable, Hashable {
    /// The reply's parameters (an error's parameters on an error reply).
    public var parameters: [String: JSONValue]
    /// More replies follow for the same call.
    public var continues: Bool
    /// Set on error replies: the fully qualified error name.
    public var error: String?
    /// Parameters encoded by the handler (``VarlinkEncodedParameters``): sent in place of
    /// ``parameters``, as they are.
    package var encodedParameters: [UInt8]?

    /// A reply; `error` makes it an error reply.
    public init(parameters: [String: JSONValue] = [:], continues: Bool = false, error: String? = nil) {
        self.parameters = parameters
        self.continues = continues
        self.error = error
    }

    /// The error reply for `error`.
    public init(error: VarlinkError) {
        self.init(parameters: error.parameters, continues: false, error: error.name)
    }

    /// The error this reply carries, if any.
    public var varlinkError: VarlinkError? {
        error.map { VarlinkError($0, parameters: parameters) }
    }

    /// The reply as sent: its JSON object, without the NUL that ends it on the wire.
    public func encoded() throws -> Data {
        if let encodedParameters, error == nil {
            // Members in the order the encoder sorts them: continues, parameters.
            var bytes = Array((continues ? #"{"continues":true,"parameters":"# : #"{"parameters":"#).utf8)
            bytes += encodedParameters
            bytes.append(UInt8(ascii: "}"))
            return Data(bytes)
        }
        var object: [String: JSONValue] = ["parameters": .object(parameters)]
        if continues { object["continues"] = true }
        if let error { object["error"] = .string(error) }
        return try VarlinkCoding.makeEncoder().encode(JSONValue.object(object))
    }

    /// Decodes a reply; a message that is not a reply object is a protocol violation.
    public static func decode(_ bytes: some Collection<UInt8>) throws -> VarlinkReply {
        let value: JSONValue
        do throws(StrictJSON.Failure) {
            value = try StrictJSON.parse(bytes)
        } catch {
            throw VarlinkProtocolError.malformedReply("\(error)")
        }
        guard let object = value.objectValue else { throw VarlinkProtocolError.malformedReply("not a JSON object") }
        var reply = VarlinkReply()
        switch object["parameters"] {
        case nil, .null?: break
        case .object(let parameters)?: reply.parameters = parameters
        default: throw VarlinkProtocolError.malformedReply("parameters is not an object")
        }
        if case .bool(let continues)? = object["continues"] { reply.continues = continues }
        switch object["error"] {
        case nil, .null?: break
        case .string(let name)?: reply.error = name
        default: throw VarlinkProtocolError.malformedReply("error is not a string")
        }
        return reply
    }
}

/// Violations of the wire protocol seen by a client.
public enum VarlinkProtocolError: Error, Sendable, Hashable, CustomStringConvertible {
    /// A reply that is not a valid Varlink message (the text says why).
    case malformedReply(String)
    /// A reply longer than the client accepts.
    case messageTooLarge(limit: Int)
    /// The service closed the connection before the reply.
    case connectionClosed
    /// A reply said `continues` to a call that did not ask for `more`.
    case unexpectedContinuation

    /// The violation in words.
    public var description: String {
        switch self {
        case .malformedReply(let why): "malformed Varlink reply: \(why)"
        case .messageTooLarge(let limit): "Varlink message larger than \(limit) bytes"
        case .connectionClosed: "the service closed the connection"
        case .unexpectedContinuation: "the service sent more replies than asked for"
        }
    }
}
