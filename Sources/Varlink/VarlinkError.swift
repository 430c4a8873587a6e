/// A Varlink error reply: a fully qualified error name and its parameters.
///
/// Handlers throw this to answer with a specific error; the client throws it when a reply
/// carries `error`.
public struct VarlinkError: Error, Sendable, Hashable, CustomStringConvertible {
    /// Fully qualified, e.g. `org.varlink.service.MethodNotFound`.
    public var name: String
    public var parameters: [String: JSONValue]

    public init(_ name: String, parameters: [String: JSONValue] = [:]) {
        self.name = name
        self.parameters = parameters
    }

    /// Builds an error whose parameters come from an encodable value.
    public init(_ name: String, encoding parameters: some Encodable) throws {
        self.name = name
        self.parameters = try VarlinkCoding.jsonValue(from: parameters).objectValue ?? [:]
    }

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
    public static let serviceInterface = "org.varlink.service"

    public static func interfaceNotFound(_ interface: String) -> VarlinkError {
        VarlinkError("org.varlink.service.InterfaceNotFound", parameters: ["interface": .string(interface)])
    }

    public static func methodNotFound(_ method: String) -> VarlinkError {
        VarlinkError("org.varlink.service.MethodNotFound", parameters: ["method": .string(method)])
    }

    public static func methodNotImplemented(_ method: String) -> VarlinkError {
        VarlinkError("org.varlink.service.MethodNotImplemented", parameters: ["method": .string(method)])
    }

    public static func invalidParameter(_ parameter: String) -> VarlinkError {
        VarlinkError("org.varlink.service.InvalidParameter", parameters: ["parameter": .string(parameter)])
    }

    public static let permissionDenied = VarlinkError("org.varlink.service.PermissionDenied")

    public static let expectedMore = VarlinkError("org.varlink.service.ExpectedMore")

    public var isPermissionDenied: Bool { name == VarlinkError.permissionDenied.name }
}
