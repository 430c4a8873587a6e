import SyncControl
/// The wire types with every string passed through ``TerminalText/sanitize(_:)``.
///
/// Renderers call these once on their input instead of remembering each field that may carry
/// text from a feed (ids, summaries, error messages from a server, URLs, link names).
extension ControlStatus {
    /// This status with all text safe to print on a terminal.
    public var terminalSafe: ControlStatus {
        var copy = self
        copy.version = version.terminalSafe
        copy.connectivity.link = connectivity.link?.terminalSafe
        copy.internet = internet?.terminalSafe
        copy.banner = banner?.terminalSafe
        copy.feeds = feeds.map(\.terminalSafe)
        copy.store?.path = store?.path.terminalSafe ?? ""
        copy.store?.message = store?.message.terminalSafe ?? ""
        return copy
    }
}

extension ControlConnectivity {
    var terminalSafe: ControlConnectivity {
        switch self {
        case .online(let link, let family, let since, let cost):
            .online(link: link.terminalSafe, family: family, since: since, cost: cost.map { cost in
                var safe = cost
                safe.detail = cost.detail?.terminalSafe
                return safe
            })
        case .limited(let reason, let detail, let link, let family, let since):
            .limited(reason: reason, detail: detail.terminalSafe, link: link?.terminalSafe, family: family, since: since)
        case .offline: self
        }
    }
}

extension ControlOfflineBanner {
    var terminalSafe: ControlOfflineBanner {
        var copy = self
        copy.message = message.terminalSafe
        copy.detail = detail?.terminalSafe
        copy.feeds = feeds?.map(\.terminalSafe)
        return copy
    }
}

extension ControlDirection {
    var terminalSafe: ControlDirection {
        var copy = self
        copy.error = error?.terminalSafe
        return copy
    }
}

extension ControlFeed {
    /// This feed with all text safe to print on a terminal.
    public var terminalSafe: ControlFeed {
        var copy = self
        copy.name = name.terminalSafe
        copy.source = source?.terminalSafe
        copy.initial = initial.terminalSafe
        copy.older = older.terminalSafe
        copy.newer = newer.terminalSafe
        copy.connectivity = connectivity?.terminalSafe
        copy.presentation = presentation.terminalSafe
        return copy
    }
}

extension ControlPresentation {
    var terminalSafe: ControlPresentation {
        var copy = self
        switch main {
        case .content(let rows): copy.main = .content(rows.map { ControlRow(id: $0.id.terminalSafe, summary: $0.summary.terminalSafe) })
        case .error(let message): copy.main = .error(message.terminalSafe)
        case .skeleton, .empty: break
        }
        copy.offlineBanner = offlineBanner?.terminalSafe
        if case .error(let message)? = olderFooter { copy.olderFooter = .error(message.terminalSafe) }
        if case .error(let message)? = newerNotice { copy.newerNotice = .error(message.terminalSafe) }
        return copy
    }
}

extension ControlItemPage {
    /// This page with ids and summaries safe to print on a terminal (payloads are not printed).
    public var terminalSafe: ControlItemPage {
        var copy = self
        copy.items = items.map { item in
            var item = item
            item.id = item.id.terminalSafe
            item.summary = item.summary.terminalSafe
            return item
        }
        copy.next = next?.terminalSafe
        return copy
    }
}
