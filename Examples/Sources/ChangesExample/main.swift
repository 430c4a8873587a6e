import Foundation
import SyncCore
import SyncStore

let store = try SQLiteFeedStore(path: "/var/lib/myapp/feeds.sqlite")
var shown: [String: Data] = [:]                  // id → payload, as the store holds them
var point = CommandLine.arguments.dropFirst().first.flatMap(ChangePoint.init)   // nil: from the start
for try await change in store.changes(feed: "home", since: point) {
    switch change.kind {
    case .reset: shown = [:]                      // another store, or too far behind: start again
    case .inserted, .updated: shown[change.id!] = change.payload
    case .deleted, .evicted: shown[change.id!] = nil
    }
    point = change.point                          // keep it with what it describes
    print("\(change.kind) \(change.id ?? "") → \(shown.count) items; resume with \(change.point)")
}
