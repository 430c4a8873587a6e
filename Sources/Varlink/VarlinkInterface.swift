/// The credentials of the process at the other end of a connection, taken from the kernel
/// (`SO_PEERCRED`, `SO_PEERGROUPS`) when it connected, so they cannot be forged by the peer.
public struct VarlinkPeer: Sendable, Hashable {
    /// The peer's process id.
    public var pid: Int32
    /// The peer's user id.
    public var uid: UInt32
    /// The peer's primary group id.
    public var gid: UInt32
    /// Supplementary groups at connect time.
    public var groups: [UInt32]

    /// Credentials as read from the kernel.
    public init(pid: Int32, uid: UInt32, gid: UInt32, groups: [UInt32] = []) {
        self.pid = pid
        self.uid = uid
        self.gid = gid
        self.groups = groups
    }

    /// Whether the peer has `gid` as its primary or a supplementary group.
    public func isMember(of gid: UInt32) -> Bool {
        self.gid == gid || groups.contains(gid)
    }
}

/// A call as seen by a method handler: the call and who made it.
public struct VarlinkRequest: Sendable {
    /// The call.
    public var call: VarlinkCall
    /// Who made it.
    public var peer: VarlinkPeer

    /// A request for a handler.
    public init(call: VarlinkCall, peer: VarlinkPeer) {
        self.call = call
        self.peer = peer
    }

    /// Decodes the parameters; a mismatch becomes `org.varlink.service.InvalidParameter`
    /// naming the offending field.
    public func decodeParameters<T: Decodable>(_ type: T.Type) throws(VarlinkError) -> T {
        do {
            return try JSONValueDecoder.decode(type, from: .object(call.parameters))
        } catch let error as DecodingError {
            throw .invalidParameter(Self.parameterName(of: error))
        } catch {
            throw .invalidParameter("parameters")
        }
    }

    private static func parameterName(of error: DecodingError) -> String {
        let path: [any CodingKey]
        switch error {
        case .keyNotFound(let key, let context): path = context.codingPath + [key]
        case .typeMismatch(_, let context), .valueNotFound(_, let context), .dataCorrupted(let context): path = context.codingPath
        @unknown default: path = []
        }
        let name = path.map { $0.intValue.map(String.init) ?? $0.stringValue }.joined(separator: ".")
        return name.isEmpty ? "parameters" : name
    }
}

/// Sends replies for a streaming (`more`) call.
public struct VarlinkReplyWriter: Sendable {
    let send: @Sendable (VarlinkReply) async throws -> Void

    /// A writer that hands each reply to `send`.
    public init(_ send: @escaping @Sendable (VarlinkReply) async throws -> Void) {
        self.send = send
    }

    /// Sends one reply; `continues: false` ends the call.
    public func reply(_ parameters: [String: JSONValue], continues: Bool) async throws {
        try await send(VarlinkReply(parameters: parameters, continues: continues))
    }

    /// Sends one reply whose parameters the handler encoded; `continues: false` ends the call.
    public func reply(encoded parameters: VarlinkEncodedParameters, continues: Bool) async throws {
        var reply = VarlinkReply(continues: continues)
        reply.encodedParameters = parameters.bytes
        try await send(reply)
    }
}

/// How a method answers.
public enum VarlinkMethodHandler: Sendable {
    /// Exactly one reply.
    case single(@Sendable (VarlinkRequest) async throws -> [String: JSONValue])
    /// Exactly one reply, whose parameters the handler encoded itself (large replies made of
    /// parts that are JSON already, sent without a decode and encode per part).
    case encoded(@Sendable (VarlinkRequest) async throws -> VarlinkEncodedParameters)
    /// Any number of replies through the writer; such methods must be called with `more`.
    /// Returning after a reply with `continues: true` ends the connection (the stream is over).
    case streaming(@Sendable (VarlinkRequest, VarlinkReplyWriter) async throws -> Void)
}

/// Parameters of a method that takes none, or the result of one that returns none.
public struct VarlinkEmpty: Codable, Sendable, Hashable {
    /// The empty value.
    public init() {}
}

