import AsyncBroadcast
import Foundation
import SyncControl
import Testing
import Varlink

@Suite("SyncControlClient", .timeLimit(.minutes(3)))
struct ControlClientTests {
    @Test func statusRoundTripsEveryField() async throws {
        let expected = Samples.status(online: false)
        try await withControlServer(handler: FakeHandler(status: expected)) { path in
            let status = try await SyncControlClient(socketPath: path).status()
            #expect(status == expected)
        }
    }

    @Test func mutationsReportTheFeeds() async throws {
        let handler = FakeHandler()
        try await withControlServer(handler: handler) { path in
            let client = SyncControlClient(socketPath: path)
            let refreshed = try await client.refresh()
            let older = try await client.loadOlder(feed: "home")
            let retried = try await client.retry(feed: "work")
            #expect(refreshed == ["home", "work"])
            #expect(older == ["home"])
            #expect(retried == ["work"])
            await #expect(throws: SyncControlError.feedNotFound("nope")) { try await client.refresh(feed: "nope") }
        }
        #expect(handler.recordedCalls == ["refresh *", "older home", "retry work"])
    }

    @Test func itemsPageThroughWithNext() async throws {
        try await withControlServer { path in
            let client = SyncControlClient(socketPath: path)
            var ids: [String] = []
            var after: String?
            repeat {
                let page = try await client.items(feed: "home", limit: 2, after: after)
                ids += page.items.map(\.id)
                after = page.next
            } while after != nil
            #expect(ids == ["5", "4", "3", "2", "1"])
        }
    }

    @Test func watchYieldsCurrentThenChanges() async throws {
        let handler = FakeHandler()
        try await withControlServer(handler: handler) { path in
            var versions: [Bool] = []
            for try await status in SyncControlClient(socketPath: path).watch() {
                versions.append(status.connectivity.isOnline)
                if versions.count == 1 { handler.broadcaster.publish(Samples.status(online: false)) }
                if versions.count == 2 { break }
            }
            #expect(versions == [true, false])
        }
    }

    @Test func unreachableDaemonSaysSo() async throws {
        let directory = try makeSocketDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/io.syncd"
        await #expect(throws: SyncControlError.unreachable(socket: path, reason: "No such file or directory")) {
            try await SyncControlClient(socketPath: path).status()
        }
        let error = SyncControlError.unreachable(socket: path, reason: "No such file or directory")
        #expect(error.description == "syncd is not running (cannot connect to \(path): No such file or directory)")
    }

    @Test func socketPathComesFromTheEnvironment() {
        #expect(SyncControlClient.socketPath(environment: [:]) == "/run/syncd/io.syncd")
        #expect(SyncControlClient.socketPath(environment: ["SYNCD_SOCKET": "/tmp/x"]) == "/tmp/x")
    }

    @Test func broadcasterSkipsDuplicatesAndKeepsOnlyTheNewest() async {
        let broadcaster = Broadcast<ControlStatus>(bufferingNewest: 1, latest: Samples.status())
        let stream = broadcaster.subscribe()
        #expect(!broadcaster.publishIfChanged(Samples.status()))  // equal: not sent
        #expect(broadcaster.publishIfChanged(Samples.status(online: false)))
        var iterator = stream.makeAsyncIterator()
        // bufferingNewest(1): the initial value was replaced by the newest before anyone read.
        let first = await iterator.next()
        #expect(first?.connectivity.isOnline == false)
        broadcaster.finish()
        #expect(await iterator.next() == nil)
    }

    @Test func itemSummariesAreOneCleanLine() throws {
        let item = ControlItem(.init(id: "7", payload: Data(#"{"id":"7","content":"<p>Hello &amp; <b>welcome</b>\n to   syncd</p>"}"#.utf8)))
        #expect(item.summary == "Hello & welcome to syncd")
        let odd = ControlItem(.init(id: "8", payload: Data("not json".utf8)))
        #expect(odd.summary == "8")
        #expect(odd.payload == ["raw": "not json"])
    }
}
