import Glibc
import NetlinkProbe
import Testing

/// The tests' children (`runCommand`) inherit standard input, output and error only.
///
/// NIO accepts connections without close-on-exec: a child that inherited one held it open after
/// the test's server closed or reset it, and requests in other tests waited for an end that came
/// only when the child exited: four tests of redirects, walked pages and control-socket slots
/// timed out in three full runs.
@Suite struct SubprocessDescriptorTests {
    @Test func aChildInheritsNoDescriptorAboveStandardError() async throws {
        // A socket without FD_CLOEXEC, as NIO's accepted connections are.
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        try #require(socket > 2)
        defer { close(socket) }
        #expect(fcntl(socket, F_GETFD) & FD_CLOEXEC == 0)
        let listed = try await runCommand(["python3", "-c", "import os; print(' '.join(os.listdir('/proc/self/fd')))"])
        let open = Set(listed.split(whereSeparator: \.isWhitespace).compactMap { Int32($0) })
        #expect(open.isSuperset(of: [0, 1, 2]))
        #expect(!open.contains(socket), "the child holds the parent's socket \(socket): \(open.sorted())")
    }
}