/// One interface a service implements: its name, its description (IDL) and method handlers.
public struct VarlinkInterface: Sendable {
    /// The fully qualified interface name, e.g. `io.syncd`.
    public let name: String
    /// The interface definition, returned verbatim by `GetInterfaceDescription`.
    public let description: String
    /// Methods named in the description.
    public let declaredMethods: Set<String>
    private(set) var handlers: [String: VarlinkMethodHandler] = [:]

    /// Creates an interface from its IDL text.
    public init(description: String) throws(VarlinkInterfaceDefinitionError) {
        let parsed = try VarlinkIDL.scan(description)
        self.name = parsed.name
        self.description = description
        self.declaredMethods = parsed.methods
    }

    /// Installs a handler for a method named in the description.
    public mutating func register(_ member: String, _ handler: VarlinkMethodHandler) {
        precondition(declaredMethods.contains(member), "\(name).\(member) is not declared in the interface description")
        handlers[member] = handler
    }

    /// Installs a single-reply method with typed parameters and result.
    public mutating func method<Parameters: Decodable & Sendable, Result: Encodable & Sendable>(
        _ member: String,
        parameters: Parameters.Type,
        _ body: @escaping @Sendable (Parameters, VarlinkRequest) async throws -> Result
    ) {
        register(member, .single { request in
            let parameters = try request.decodeParameters(Parameters.self)
            let result = try await body(parameters, request)
            return try VarlinkCoding.jsonValue(from: result).objectValue ?? [:]
        })
    }

    /// Installs a single-reply method with typed parameters whose reply `body` encodes itself.
    public mutating func encodedMethod<Parameters: Decodable & Sendable>(
        _ member: String,
        parameters: Parameters.Type,
        _ body: @escaping @Sendable (Parameters, VarlinkRequest) async throws -> VarlinkEncodedParameters
    ) {
        register(member, .encoded { request in
            try await body(try request.decodeParameters(Parameters.self), request)
        })
    }

    /// Installs a streaming method whose every reply continues; it ends when `body` returns.
    public mutating func streamingMethod<Parameters: Decodable & Sendable, Element: Encodable & Sendable>(
        _ member: String,
        parameters: Parameters.Type,
        _ body: @escaping @Sendable (Parameters, VarlinkRequest, _ yield: @Sendable (Element) async throws -> Void) async throws -> Void
    ) {
        register(member, .streaming { request, writer in
            let parameters = try request.decodeParameters(Parameters.self)
            try await body(parameters, request) { element in
                try await writer.reply(VarlinkCoding.jsonValue(from: element).objectValue ?? [:], continues: true)
            }
        })
    }

    /// Installs a single-reply method that takes no parameters.
    public mutating func method<Result: Encodable & Sendable>(
        _ member: String,
        _ body: @escaping @Sendable (VarlinkRequest) async throws -> Result
    ) {
        method(member, parameters: VarlinkEmpty.self) { _, request in try await body(request) }
    }

    func handler(for member: String) -> VarlinkMethodHandler? { handlers[member] }
}

/// A description that does not start with a valid `interface` line.
public struct VarlinkInterfaceDefinitionError: Error, Sendable, CustomStringConvertible {
    /// What is wrong with the definition.
    public var reason: String
    /// "invalid Varlink interface definition: REASON".
    public var description: String { "invalid Varlink interface definition: \(reason)" }
}

/// Just enough of the IDL grammar to route calls: the interface name and method names.
/// Full validation is left to the reference parsers used in the tests.
enum VarlinkIDL {
    static func scan(_ text: String) throws(VarlinkInterfaceDefinitionError) -> (name: String, methods: Set<String>) {
        var name: String?
        var methods = Set<String>()
        for rawLine in text.split(whereSeparator: \.isNewline) {
            let line = rawLine.drop { $0 == " " || $0 == "\t" }
            if line.hasPrefix("#") { continue }
            let words = line.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "(" })
            guard words.count >= 2 else { continue }
            if words[0] == "interface", name == nil {
                name = String(words[1])
            } else if words[0] == "method" {
                methods.insert(String(words[1]))
            }
        }
        guard let name, VarlinkCall.isValidMethodName(name + ".X") else {
            throw VarlinkInterfaceDefinitionError(reason: "missing or malformed `interface` line")
        }
        return (name, methods)
    }
}
