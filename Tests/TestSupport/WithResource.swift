/// Runs `body` with `resource`, then ends it with `close` on every path.
///
/// When `body` throws, its error is the one that counts and a failure to close is dropped;
/// otherwise a failure to close is thrown, since a resource that would not end is a defect too.
public func withResource<Resource: Sendable, T>(
    _ resource: Resource,
    closedBy close: (Resource) async throws -> Void,
    isolation: isolated (any Actor)? = #isolation,
    _ body: (Resource) async throws -> T
) async throws -> T {
    let result: T
    do {
        result = try await body(resource)
    } catch {
        try? await close(resource)
        throw error
    }
    try await close(resource)
    return result
}
