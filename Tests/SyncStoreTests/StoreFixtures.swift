import Foundation
import SyncCore
import SyncStore
import Testing
import TestSupport

/// A new SQLite store and the reference model (``FeedLog``) beside it, given the same pages of
/// feed `"f"`: the frame of the randomized tests that hold the store to the model. The store's
/// file lives in a temporary directory removed when the value is released.
struct StoreAndReference {
    let directory: TemporaryDirectory
    let store: SQLiteFeedStore
    private(set) var reference = FeedLog()

    /// An empty store, at `feeds.sqlite` in a new temporary directory, and an empty reference.
    init() throws {
        directory = try TemporaryDirectory()
        store = try SQLiteFeedStore(path: directory.file("feeds.sqlite"))
    }

    /// Commits `page` in `direction` to feed `"f"` of both and expects the store's outcome to
    /// equal the reference's, saying `comment` if not; returns both outcomes.
    @discardableResult
    mutating func commit(
        _ page: FeedPage, _ direction: Direction, at date: Date, _ comment: Comment,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> (actual: CommitOutcome, expected: CommitOutcome) {
        let expected = reference.commit(page, direction: direction, at: date)
        let actual = try await store.commit(feed: "f", direction: direction, page: page, at: date)
        #expect(actual == expected, comment, sourceLocation: sourceLocation)
        return (actual, expected)
    }
}

/// Opens a store at `path` (a new file), commits `commits` to its feed `feed` in order, each page
/// in its direction, and closes it; then returns a store opened anew on that file: what a restart
/// of syncd finds.
func storeReopened(
    at path: String, feed: String, at date: Date, after commits: [(Direction, FeedPage)]
) async throws -> SQLiteFeedStore {
    do {
        let store = try SQLiteFeedStore(path: path)
        for (direction, page) in commits {
            _ = try await store.commit(feed: feed, direction: direction, page: page, at: date)
        }
    }
    return try SQLiteFeedStore(path: path)
}
