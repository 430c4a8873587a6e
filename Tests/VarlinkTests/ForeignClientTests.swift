import Foundation
import TestSupport
import Testing

/// The reference Python implementation (PyPI `varlink`) talks to our server: it parses our
/// interface description to build its proxy, so this also validates the IDL's syntax.
/// Needs `pip install varlink`; skipped without it, except under CI, where it must run.
@Suite("Foreign Varlink client", .enabled(if: PythonVarlink.isInstalled || Privileges.isCI, "python3 module 'varlink' not installed (pip install varlink)"), .timeLimit(.minutes(3)))
struct ForeignClientTests {
    /// Runs `script` with every socket it opens under a 30 s timeout (the reference client sets
    /// none), so a server that stops answering fails the script instead of hanging it.
    static func python(_ script: String, _ arguments: [String]) async throws -> String {
        try await runCommand(["python3", "-c", "import socket; socket.setdefaulttimeout(30)\n" + script] + arguments)
    }

    @Test func referenceClientCallsEveryKindOfMethod() async throws {
        let script = """
            import sys, varlink
            with varlink.Client(address="unix:" + sys.argv[1]) as client, client.open("io.syncd", namespaced=True) as syncd:
                status = syncd.GetStatus().status
                print(status.version, status.connectivity.state, len(status.feeds))
                page = syncd.ListItems(feed="home", limit=2)
                print(",".join(item.id for item in page.items), page.next)
                print(",".join(syncd.Refresh(feed="home").feeds))
                try:
                    syncd.ListItems(feed="nope")
                except varlink.VarlinkError as error:
                    print(error.error())
                # Last: the reference client cannot make another call after leaving a stream early.
                for reply in syncd.Watch(_more=True):
                    print("watch", reply.status.feeds[0].name)
                    break
            """
        let output = try await withControlServer { path in try await Self.python(script, [path]) }
        #expect(output == "0.1.0 online 2\n5,4 4\nhome\nio.syncd.FeedNotFound\nwatch home\n")
    }

    /// The reference client leaving streams early, again and again, leaves no connection
    /// behind; its bad limits are refused naming `limit` (it rounds 1.5 to an int itself).
    @Test func referenceClientLeavesNoSlotsAndSeesNamedErrors() async throws {
        let script = """
            import sys, varlink
            for _ in range(20):
                with varlink.Client(address="unix:" + sys.argv[1]) as client, client.open("io.syncd", namespaced=True) as syncd:
                    for reply in syncd.Watch(_more=True):
                        break
            # namespaced=False: the reference client cannot build a namespaced InvalidParameter.
            with varlink.Client(address="unix:" + sys.argv[1]) as client, client.open("io.syncd", namespaced=False) as syncd:
                for bad in [1e300, 2**63, -3, 0, 501]:
                    try:
                        syncd.ListItems(feed="home", limit=bad)
                        print("accepted", bad)
                    except varlink.VarlinkError as error:
                        print(error.error(), error.parameters()["parameter"])
            """
        try await withControlServer { path, server in
            let output = try await Self.python(script, [path])
            #expect(output == String(repeating: "org.varlink.service.InvalidParameter limit\n", count: 5))
            try await ConnectionSlotTests.slotsDrain(server, after: "the reference client's calls")
        }
    }

    @Test func referenceParserAcceptsTheInterfaceFile() async throws {
        let script = """
            import sys, varlink.scanner
            interface = varlink.scanner.Interface(open(sys.argv[1]).read())
            print(interface.name, len([m for m in interface.members.values() if isinstance(m, varlink.scanner._Method)]))
            """
        let output = try await Self.python(script, [InterfaceDefinitionTests.resourcePath])
        #expect(output == "io.syncd 9\n")
    }
}

enum PythonVarlink {
    static var isInstalled: Bool {
        (try? runCommand(["python3", "-c", "import varlink"])) != nil
    }
}
