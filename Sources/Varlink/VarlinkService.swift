/// What `org.varlink.service.GetInfo` reports.
public struct VarlinkServiceInfo: Sendable, Hashable, Codable {
    /// Who makes the service.
    public var vendor: String
    /// The product's name.
    public var product: String
    /// The product's version.
    public var version: String
    /// Where the product is documented.
    public var url: String

    /// A service description.
    public init(vendor: String, product: String, version: String, url: String) {
        self.vendor = vendor
        self.product = product
        self.version = version
        self.url = url
    }
}

/// A set of interfaces plus the mandatory `org.varlink.service`, and the routing of calls.
public struct VarlinkService: Sendable {
    /// What `GetInfo` reports.
    public let info: VarlinkServiceInfo
    private let interfaces: [String: VarlinkInterface]

    /// A service of `interfaces` plus `org.varlink.service`.
    public init(info: VarlinkServiceInfo, interfaces: [VarlinkInterface]) {
        self.info = info
        var byName: [String: VarlinkInterface] = [:]
        for interface in interfaces { byName[interface.name] = interface }
        byName[VarlinkError.serviceInterface] = Self.serviceInterface(info: info, names: [VarlinkError.serviceInterface] + interfaces.map(\.name), descriptions: byName)
        self.interfaces = byName
    }

    /// Finds the handler for a call or the standard error explaining why there is none.
    func route(_ call: VarlinkCall) -> Result<VarlinkMethodHandler, VarlinkError> {
        guard let interface = interfaces[call.interface] else {
            return .failure(.interfaceNotFound(call.interface))
        }
        guard interface.declaredMethods.contains(call.member) else {
            return .failure(.methodNotFound(call.method))
        }
        guard let handler = interface.handler(for: call.member) else {
            return .failure(.methodNotImplemented(call.method))
        }
        return .success(handler)
    }

    private struct DescriptionParameters: Decodable { var interface: String }
    private struct DescriptionResult: Encodable { var description: String }
    private struct InfoResult: Encodable {
        var vendor, product, version, url: String
        var interfaces: [String]
    }

    private static func serviceInterface(info: VarlinkServiceInfo, names: [String], descriptions: [String: VarlinkInterface]) -> VarlinkInterface {
        // The text is a constant known to be valid.
        var service = try! VarlinkInterface(description: orgVarlinkServiceDescription)
        let own = service.description
        service.method("GetInfo") { _ in
            InfoResult(vendor: info.vendor, product: info.product, version: info.version, url: info.url, interfaces: names)
        }
        service.method("GetInterfaceDescription", parameters: DescriptionParameters.self) { parameters, _ in
            if parameters.interface == VarlinkError.serviceInterface { return DescriptionResult(description: own) }
            guard let interface = descriptions[parameters.interface] else { throw VarlinkError.interfaceNotFound(parameters.interface) }
            return DescriptionResult(description: interface.description)
        }
        return service
    }

    /// The standard service interface, as published by varlink.org and systemd.
    static let orgVarlinkServiceDescription = """
        # The Varlink Service Interface is provided by every varlink service. It
        # describes the service and the interfaces it implements.
        interface org.varlink.service

        # Get a list of all the interfaces a service provides and information
        # about the implementation.
        method GetInfo() -> (
          vendor: string,
          product: string,
          version: string,
          url: string,
          interfaces: []string
        )

        # Get the description of an interface that is implemented by this service.
        method GetInterfaceDescription(interface: string) -> (description: string)

        # The requested interface was not found.
        error InterfaceNotFound (interface: string)

        # The requested method was not found
        error MethodNotFound (method: string)

        # The interface defines the requested method, but the service does not
        # implement it.
        error MethodNotImplemented (method: string)

        # One of the passed parameters is invalid.
        error InvalidParameter (parameter: string)

        # Client is denied access
        error PermissionDenied ()

        # Method is expected to be called with 'more' set to true, but wasn't
        error ExpectedMore ()

        """
}
