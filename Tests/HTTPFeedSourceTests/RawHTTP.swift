import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import TestSupport

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
/// whole test process, like `HTTPClient.shared`. Its timeouts are the hang guard: every request
/// it makes is expected to be answered (admin calls, pages the test reads), and the servers
/// answering them share two congested cores with the rest of the suite. A refused connect is an
/// answer, not retried until the connect timeout (a test asks a stopped server on purpose).
private let rawClient: HTTPClient = {
    var pool = HTTPClient.Configuration.ConnectionPool()
    pool.retryConnectionEstablishment = false
    return HTTPClient(
        eventLoopGroupProvider: .singleton,
        configuration: .init(redirectConfiguration: .disallow, timeout: .init(connect: TimeAmount(hangGuard)), connectionPool: pool))
}()

func rawRequest(_ url: String, method: HTTPMethod = .GET, headers: [(String, String)] = []) async throws -> RawResponse {
    var request = HTTPClientRequest(url: url)
    request.method = method
    for (name, value) in headers { request.headers.add(name: name, value: value) }
    let response = try await rawClient.execute(request, timeout: TimeAmount(hangGuard))
    let body = try await response.body.collect(upTo: 16 << 20)
    return RawResponse(
        status: Int(response.status.code),
        headers: response.headers.map { ($0.name, $0.value) },
        body: String(buffer: body))
}
