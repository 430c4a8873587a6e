import GRDB
import SyncCore

extension SQLiteFeedStore {
    /// Gives a commit's new items positions between the stored ones and writes them.
    ///
    /// Positions only order a feed (larger is newer) and need not be consecutive: items placed
    /// between two stored ones take free positions between them, and where there are none, the
    /// items above are moved up to make room (rare: pages that open a gap leave room for it).
    struct Placement {
        let db: Database
        let feed: String
        /// When the items are stored, in Unix seconds, for retention by age.
        let storedAt: Double
        /// The change log's numbers, one per item written.
        var numbers: ChangeNumbers
        /// The feed's highest position before this commit, once a top placement has read it.
        private(set) var topBefore: Int?

        /// Positions left free below a page that opens a gap, for the gap's pages.
        static let gapRoom = 1 << 32

        init(db: Database, feed: String, storedAt: Double, numbers: ChangeNumbers) {
            self.db = db
            self.feed = feed
            self.storedAt = storedAt
            self.numbers = numbers
        }

        /// Where a run of new items (newest first) goes.
        enum Region {
            /// Just below the stored item at this position (above whatever is stored next below it).
            case below(Int)
            /// Just above the stored item at this position.
            case above(Int)
            /// Below everything stored.
            case bottom
            /// Above everything stored; with `room`, far enough above to leave room for a gap.
            case top(room: Bool)
        }

        /// Items above this position moved up by this much to make room.
        struct Shift {
            var from: Int
            var by: Int
        }

        mutating func place(_ items: [FeedItem], in region: Region) throws -> (inserted: Int, shift: Shift?) {
            let count = items.count
            var shift: Shift?
            // The first (newest) item's position; the rest follow one below the other.
            let first: Int
            switch region {
            case .bottom:
                let low = try Int.fetchOne(db.cachedStatement(sql: "SELECT MIN(position) FROM item WHERE feed = ?"), arguments: [feed])
                first = low.map { $0 - 1 } ?? 0
            case .top(let room):
                let high = try Int.fetchOne(db.cachedStatement(sql: "SELECT MAX(position) FROM item WHERE feed = ?"), arguments: [feed])
                topBefore = high
                first = high.map { $0 + count + (room ? Self.gapRoom : 0) } ?? 0
            case .below(let upper):
                // The stored neighbour, not the page's next stored item: the store may hold items
                // between them that this page does not show.
                (first, shift) = try room(for: count, above: try neighbour(below: upper), below: upper)
            case .above(let lower):
                if let upper = try neighbour(above: lower) {
                    (first, shift) = try room(for: count, above: lower, below: upper)
                } else {
                    first = lower + count
                }
            }
            var inserted = 0
            var index = 0
            // Whole groups through the many-row statement, the rest one by one.
            for (sql, rows) in [(SQLiteFeedStore.insertManySQL, SQLiteFeedStore.rowsPerInsert), (SQLiteFeedStore.insertOneSQL, 1)]
            where count - index >= rows {
                let insert = try RawStatement(db, sql: sql)
                // A reset keeps the bindings: the feed and the time are bound once per run.
                let columns = Int32(SQLiteFeedStore.columnsPerRow)
                for row in 0..<Int32(rows) {
                    try insert.bind(row * columns + 1, feed)
                    try insert.bind(row * columns + 5, storedAt)
                }
                while count - index >= rows {
                    defer { insert.reset() }
                    // A number per row tried; one the conflict skips leaves a gap, which the log allows.
                    let seq = numbers.take(rows)
                    for row in 0..<rows {
                        let item = items[index + row], base = Int32(row) * columns
                        try insert.bind(base + 2, item.id)
                        try insert.bind(base + 3, first - index - row)
                        try insert.bind(base + 4, text: item.payload)
                        try insert.bind(base + 6, item.version)
                        try insert.bind(base + 7, Int(seq) + row)
                    }
                    _ = try insert.step()
                    inserted += db.changesCount
                    index += rows
                }
            }
            return (inserted, shift)
        }

        /// The newest position for `count` items strictly between `lower` (unbounded when `nil`)
        /// and `upper`, packed just below `upper`; moves `upper` and everything above it up when
        /// there is not enough room.
        private func room(for count: Int, above lower: Int?, below upper: Int) throws -> (Int, Shift?) {
            guard let lower, upper - lower - 1 < count else { return (upper - 1, nil) }
            let shift = Shift(from: upper, by: count + 1024)
            try db.cachedStatement(sql: "UPDATE item SET position = position + ? WHERE feed = ? AND position >= ?")
                .execute(arguments: [shift.by, feed, shift.from])
            return (upper + shift.by - 1, shift)
        }

        private func neighbour(below position: Int) throws -> Int? {
            try Int.fetchOne(db.cachedStatement(sql: "SELECT MAX(position) FROM item WHERE feed = ? AND position < ?"), arguments: [feed, position])
        }

        private func neighbour(above position: Int) throws -> Int? {
            try Int.fetchOne(db.cachedStatement(sql: "SELECT MIN(position) FROM item WHERE feed = ? AND position > ?"), arguments: [feed, position])
        }
    }
}
