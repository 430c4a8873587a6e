import SyncControl
/// `syncctl items`: id and summary per line, then how to get the next page.
public enum ItemsTable {
    /// The page as an ID/summary table fitted to the style's width, with the `--after` command for the next page.
    public static func render(_ page: ControlItemPage, feed: String, style: TerminalStyle) -> String {
        let page = page.terminalSafe
        let feed = feed.terminalSafe
        guard !page.items.isEmpty else { return style.paint("No items.", .dim) + "\n" }
        let idWidth = max(2, min(24, page.items.map(\.id.columns).max() ?? 2))
        var lines = [style.paint("ID".padded(to: idWidth) + "  SUMMARY", .bold)]
        for item in page.items {
            let id = item.id.fitted(to: idWidth).padded(to: idWidth)
            lines.append(id + "  " + item.summary.fitted(to: max(10, style.width - idWidth - 2)))
        }
        lines.append("")
        var footer = "\(page.items.count) item\(page.items.count == 1 ? "" : "s")."
        if let next = page.next {
            footer += " More: syncctl items \(feed) --after \(next)"
        }
        lines.append(style.paint(footer, .dim))
        return lines.joined(separator: "\n") + "\n"
    }
}
