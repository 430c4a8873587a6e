import DemoFeedServer
import Logging

extension DemoFeedServer {
    /// A server whose feed requests go through a ``FaultInjector`` made with `faults`: it
    /// honours `fault=SPEC`, scripted and random faults, and the `/admin/faults` endpoints.
    public convenience init(
        configuration: Configuration, faults: FaultInjector.Settings, logger: Logger = Logger(label: "demo-feed")
    ) throws(DemoFeedServerError) {
        let injector = try FaultInjector(feeds: configuration.feeds.map(\.name), settings: faults)
        try self.init(configuration: configuration, hook: injector, logger: logger)
    }

    /// The server's fault injector, when it was made with one.
    public var faultInjector: FaultInjector? { requestHook as? FaultInjector }

    /// Scripts a fault for the next matching requests; a server without a fault injector
    /// refuses it.
    public func scriptFault(_ fault: ScriptedFault) async throws(DemoFeedServerError) {
        guard let faultInjector else { throw .invalidArgument("this server injects no faults") }
        try await faultInjector.script(fault)
    }

    /// Drops faults scripted but not yet used.
    public func clearScriptedFaults() async { await faultInjector?.clearScriptedFaults() }

    /// Scripted faults not yet used up.
    public func pendingScriptedFaults() async -> [ScriptedFault] { await faultInjector?.pendingScriptedFaults ?? [] }

    /// Requests currently held by a stall fault.
    public func stalledRequestCount() async -> Int { await faultInjector?.heldRequestCount() ?? 0 }
}

extension RequestRecord {
    /// The fault a ``FaultInjector`` injected into this request, if any.
    public var fault: Fault? { intervention.flatMap { try? Fault(spec: $0) } }
}
