import Foundation
import SyncControl
import TestSupport
import Testing

@Suite("io.syncd interface definition", .timeLimit(.minutes(3)))
struct InterfaceDefinitionTests {
    static let resourcePath = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Sources/SyncControl/io.syncd.varlink").path

    @Test func compiledInTextMatchesTheFile() throws {
        let file = try String(contentsOfFile: Self.resourcePath, encoding: .utf8)
        #expect(file == SyncdInterface.description, "regenerate SyncdInterface.swift from io.syncd.varlink")
    }

    /// Every method the IDL declares is wired to the handler (none answers MethodNotImplemented).
    @Test func everyDeclaredMethodIsImplemented() async throws {
        let methods = SyncdInterface.description.split(separator: "\n").filter { $0.hasPrefix("method ") }
            .map { $0.dropFirst(7).prefix { $0 != "(" } }
        #expect(methods.count == 9)
        try await withControlServer { path in
            let client = VarlinkClientShim(path: path)
            for method in methods {
                let error = await client.errorName(of: "io.syncd.\(method)")
                #expect(error != "org.varlink.service.MethodNotImplemented" && error != "org.varlink.service.MethodNotFound", "\(method)")
            }
        }
    }
}

import Varlink

/// Calls a method with no parameters and returns the error name, if any.
struct VarlinkClientShim {
    var path: String
    func errorName(of method: String) async -> String? {
        do {
            _ = try await VarlinkClient(socketPath: path).call(method)
            return nil
        } catch let error as VarlinkError {
            return error.name
        } catch {
            return "\(error)"
        }
    }
}
