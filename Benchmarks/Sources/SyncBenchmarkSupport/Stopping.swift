import NetlinkProbe

extension ChildProcess {
    /// Runs `body`, then stops the child with `signal` (SIGKILL after `timeout`) whether `body`
    /// returned or threw: the `defer` that an `async` stop cannot be in.
    func stopping<T>(
        with signal: Int32, after timeout: Duration = hangGuard, isolation: isolated (any Actor)? = #isolation,
        _ body: () async throws -> T
    ) async throws -> T {
        do {
            let value = try await body()
            await stop(signal: signal, timeout: timeout)
            return value
        } catch {
            await stop(signal: signal, timeout: timeout)
            throw error
        }
    }
}
