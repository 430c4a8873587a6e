/// The `io.syncd` Varlink interface definition.
///
/// The text is compiled in rather than read from the bundled `io.syncd.varlink` resource so an
/// installed `syncd` binary works without its resource bundle next to it; a test keeps the two
/// identical.
public enum SyncdInterface {
    /// The interface name, the prefix of every method (`io.syncd.GetStatus`).
    public static let name = "io.syncd"

    /// The version of syncd and syncctl, one number for both (they ship together).
    public static let version = "0.1.0"

    /// The interface definition (IDL) that `org.varlink.service.GetInterfaceDescription` returns.
    public static let description = """
    # Control interface of syncd, the connectivity-aware feed sync agent.
    #
    # Read-only methods (GetStatus, Watch, ListItems, GetMetrics) are open to every
    # local user.
    # Refresh, LoadOlder, Retry and MarkSeen change state and are allowed only for
    # root and members of the configured control group; others get
    # org.varlink.service.PermissionDenied. Times are RFC 3339 strings in UTC.
    interface io.syncd

    # Why a feed's host is unreachable. Offline (no usable path): no_carrier,
    # no_address, no_route, blocked (a reject route or policy rule). Limited (a
    # path, but no answer above it): dns_failed, portal, server_unreachable.
    type OfflineReason (no_carrier, no_address, no_route, blocked, dns_failed, portal, server_unreachable, unknown)

    # Shown while feeds cannot reach their hosts.
    type OfflineBanner (
      # The worst reason among the feeds it applies to.
      reason: OfflineReason,
      # When the first of them lost its host.
      since: string,
      # A sentence for the user.
      message: string,
      # The feeds it applies to, when not every feed.
      feeds: ?[]string,
      # Limited: the evidence (the portal's URL, the name that did not resolve,
      # the server and its failure).
      detail: ?string
    )

    # What traffic over a link costs, who said so (the configuration, NetworkManager,
    # a DHCP lease, a guess from the link type), and the evidence.
    type LinkCost (
      cost: (metered, unmetered, unknown),
      source: (configuration, networkmanager, dhcp_lease, link_type, none),
      detail: ?string
    )

    # One host's reachability, a ladder. Online: the link and family of the
    # route that reaches it. Limited: routed (link and family), but the name does
    # not resolve, a portal intercepts or the server does not answer: the reason
    # and the evidence in detail. Offline: the reason. Each since when.
    type Connectivity (
      state: (online, limited, offline),
      link: ?string,
      family: ?(ipv4, ipv6),
      reason: ?OfflineReason,
      detail: ?string,
      since: ?string,
      # Online: what traffic over the link costs, when something says.
      cost: ?LinkCost
    )

    # The feed hosts' reachability summed over the feeds: online when every feed
    # reaches its host, partial when some do, limited when none does and some are
    # limited, offline when none is even routed.
    type Summary (
      state: (online, partial, limited, offline, unknown),
      # Feeds in all, how many cannot reach their host, and how many of those
      # are limited.
      feeds: int,
      offline: int,
      limited: int,
      # Why, for those: each reason once, the furthest from reachable first.
      reasons: []OfflineReason,
      # The one link every reachable feed leaves through, when there is one.
      link: ?string,
      # Online: since the last feed came online; otherwise since the first went offline.
      since: ?string
    )

    # Why a direction that would load waits while its host is reachable: the link
    # is metered and the feed's on_metered policy waits it out, or the feed's
    # metered budget for today is used (bytes used, and the budget).
    type Hold (
      reason: (metered_link, metered_budget),
      used: ?int,
      budget: ?int
    )

    # One load direction of a feed: the first load, older pages or newer items.
    type Direction (
      phase: (idle, loading, failed, loaded),
      # Waiting for connectivity; a paused load spends no retry budget.
      paused: bool,
      # Failed: what went wrong, how many attempts so far, when the next one is due.
      error: ?string,
      attempt: ?int,
      nextRetryAt: ?string,
      # Reachable, but held back by what the link costs; loads when that lifts.
      held: ?Hold
    )

    # Bytes a feed received over metered links on a day (YYYY-MM-DD, local time),
    # against its metered_budget.
    type MeteredUsage (
      day: string,
      bytes: int,
      budget: int
    )

    # One row of the content list.
    type Row (
      id: string,
      summary: string
    )

    # The footer below the content: loading older, a failed load with a retry hint, or the end.
    type OlderFooter (
      kind: (spinner, error, end),
      message: ?string
    )

    # A transient notice above the content: new items arrived, or loading newer failed.
    type NewerNotice (
      kind: (new_items, error),
      message: string,
      count: ?int
    )

    # What a client shows for a feed: exactly one main view plus overlays.
    type Presentation (
      main: (skeleton, content, empty, error),
      # Skeleton: how many placeholder rows to draw.
      skeletonRows: ?int,
      # Content: the newest rows.
      rows: ?[]Row,
      # Error: why the first load failed.
      errorMessage: ?string,
      offlineBanner: ?OfflineBanner,
      olderFooter: ?OlderFooter,
      newerNotice: ?NewerNotice
    )

    type Feed (
      name: string,
      # Where the feed comes from, e.g. its URL.
      source: ?string,
      initial: Direction,
      older: Direction,
      newer: Direction,
      # The oldest page has been reached.
      endReached: bool,
      # Loaded, and the feed has no items.
      empty: bool,
      itemCount: int,
      lastSync: ?string,
      # The earliest scheduled retry of any direction.
      nextRetryAt: ?string,
      # Whether the feed's host is reachable, from its own verdict; absent until known.
      connectivity: ?Connectivity,
      presentation: Presentation,
      # Seconds without a stored page after which the feed is stale (stale_after),
      # when configured.
      staleAfter: ?int,
      # Today's bytes over metered links, when the feed has a metered_budget.
      meteredUsage: ?MeteredUsage
    )

    # Why the store refuses what syncd writes, while it does: the condition, the
    # store's path, and in words what to do.
    type StoreProblem (
      kind: (read_only_filesystem, permission_denied, no_directory, disk_full, not_a_database, damaged, replaced, io_error, other),
      path: string,
      message: string
    )

    type Status (
      version: string,
      # The feed hosts' reachability, summed over the feeds.
      connectivity: Summary,
      # The internet at large (a route to a public address), for information only:
      # each feed follows its own host.
      internet: ?Connectivity,
      # Present while any feed cannot reach its host.
      banner: ?OfflineBanner,
      feeds: []Feed,
      # When syncd started.
      started: ?string,
      # Present while the store's last write failed.
      store: ?StoreProblem
    )

    # A stored item: its id, a one-line summary and the JSON object the server sent.
    type Item (
      id: string,
      summary: string,
      payload: object
    )

    # The current status.
    method GetStatus() -> (status: Status)

    # The current status, then a new one whenever anything changes. Needs 'more';
    # 'oneway' together with 'more' is refused (InvalidParameter oneway) and the
    # connection is closed.
    method Watch() -> (status: Status)

    # The metrics, as Prometheus's text format: the same as the HTTP endpoint and
    # the textfile serve.
    method GetMetrics() -> (text: string)

    # Loads newer items of one feed, or of every feed when feed is omitted.
    method Refresh(feed: ?string) -> (feeds: []string)

    # Loads the next older page. feeds: the feeds now loading older items (empty
    # when none could start). A named feed that cannot load (first load not done,
    # end of feed reached, offline) gets NotReady with the reason instead.
    method LoadOlder(feed: ?string) -> (feeds: []string)

    # Retries failed loads now, without waiting for the backoff.
    method Retry(feed: ?string) -> (feeds: []string)

    # Marks the newest items seen: the feed's new_items notice (the count of items
    # refreshes brought in since) starts again at zero. feeds: the feeds marked.
    method MarkSeen(feed: ?string) -> (feeds: []string)

    # Stored items, newest first. after: the id of the last item of the previous page.
    # next is set when more items follow. limit: 1 to 500, default 50; anything
    # else (0, -3, 1.5, 1e300) is InvalidParameter limit.
    method ListItems(feed: string, limit: ?int, after: ?string) -> (items: []Item, next: ?string)

    # The changes of a feed's stored items after since (a point a reply gave,
    # EPOCH:SEQ; omitted: the feed from the start), then each change as it is
    # committed; call with more. kind: inserted, updated (apply both as an upsert),
    # deleted, evicted (retention dropped it), or reset (forget the feed's items:
    # since was of another store, ahead of it, or older than the removals it
    # keeps; the replies that follow rebuild the feed). point: pass as since to
    # continue after this reply. payload: the item as stored, for inserted and
    # updated.
    method WatchItems(feed: string, since: ?string) -> (kind: string, point: string, id: ?string, payload: ?object)

    error FeedNotFound (feed: string)

    # The cursor passed as after is not an item of the feed.
    error InvalidCursor (after: string)

    # The feed cannot do that now, e.g. load older before its first load succeeded.
    error NotReady (feed: string, reason: string)

    error InternalError (message: string)

    # A client queued calls behind a running stream (they would never run) beyond
    # the bounds: per connection max_calls calls or max_bytes bytes, or its user's
    # share. The connection closes after this reply.
    error TooManyCalls (max_calls: int, max_bytes: int)
    """
}
