import Foundation
import SyncControl
import TestSupport
import Testing
import Varlink

/// Peer-credential checks against real processes of another user (nobody, 65534), run through
/// `setpriv` with a stdlib-only Python client so nothing beyond Debian's python3 is needed.
@Suite("Control permissions", .enabled(if: Privileges.rootTestsEnabled, Comment(rawValue: Privileges.skipReason)), .timeLimit(.minutes(3)))
struct PermissionTests {
    static let python = "/usr/bin/python3"

    /// Sends one call as `nobody` (with `groups` as supplementary groups) and returns the reply.
    /// The client's socket has a timeout, so a server that never answers fails the call instead
    /// of hanging it.
    static func callAsNobody(_ path: String, method: String, parameters: [String: String] = [:], groups: [UInt32] = []) async throws -> [String: Any] {
        let script = """
            import json, socket, sys
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(30)
            s.connect(sys.argv[1])
            s.sendall(json.dumps({"method": sys.argv[2], "parameters": json.loads(sys.argv[3])}).encode() + b"\\0")
            data = b""
            while not data.endswith(b"\\0"):
                chunk = s.recv(65536)
                if not chunk: break
                data += chunk
            sys.stdout.write(data.rstrip(b"\\0").decode())
            """
        let groupArguments = groups.isEmpty ? ["--clear-groups"] : ["--groups=" + groups.map(String.init).joined(separator: ",")]
        let parametersJSON = String(decoding: try JSONSerialization.data(withJSONObject: parameters), as: UTF8.self)
        let arguments = ["setpriv", "--reuid=65534", "--regid=65534"] + groupArguments + [python, "-c", script, path, method, parametersJSON]
        let output = try await runCommand(arguments)
        return try JSONSerialization.jsonObject(with: Data(output.utf8)) as? [String: Any] ?? [:]
    }

    @Test func nonRootMayReadButNotChangeState() async throws {
        try Privileges.requireRoot()
        let handler = FakeHandler()
        try await withControlServer(handler: handler) { path in
            let status = try await Self.callAsNobody(path, method: "io.syncd.GetStatus")
            #expect(status["error"] == nil)
            #expect((status["parameters"] as? [String: Any])?["status"] != nil)

            let items = try await Self.callAsNobody(path, method: "io.syncd.ListItems", parameters: ["feed": "home"])
            #expect(items["error"] == nil)

            for method in ["io.syncd.Refresh", "io.syncd.LoadOlder", "io.syncd.Retry", "io.syncd.MarkSeen"] {
                let reply = try await Self.callAsNobody(path, method: method, parameters: ["feed": "home"])
                #expect(reply["error"] as? String == "org.varlink.service.PermissionDenied", "\(method)")
            }
        }
        #expect(handler.recordedCalls.isEmpty, "denied calls must never reach the handler")
    }

    @Test func membersOfTheControlGroupMayChangeState() async throws {
        try Privileges.requireRoot()
        let controlGroup: UInt32 = 4242
        let handler = FakeHandler()
        try await withControlServer(handler: handler, policy: ControlAccessPolicy(privilegedGroups: [controlGroup])) { path in
            let member = try await Self.callAsNobody(path, method: "io.syncd.Refresh", parameters: ["feed": "home"], groups: [100, controlGroup])
            #expect(member["error"] == nil)
            let outsider = try await Self.callAsNobody(path, method: "io.syncd.Refresh", parameters: ["feed": "work"], groups: [100])
            #expect(outsider["error"] as? String == "org.varlink.service.PermissionDenied")
        }
        #expect(handler.recordedCalls == ["refresh home"])
    }

    @Test func rootMayChangeState() async throws {
        try Privileges.requireRoot()
        try await withControlServer { path in
            let feeds = try await SyncControlClient(socketPath: path).refresh(feed: "home")
            #expect(feeds == ["home"])
        }
    }
}

@Suite("Control access policy")
struct AccessPolicyTests {
    @Test func policyRules() {
        let policy = ControlAccessPolicy(privilegedGroups: [10])
        #expect(policy.mayChangeState(VarlinkPeer(pid: 1, uid: 0, gid: 0)))
        #expect(policy.mayChangeState(VarlinkPeer(pid: 1, uid: 1000, gid: 10)))
        #expect(policy.mayChangeState(VarlinkPeer(pid: 1, uid: 1000, gid: 1000, groups: [4, 10])))
        #expect(!policy.mayChangeState(VarlinkPeer(pid: 1, uid: 1000, gid: 1000, groups: [4])))
        #expect(ControlAccessPolicy(groupName: "no-such-group-here").privilegedGroups.isEmpty)
        #expect(ControlAccessPolicy(groupName: "root").privilegedGroups == [0])
    }
}

/// One local user cannot lock others out of the world-connectable socket by holding connections.
@Suite("Per-user connection limit", .enabled(if: Privileges.rootTestsEnabled, Comment(rawValue: Privileges.skipReason)), .timeLimit(.minutes(3)))
struct PerUserConnectionLimitTests {
    @Test func oneUserHoldsAtMostItsShareAndRootIsStillServed() async throws {
        try Privileges.requireRoot()
        // 16 connections: 4 per non-root user (a quarter), 1 kept for root.
        try await withControlServer(maxConnections: 16) { path in
            let script = """
                import json, socket, sys
                held = []
                for _ in range(10):
                    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                    # Long past any reply a loaded machine delays: a reply that came after
                    # the timeout would count as refused.
                    s.settimeout(30)
                    s.connect(sys.argv[1])
                    held.append(s)
                served = 0
                for s in held:
                    try:
                        s.sendall(json.dumps({"method": "org.varlink.service.GetInfo"}).encode() + b"\\0")
                        if s.recv(65536).endswith(b"\\0"):
                            served += 1
                    except OSError:
                        pass
                sys.stdout.write(str(served) + "\\n")
                sys.stdout.flush()
                sys.stdin.readline()
                """
            let directory = try TemporaryDirectory()
            let nobody = try ChildProcess(
                ["/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", PermissionTests.python, "-c", script, path],
                logPath: directory.file("nobody.log"), pipes: [.standardInput, .standardOutput]
            )
            // On an early exit the child still ends: it stops at end of input (and is killed
            // when released).
            defer { nobody.closeStandardInput() }
            // The child holds its connections until we close its stdin. Ten local replies
            // take far less than the bound, however loaded the machine.
            let line = try await readLine(from: nobody.standardOutput, timeout: hangGuard * 2)
            #expect(line.trimmingCharacters(in: .whitespacesAndNewlines) == "4", "\(nobody.output)")
            // Root (this process) is served while nobody holds its share.
            let status = try await SyncControlClient(socketPath: path).status()
            #expect(!status.version.isEmpty)
            nobody.closeStandardInput()
            await nobody.waitForExit()
        }
    }
}
