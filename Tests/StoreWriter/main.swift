// store-writer: commits a synthetic feed page by page to an SQLite store, and can stop inside a
// chosen commit so that a test can kill it there (SIGKILL) and check what survived.
//
// usage: store-writer DB FEED PAGES [STOP_PAGE STOP_STAGE [KEEP_ITEMS]]
//   Page 0 is the first load; pages 1... are older pages. Before each commit it prints
//   "begin N"; after it, "committed N". With STOP_PAGE and STOP_STAGE (began, itemsWritten,
//   cursorsWritten), it prints "stopped N STAGE" inside that commit's transaction and waits to
//   be killed. KEEP_ITEMS opens the store with that retention.
import Foundation
import SyncCore
import SyncStore
import Synchronization

/// The synthetic feed, newest first: page K holds items i(5K)...i(5K+4); its older cursor is
/// "cK+1" (none on the last page). SyncStoreTests computes the same pages.
enum SyntheticFeed {
    static let pageSize = 5

    static func page(_ index: Int, of pages: Int) -> FeedPage {
        let items = (0..<pageSize).map { offset in
            let n = index * pageSize + offset
            return FeedItem(id: "i\(n)", payload: Data("{\"n\":\(n)}".utf8))
        }
        return FeedPage(items: items, olderCursor: index + 1 < pages ? "c\(index + 1)" : nil, newerCursor: index == 0 ? "i0" : nil)
    }

    /// The page an older cursor points to; `nil` at the end.
    static func pageIndex(after cursor: String?) -> Int? {
        cursor.flatMap { Int($0.dropFirst()) }
    }
}

let arguments = CommandLine.arguments
guard [4, 6, 7].contains(arguments.count), let pages = Int(arguments[3]) else {
    FileHandle.standardError.write(Data("usage: store-writer DB FEED PAGES [STOP_PAGE STOP_STAGE [KEEP_ITEMS]]\n".utf8))
    exit(2)
}
let path = arguments[1], feed = arguments[2]
let stopPage = arguments.count >= 6 ? Int(arguments[4]) : nil
let stopStage = arguments.count >= 6 ? SQLiteFeedStore.CommitStage(rawValue: arguments[5]) : nil
let retention = arguments.count == 7 ? Int(arguments[6]).map { [feed: SQLiteFeedStore.Retention(keepItems: $0)] } ?? [:] : [:]

@Sendable func say(_ line: String) {
    // Unbuffered, so the test sees the line before it kills us.
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

/// Which page is being committed, read by the hook inside the transaction.
final class PageCounter: Sendable {
    let value = Mutex(0)
}

let currentPage = PageCounter()

let store = try SQLiteFeedStore(path: path, commitHook: { [currentPage, stopPage, stopStage] stage in
    let page = currentPage.value.withLock { $0 }
    if page == stopPage, stage == stopStage {
        say("stopped \(page) \(stage.rawValue)")
        while true { sleep(60) }
    }
}, retention: retention)

let already = try store.loadSynchronously(feed: feed)
var next = already.hasLoaded ? SyntheticFeed.pageIndex(after: already.olderCursor) : 0
while let index = next, index < pages {
    currentPage.value.withLock { $0 = index }
    say("begin \(index)")
    _ = try store.commitSynchronously(feed: feed, direction: index == 0 ? .initial : .older,
                                      page: SyntheticFeed.page(index, of: pages), at: Date())
    say("committed \(index)")
    next = index + 1
}
say("done")
