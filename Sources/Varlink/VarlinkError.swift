/// A Varlink error reply: a fully qualified error name and its parameters.
///
/// Handlers throw this to answer with a specific error; the client throws it when a reply
/// carries `error`.
public struct VarlinkError: Error, Sendable, Hashable, CustomStringConvertible {
    /// Fully qualified, e.g. `org.varlink.service.MethodNotFound`.
    public var name: String
    /// The error's parameters, as the interface declares them.
    public var parameters: [String: JSONValue]

    /// An error reply named `name`.
    public init(_ name: String, parameters: [String: JSONValue] = [:]) {
        self.name = name
        self.parameters = parameters
    }

    /// Builds an error whose parameters come from an encodable value.
    public init(_ name: String, encoding parameters: some Encodable) throws {
        self.name = name
        self.parameters = try VarlinkCoding.jsonValue(from: parameters).objectValue ?? [:]
    }

    /// The name and parameters, for logs and error output.
    public var description: String {
        guard !parameters.isEmpty else { return name }
        let rendered = parameters.keys.sorted().map { key in
            let value = parameters[key].map { value in
                if case .string(let text) = value { return text }
                return String(describing: value)
            } ?? ""
            return "\(key)=\(value)"
        }
        return "\(name) (\(rendered.joined(separator: ", ")))"
    }

    /// A string parameter, when present.
    public func string(_ key: String) -> String? { parameters[key]?.stringValue }
}

/// The standard errors of `org.varlink.service`, which every client understands.
extension VarlinkError {
    /// The interface every Varlink service implements.
    public static let serviceInterface = "org.varlink.service"

    /// The call named an interface the service does not implement.
    public static func interfaceNotFound(_ interface: String) -> VarlinkError {
        VarlinkError("org.varlink.service.InterfaceNotFound", parameters: ["interface": .string(interface)])
    }

    /// The interface has no such method.
    public static func methodNotFound(_ method: String) -> VarlinkError {
        VarlinkError("org.varlink.service.MethodNotFound", parameters: ["method": .string(method)])
    }

    /// The method is declared but has no handler.
    public static func methodNotImplemented(_ method: String) -> VarlinkError {
        VarlinkError("org.varlink.service.MethodNotImplemented", parameters: ["method": .string(method)])
    }

    /// A parameter is missing, of the wrong type, or malformed; `parameter` names it.
    public static func invalidParameter(_ parameter: String) -> VarlinkError {
        VarlinkError("org.varlink.service.InvalidParameter", parameters: ["parameter": .string(parameter)])
    }

    /// The caller may not call this method.
    public static let permissionDenied = VarlinkError("org.varlink.service.PermissionDenied")

    /// A streaming method was called without `more`.
    public static let expectedMore = VarlinkError("org.varlink.service.ExpectedMore")
}
