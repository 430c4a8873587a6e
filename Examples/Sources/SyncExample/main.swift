import ConnectivityPolicy
import Foundation
import HTTPFeedSource
import NetlinkMonitor
import SyncCore
import SyncCoordinator
import SyncStore

let monitor = NetlinkMonitor()
try await monitor.start()
let store = try SQLiteFeedStore(path: "/var/lib/myapp/feeds.sqlite")
let coordinator = SyncCoordinator(store: store, configuration: .init(backfillDepth: 500))
let client = HTTPFeedClient()
let url = URL(string: "https://mastodon.example/api/v1/timelines/public")!
let source = try HTTPFeedSource(configuration: .init(url: url), client: client)
let feed = try await coordinator.addFeed("public", source: source,
                                         verdicts: ConnectivityMonitor.verdicts(from: monitor, for: .internet))
try await coordinator.start()
Task {
    for await items in await feed.itemUpdates(limit: 20) {
        print(items.map(\.id))   // the newest 20, again whenever a page lands
    }
}
for await state in await coordinator.updates() {
    let view = Presentation(state: state)   // one main view + overlays, for any UI
    print(view.main)
}
await coordinator.stop()
try await client.shutdown()
await monitor.stop()
