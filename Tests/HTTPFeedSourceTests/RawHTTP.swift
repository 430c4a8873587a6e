import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1

/// A plain HTTP exchange, for tests of the server itself.
struct RawResponse {
    var status: Int
    var headers: [(String, String)]
    var body: String

    func header(_ name: String) -> String? {
        headers.first { $0.0.lowercased() == name.lowercased() }?.1
    }
}

/// No decompression (so tests see the encoding the server chose) and no redirects. Lives for the
/// whole test process, like `HTTPClient.shared`.
private let rawClient = HTTPClient(
    eventLoopGroupProvider: .singleton,
    configuration: .init(redirectConfiguration: .disallow, timeout: .init(connect: .seconds(2))))

func rawRequest(_ url: String, method: HTTPMethod = .GET, headers: [(String, String)] = []) async throws -> RawResponse {
    var request = HTTPClientRequest(url: url)
    request.method = method
    for (name, value) in headers { request.headers.add(name: name, value: value) }
    let response = try await rawClient.execute(request, timeout: .seconds(10))
    let body = try await response.body.collect(upTo: 16 << 20)
    return RawResponse(
        status: Int(response.status.code),
        headers: response.headers.map { ($0.name, $0.value) },
        body: String(buffer: body))
}
