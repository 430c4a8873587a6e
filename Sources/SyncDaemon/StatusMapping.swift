import ConnectivityPolicy
import Foundation
import SyncControl
import SyncCore
import SyncStore

/// Maps the coordinator's state onto the control interface's wire types.
enum StatusMapping {
    static func direction(_ state: DirectionState) -> ControlDirection {
        let held = state.held.map(hold)
        switch state.load {
        case .idle:
            return ControlDirection(phase: .idle, paused: state.paused, held: held)
        case .loading:
            return ControlDirection(phase: .loading, paused: state.paused, held: held)
        case .loaded:
            return ControlDirection(phase: .loaded, paused: state.paused, held: held)
        case .failed(let failure):
            return ControlDirection(
                phase: .failed, paused: state.paused, error: failure.error.message, attempt: failure.attempt,
                nextRetryAt: failure.nextRetryAt, held: held)
        }
    }

    static func hold(_ hold: LoadHold) -> ControlHold {
        switch hold {
        case .meteredLink: ControlHold(reason: .meteredLink)
        case .meteredBudget(let used, let budget): ControlHold(reason: .meteredBudget, used: used, budget: budget)
        }
    }

    static func banner(_ banner: OfflineBanner?) -> ControlOfflineBanner? {
        guard let banner else { return nil }
        if banner.isLimited {
            // The message says what the user can do: sign in, check the name, ask the server.
            return ControlOfflineBanner(reason: ControlOfflineReason(banner.problem), since: banner.since, detail: banner.detail)
        }
        return ControlOfflineBanner(reason: ControlOfflineReason(banner.problem), since: banner.since, message: banner.reason)
    }

    static func presentation(_ state: FeedState, rows: [ControlRow], skeletonRows: Int) -> ControlPresentation {
        let p = Presentation(state: state, skeletonRows: skeletonRows)
        let main: ControlPresentation.Main
        switch p.main {
        case .skeleton(let count): main = .skeleton(rows: count)
        case .content: main = .content(rows)
        case .empty: main = .empty
        case .error(let view): main = .error(view.message)
        }
        let footer: ControlOlderFooter?
        switch p.olderFooter {
        case .spinner: footer = .spinner
        case .error(let message, _): footer = .error(message)
        case .end: footer = .end
        case .paused, nil: footer = nil
        }
        // A failed refresh outranks the count of the one before it.
        let notice: ControlNewerNotice? = p.newerNotice.map { .error($0.message) }
            ?? (p.newItems > 0 ? .newItems(count: p.newItems) : nil)
        return ControlPresentation(main: main, offlineBanner: banner(p.offlineBanner), olderFooter: footer, newerNotice: notice)
    }

    static func feed(
        _ state: FeedState, source: String?, rows: [ControlRow], staleAfter: Duration? = nil, budget: MeteredBudget? = nil,
        skeletonRows: Int = Presentation.defaultSkeletonRows
    ) -> ControlFeed {
        ControlFeed(
            name: state.feed,
            source: source,
            initial: direction(state.initial),
            older: direction(state.older),
            newer: direction(state.newer),
            endReached: state.endReached,
            empty: state.isEmpty,
            itemCount: state.itemCount,
            lastSync: state.lastSyncAt,
            nextRetryAt: state.nextRetryAt,
            connectivity: connectivity(state.connectivity),
            presentation: presentation(state, rows: rows, skeletonRows: skeletonRows),
            staleAfter: staleAfter.map { Int($0.components.seconds) },
            meteredUsage: state.meteredUsage.flatMap { usage in
                budget.map { ControlMeteredUsage(day: usage.day, bytes: usage.bytes, budget: $0.bytesPerDay) }
            }
        )
    }

    /// A feed's own connectivity on the wire.
    static func connectivity(_ connectivity: FeedConnectivity?) -> ControlConnectivity? {
        guard let connectivity else { return nil }
        switch connectivity.status {
        case .online(let link, let family, let cost):
            return .online(
                link: link ?? "?", family: family.flatMap(AddressFamily.init(rawValue:)) ?? .ipv4, since: connectivity.since,
                cost: cost.known
            )
        case .offline(let reason):
            return .offline(reason: ControlOfflineReason(reason), since: connectivity.since)
        case .limited(let reason, let detail, let link, let family):
            return .limited(
                reason: ControlOfflineReason(reason), detail: detail, link: link,
                family: family.flatMap(AddressFamily.init(rawValue:)), since: connectivity.since
            )
        }
    }

    /// The systemd STATUS= line: what the daemon is doing, in a few words.
    static func statusLine(feeds: [FeedState], connectivity: ControlConnectivitySummary, store: StoreFault? = nil) -> String {
        let count = "\(feeds.count) feed\(feeds.count == 1 ? "" : "s")"
        let failing = feeds.filter { state in Direction.allCases.contains { state[$0].load.failure != nil } }.map(\.feed)
        let items = feeds.map(\.itemCount).reduce(0, +)
        var line = "\(count), \(items) items, \(connectivity)"
        // What stops every feed comes first: systemctl status cuts the line.
        if let store { line = "store \(store.kind.rawValue) (\(store.path)); " + line }
        if !failing.isEmpty { line += "; retrying \(failing.joined(separator: ", "))" }
        return line
    }

    /// A store's fault on the wire.
    static func storeProblem(_ fault: StoreFault) -> ControlStoreProblem {
        let kind: ControlStoreProblem.Kind = switch fault.kind {
        case .readOnlyFilesystem: .readOnlyFilesystem
        case .permissionDenied: .permissionDenied
        case .noDirectory: .noDirectory
        case .diskFull: .diskFull
        case .notADatabase: .notADatabase
        case .damaged: .damaged
        case .replaced: .replaced
        case .ioError: .ioError
        case .other: .other
        }
        return ControlStoreProblem(kind: kind, path: fault.path, message: fault.description)
    }
}
