# One list of items served in the styles of many public APIs, for syncd's tests: the same
# mutable list as Bluesky, Slack, Stripe, Notion, Jira, JSON:API, HAL, JSON Feed, Atom, RSS and
# plainer shapes (offset, page numbers, a cursor header, opaque cursors, an ascending list), each
# with its own envelope, id spelling, cursor and order, as those APIs document them. Written
# independently of syncd's own code (it shares none), so that what a test mirrors from one
# dialect can be compared with /admin/ids, the server's own truth.
#
# Usage: dialects.py PORT ITEMS
# PORT 0 takes a free port; once listening it prints {"port": N} and serves on 127.0.0.1.
#
# The data: items n = 1..ITEMS, larger is newer, created at 1_700_000_000 + 60 n seconds, text
# "item n". /admin/add puts new items at the top. Nothing is ever edited or deleted, so every
# document below is a function of (n, the newest n) and ids are stable.
#
# Paging: page sizes default to 20 and are clamped to 1..100 (the real APIs' defaults differ),
# except JSON:API's page[size], which the cursor-pagination profile says MUST fail above the
# maximum (100). Dialects, newest first unless said otherwise:
#   bluesky    GET /xrpc/app.bsky.feed.getAuthorFeed?actor=alice.test&limit=&cursor=
#              id /post/uri; cursor opaque, omitted on the last page; nothing asks for newer.
#   slack      GET /api/conversations.history?channel=C123&limit=&cursor=&oldest=&latest=&inclusive=
#              id /ts; next_cursor base64("next_ts:<ts digits>") as Slack's, "" on the last page;
#              oldest/latest bound the range, newest first from latest (oldest=X: the NEWEST page above X).
#   stripe     GET /v1/charges?limit=&starting_after=&ending_before=     id /id (ch_0000000007)
#              ending_before=X: the items just newer than X (adjacent), still newest first.
#   notion     GET /v1/blocks/<any block id>/children?page_size=&start_cursor=   id /id (a uuid)
#              Notion's envelope; next_cursor is the id of the next page's first block (start_cursor
#              is inclusive, as Notion's). LIBERTY: Notion lists children oldest first; this serves them
#              newest first, since the newest-first cursor walk is what is being tested.
#   jira       GET /rest/api/3/search/jql?jql=...ORDER BY created DESC&maxResults=&nextPageToken=&fields=
#              id /id ("10007"); "ORDER BY created ASC" (or key/id ASC) lists oldest first. As the
#              enhanced search does, only ids are returned unless `fields` names some (summary,
#              created, updated, *all, *navigable). LIBERTY: real Jira rejects unbounded JQL.
#   jsonapi    GET /jsonapi/articles?page[size]=&page[after]=&page[before]=   id /id ("7")
#              The cursor-pagination profile: cursors are ids, and any integer >= 0 is a valid cursor
#              position (0 is below the oldest); page[after] = older, page[before] = the items
#              immediately newer (adjacent), both together = a range (meta.page.rangeTruncated).
#              links.prev/next are null exactly when nothing is newer/older than the page (so the
#              head page's prev is null, as the profile requires when page[after] is absent).
#   hal        GET /hal/items?page=&size=        Spring Data REST, page 0-based; id /id (integer)
#              next absent on the last page; first/last only when there is more than one page (as
#              Spring HATEOAS); LIBERTY: Spring Data REST hides ids unless configured to expose them.
#   jsonfeed   GET /feed.json?page=              JSON Feed 1.1, 20 a page, next_url; id /id (a URL)
#   offset     GET /offset/items?offset=&limit=  {"total","offset","limit","items"}; id /id ("7")
#   pages      GET /pages/items?page=&per_page=  1-based, a bare array, no Link; id /id (integer)
#   bareoffset GET /bareoffset/items?offset=&limit=   a bare array, no Link; id /id ("7")
#   headercursor GET /headercursor/items?limit=&cursor=   bare array, X-Next-Cursor; id /id ("7")
#   opaque     GET /opaque/items?limit=&cursor=  bare array, Link rel="next" with an opaque cursor;
#              it ignores min_id, since_id and max_id (asked for newer, it answers the head again).
#   ascending  GET /ascending/items?limit=&after=    OLDEST first, n > after, Link rel="next"; id "7"
#   atom       GET /atom/current.xml, /atom/archive/K.xml   RFC 4287 + RFC 5005 archived feed.
#              Archive K holds items 20K-19..20K, complete and fixed; an archive is made once the
#              items above the last one are more than 20, so current.xml holds the 1..20 newest
#              items above the last archive (never none while there are items) and links
#              prev-archive to it. id entry/id (tag:example.test,2026:item-7)
#   rss        GET /rss.xml?page=                RSS 2.0, 20 a page, atom:link rel="next"; id guid (item-7)
#
# Control (JSON answers; GET or POST):
#   /health -> ok;  /admin/add?count=K -> {"newest": n};  /admin/ids?dialect=NAME -> {"ids": [...]}
#   newest first (for "ascending" too: the truth is a set, ordered as everywhere else);
#   /admin/requests -> {"requests": [{"path", "query"}...]} every non-admin request received, in
#   order, the query as sent (still percent-encoded); /admin/requests/clear;
#   /admin/down -> every later request's connection is closed unanswered (recorded, though);
#   /admin/up; /admin/hold?count=K -> the next K requests wait until /admin/release, which also
#   cancels what is left of K, and are answered as of then (closed unanswered if the server is
#   down by then); /admin/held -> {"waiting": requests held now, "remaining": of K}.
import base64, calendar, email.utils, hashlib, json, os, re, sys, threading, time, uuid
from http.server import ThreadingHTTPServer, BaseHTTPRequestHandler
from urllib.parse import urlsplit, parse_qsl, urlencode
from xml.sax.saxutils import escape
import oracle_http

oracle_http.end_on_sigterm()

port_arg, initial = int(sys.argv[1]), int(sys.argv[2])
BASE = 1_700_000_000
DEFAULT_LIMIT, MAX_LIMIT, PER_DOCUMENT = 20, 100, 20
# A guard only: a test releases what it holds, or stops the server (which ends its threads).
HOLD_LIMIT = 600

lock = threading.Lock()
state = {"newest": initial, "down": False, "remaining": 0, "waiting": 0, "gate": threading.Event()}
received = []

def newest():
    with lock:
        return state["newest"]

# ---- Items: everything is derived from n ----

def created(n):
    return BASE + 60 * n

def iso_ms(t):
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + ".000Z"

def rfc3339(t):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))

def b64url(text):
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")

def unb64url(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)).decode()

# Bluesky: a record key is a TID, 13 characters of base32-sortable holding 53 bits of
# microseconds and 10 of clock id; a CID is CIDv1 dag-cbor sha2-256 in base32 ("bafyrei...").
SORTABLE = "234567abcdefghijklmnopqrstuvwxyz"

def tid(n):
    value = (created(n) * 1_000_000) << 10 | (n % 1024)
    return "".join(SORTABLE[(value >> (5 * (12 - i))) & 31] for i in range(13))

def cid(n):
    digest = hashlib.sha256(("item %d" % n).encode()).digest()
    return "b" + base64.b32encode(bytes([0x01, 0x71, 0x12, 0x20]) + digest).decode().lower().rstrip("=")

def slack_ts(n):
    return "%d.%06d" % (created(n), (n * 37) % 1_000_000)

def notion_id(n):
    return str(uuid.UUID(bytes=hashlib.sha256(b"block %d" % n).digest()[:16], version=4))

IDS = {
    "bluesky": lambda n: "at://did:plc:alice/app.bsky.feed.post/" + tid(n),
    "slack": slack_ts,
    "stripe": lambda n: "ch_%010d" % n,
    "notion": notion_id,
    "jira": lambda n: str(10000 + n),
    "jsonapi": str, "hal": str, "offset": str, "pages": str, "bareoffset": str,
    "headercursor": str, "opaque": str, "ascending": str,
    "jsonfeed": lambda n: "https://example.test/items/%d" % n,
    "atom": lambda n: "tag:example.test,2026:item-%d" % n,
    "rss": lambda n: "item-%d" % n,
}

class Reply(Exception):
    """An answer other than the normal one (an error), raised from deep in a dialect."""
    def __init__(self, status, body, content_type="application/json; charset=utf-8", headers=()):
        self.status, self.body, self.content_type, self.headers = status, body, content_type, list(headers)

def as_json(value):
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()

def number(query, name, default, low=1, high=MAX_LIMIT, error=None, status=400):
    """An integer parameter, clamped to low..high; `error(message)` builds the dialect's error."""
    raw = query.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise Reply(status, as_json(error("%s must be an integer" % name)) if error else as_json({"error": "bad %s" % name}))
    return max(low, min(high, value))

def older(top, start, limit):
    """Up to `limit` n below `start` (exclusive), newest first, none above `top`."""
    first = min(start - 1, top)
    return list(range(first, max(first - limit, 0), -1))

def adjacent_newer(top, start, limit):
    """The `limit` n just above `start`, newest first."""
    last = min(start + limit, top)
    return list(range(last, start, -1))

# ---- The dialects. Each takes (handler, path, query, top) and returns (body, content type, headers). ----

def bluesky(h, path, query, top):
    def error(message):
        return {"error": "InvalidRequest", "message": message}
    actor = query.get("actor")
    if not actor:
        raise Reply(400, as_json(error('Error: Params must have the property "actor"')))
    if actor not in ("alice.test", "did:plc:alice"):
        raise Reply(400, as_json(error("Profile not found")))
    limit = number(query, "limit", DEFAULT_LIMIT, error=error)
    start = top + 1
    if query.get("cursor"):
        try:
            stamp, post_cid = unb64url(query["cursor"]).split("::")
            n = (calendar.timegm(time.strptime(stamp, "%Y-%m-%dT%H:%M:%S.000Z")) - BASE) // 60
            assert cid(n) == post_cid
        except Exception:
            raise Reply(400, as_json(error("Malformed cursor")))
        start = n
    chosen = older(top, start, limit)
    author = {"did": "did:plc:alice", "handle": "alice.test", "displayName": "Alice", "labels": [],
              "createdAt": iso_ms(BASE)}
    feed = [{"post": {
        "uri": IDS["bluesky"](n), "cid": cid(n), "author": author,
        "record": {"$type": "app.bsky.feed.post", "text": "item %d" % n, "createdAt": iso_ms(created(n)), "langs": ["en"]},
        "replyCount": 0, "repostCount": 0, "likeCount": 0, "quoteCount": 0,
        "indexedAt": iso_ms(created(n)), "labels": []}} for n in chosen]
    body = {"feed": feed}
    if chosen and chosen[-1] > 1:
        body["cursor"] = b64url("%s::%s" % (iso_ms(created(chosen[-1])), cid(chosen[-1])))
    return as_json(body), None, []

def micros(ts):
    """A Slack timestamp ("1700000060.000037", "1700000060") as integer microseconds."""
    match = re.fullmatch(r"(\d+)(?:\.(\d*))?", ts)
    if not match:
        raise ValueError(ts)
    return int(match.group(1)) * 1_000_000 + int(((match.group(2) or "") + "000000")[:6])

def slack(h, path, query, top):
    if query.get("channel") != "C123":
        raise Reply(200, as_json({"ok": False, "error": "channel_not_found"}))
    limit = number(query, "limit", DEFAULT_LIMIT, error=lambda m: {"ok": False, "error": "invalid_limit"}, status=200)
    inclusive = query.get("inclusive") in ("1", "true")
    try:
        low = micros(query.get("oldest") or "0")
        high = micros(query["latest"]) if query.get("latest") else None
    except ValueError:
        raise Reply(200, as_json({"ok": False, "error": "invalid_ts_latest" if query.get("latest") else "invalid_ts_oldest"}))
    cursor_high = None
    if query.get("cursor"):
        try:
            key, value = unb64url(query["cursor"]).split(":")
            assert key == "next_ts"
            cursor_high = int(value)
        except Exception:
            raise Reply(200, as_json({"ok": False, "error": "invalid_cursor"}))
    def within(n):
        t = micros(slack_ts(n))
        if t < low or (t == low and not inclusive):
            return False
        if high is not None and (t > high or (t == high and not inclusive)):
            return False
        # The cursor names the next message to return: it is included.
        return cursor_high is None or t <= cursor_high
    in_range = [n for n in range(top, 0, -1) if within(n)]
    chosen, rest = in_range[:limit], in_range[limit:]
    body = {"ok": True,
            "messages": [{"type": "message", "user": "U1", "text": "item %d" % n, "ts": slack_ts(n)} for n in chosen],
            "has_more": bool(rest), "pin_count": 0, "channel_actions_ts": None, "channel_actions_count": 0,
            "response_metadata": {"next_cursor": base64.b64encode(("next_ts:%d" % micros(slack_ts(rest[0]))).encode()).decode() if rest else ""}}
    return as_json(body), None, []

def stripe(h, path, query, top):
    def error(message, param=None):
        body = {"type": "invalid_request_error", "message": message}
        if param:
            body["param"] = param
        return {"error": body}
    limit = number(query, "limit", DEFAULT_LIMIT, error=lambda m: error(m, "limit"))
    after, before = query.get("starting_after"), query.get("ending_before")
    if after and before:
        raise Reply(400, as_json(error("You may only specify one of these parameters: ending_before, starting_after.")))
    def find(value, param):
        match = re.fullmatch(r"ch_(\d{10})", value)
        if not match or not 1 <= int(match.group(1)) <= top:
            body = error("No such charge: '%s'" % value, param)
            body["error"]["code"] = "resource_missing"
            body["error"]["doc_url"] = "https://stripe.com/docs/error-codes/resource-missing"
            raise Reply(400, as_json(body))
        return int(match.group(1))
    if before:
        x = find(before, "ending_before")
        chosen = adjacent_newer(top, x, limit)
        has_more = x + limit < top
    else:
        x = find(after, "starting_after") if after else top + 1
        chosen = older(top, x, limit)
        has_more = bool(chosen) and chosen[-1] > 1
    data = [{"id": IDS["stripe"](n), "object": "charge", "amount": 1000 + n, "amount_captured": 1000 + n,
             "amount_refunded": 0, "captured": True, "created": created(n), "currency": "usd",
             "description": "item %d" % n, "livemode": False, "metadata": {}, "paid": True,
             "refunded": False, "status": "succeeded"} for n in chosen]
    return as_json({"object": "list", "url": "/v1/charges", "has_more": has_more, "data": data}), None, []

NOTION_IDS = {}

def notion_number(block):
    with lock:
        if len(NOTION_IDS) < state["newest"]:
            for n in range(len(NOTION_IDS) + 1, state["newest"] + 1):
                NOTION_IDS[notion_id(n)] = n
        try:
            return NOTION_IDS.get(str(uuid.UUID(block)))
        except ValueError:
            return None

def notion(h, path, query, top):
    def error(message):
        return {"object": "error", "status": 400, "code": "validation_error", "message": message}
    limit = number(query, "page_size", DEFAULT_LIMIT, error=error)
    start = top
    if query.get("start_cursor"):
        n = notion_number(query["start_cursor"])
        if n is None or n > top:
            raise Reply(400, as_json(error("start_cursor provided is invalid: %s" % query["start_cursor"])))
        start = n
    chosen = list(range(start, max(start - limit, 0), -1))
    following = chosen[-1] - 1 if chosen else 0
    minute = lambda n: iso_ms(created(n) // 60 * 60)
    user = {"object": "user", "id": "a1b2c3d4-0000-4000-8000-000000000001"}
    results = [{"object": "block", "id": notion_id(n),
                "parent": {"type": "page_id", "page_id": path.split("/")[3]},
                "created_time": minute(n), "last_edited_time": minute(n), "created_by": user, "last_edited_by": user,
                "has_children": False, "archived": False, "in_trash": False, "type": "paragraph",
                "paragraph": {"rich_text": [{"type": "text", "text": {"content": "item %d" % n, "link": None},
                                             "annotations": {"bold": False, "italic": False, "strikethrough": False,
                                                             "underline": False, "code": False, "color": "default"},
                                             "plain_text": "item %d" % n, "href": None}],
                              "color": "default"}} for n in chosen]
    body = {"object": "list", "results": results, "next_cursor": notion_id(following) if following >= 1 else None,
            "has_more": following >= 1, "type": "block", "block": {},
            "request_id": str(uuid.UUID(bytes=hashlib.sha256(h.path.encode()).digest()[:16], version=4))}
    return as_json(body), None, []

def jira(h, path, query, top):
    def error(message):
        return {"errorMessages": [message], "errors": {}}
    limit = number(query, "maxResults", DEFAULT_LIMIT, error=error)
    ascending = re.search(r"order\s+by\s+(created|key|id)\s+asc\b", query.get("jql", ""), re.I) is not None
    position = None
    if query.get("nextPageToken"):
        try:
            token = json.loads(unb64url(query["nextPageToken"]))
            assert token["asc"] == ascending
            position = int(token["after"])
        except Exception:
            raise Reply(400, as_json(error("The provided next page token is invalid or expired.")))
    if ascending:
        first = (position or 0) + 1
        chosen = list(range(first, min(first + limit, top + 1)))
        is_last = not chosen or chosen[-1] >= top
    else:
        chosen = older(top, position if position is not None else top + 1, limit)
        is_last = not chosen or chosen[-1] <= 1
    # `fields` may come as one comma-separated value or repeated, as Jira takes both.
    wanted = {f.strip() for k, v in parse_qsl(urlsplit(h.path).query) if k == "fields" for f in v.split(",") if f.strip()}
    everything = bool(wanted & {"*all", "*navigable"})
    host = "http://" + h.host()
    def issue(n):
        if not wanted:
            return {"id": str(10000 + n)}
        fields = {"summary": "item %d" % n, "created": time.strftime("%Y-%m-%dT%H:%M:%S.000+0000", time.gmtime(created(n)))}
        fields["updated"] = fields["created"]
        fields = {k: v for k, v in fields.items() if everything or k in wanted}
        return {"expand": "renderedFields,names,schema,operations,editmeta,changelog,versionedRepresentations",
                "id": str(10000 + n), "self": "%s/rest/api/3/issue/%d" % (host, 10000 + n), "key": "PRJ-%d" % n,
                "fields": fields}
    body = {"issues": [issue(n) for n in chosen]}
    if not is_last:
        body["nextPageToken"] = b64url(json.dumps({"after": chosen[-1], "asc": ascending}))
    body["isLast"] = is_last
    return as_json(body), None, []

JSONAPI_PROFILE = "https://jsonapi.org/profiles/ethanresnick/cursor-pagination/"

def jsonapi(h, path, query, top):
    def error(parameter, title, detail, type_link=None, meta=None):
        e = {"status": "400", "title": title, "detail": detail, "source": {"parameter": parameter}}
        if type_link:
            e["links"] = {"type": [JSONAPI_PROFILE.rstrip("/") + "/" + type_link]}
        if meta:
            e["meta"] = meta
        return Reply(400, as_json({"errors": [e]}), "application/vnd.api+json")
    def cursor(name):
        raw = query.get(name)
        if raw is None:
            return None
        if not re.fullmatch(r"[0-9]+", raw):
            raise error(name, "Invalid Parameter.", "%s must be a cursor from this API; got %r" % (name, raw))
        return int(raw)
    after, before = cursor("page[after]"), cursor("page[before]")
    ranged = after is not None and before is not None
    raw_size = query.get("page[size]")
    if raw_size is None:
        size = MAX_LIMIT if ranged else DEFAULT_LIMIT
    elif not re.fullmatch(r"[0-9]+", raw_size) or int(raw_size) == 0:
        raise error("page[size]", "Invalid Parameter.", "page[size] must be a positive integer; got %s" % raw_size)
    elif int(raw_size) > MAX_LIMIT:
        raise error("page[size]", "Page size requested is too large.",
                    "You requested a size of %s, but %d is the maximum." % (raw_size, MAX_LIMIT),
                    "max-size-exceeded", {"page": {"maxSize": MAX_LIMIT}})
    else:
        size = int(raw_size)
    # The list is newest first: "after" a cursor is older than it, "before" is newer.
    truncated = False
    if ranged:
        between = list(range(min(after - 1, top), max(before, 0), -1))
        chosen, truncated = between[:size], len(between) > size
    elif before is not None:
        chosen = adjacent_newer(top, before, size)
    else:
        chosen = older(top, after if after is not None else top + 1, size)
    base = "http://%s%s" % (h.host(), path)
    kept = [(k, v) for k, v in parse_qsl(urlsplit(h.path).query) if not k.startswith("page[")]
    def link(**page):
        params = kept + ([("page[size]", raw_size)] if raw_size is not None else []) + [("page[%s]" % k, str(v)) for k, v in page.items()]
        return base + ("?" + urlencode(params) if params else "")
    if chosen:
        prev = link(before=chosen[0]) if chosen[0] < top else None
        next_ = link(after=chosen[-1]) if chosen[-1] > 1 else None
    else:
        # An empty page. Cursors are positions, so its links still lead to whatever lies beyond
        # it: after=X found nothing older, so the items from X up end at page[before]=X-1;
        # before=X found nothing newer, so the items from X down start at page[after]=X+1.
        prev = link(before=max(after - 1, 0)) if after is not None and max(after, 1) <= top else None
        next_ = link(after=before + 1) if before is not None and min(before, top) >= 1 else None
    data = [{"type": "articles", "id": str(n), "attributes": {"title": "item %d" % n, "created": rfc3339(created(n))},
             "links": {"self": "http://%s/jsonapi/articles/%d" % (h.host(), n)},
             "meta": {"page": {"cursor": str(n)}}} for n in chosen]
    meta = {"total": top}
    if truncated:
        meta["rangeTruncated"] = True
    body = {"jsonapi": {"version": "1.1", "profile": [JSONAPI_PROFILE]}, "data": data,
            "links": {"self": "http://%s%s" % (h.host(), h.path), "first": link(), "prev": prev, "next": next_},
            "meta": {"page": meta}}
    return as_json(body), 'application/vnd.api+json; profile="%s"' % JSONAPI_PROFILE, []

def hal(h, path, query, top):
    size = number(query, "size", DEFAULT_LIMIT)
    page = number(query, "page", 0, low=0, high=1 << 30)
    pages = (top + size - 1) // size
    chosen = [top - i for i in range(page * size, min((page + 1) * size, top))]
    base = "http://%s/hal/items" % h.host()
    href = lambda p: {"href": "%s?page=%d&size=%d" % (base, p, size)}
    links = {}
    navigable = page > 0 or page + 1 < pages
    if navigable:
        links["first"] = href(0)
    if page > 0:
        links["prev"] = href(page - 1)
    links["self"] = href(page)
    if page + 1 < pages:
        links["next"] = href(page + 1)
    if navigable:
        links["last"] = href(max(pages - 1, 0))
    links["profile"] = {"href": "http://%s/hal/profile/items" % h.host()}
    items = [{"id": n, "title": "item %d" % n, "created": rfc3339(created(n)),
              "_links": {"self": {"href": "%s/%d" % (base, n)}, "item": {"href": "%s/%d" % (base, n)}}} for n in chosen]
    body = {"_embedded": {"items": items}, "_links": links,
            "page": {"size": size, "totalElements": top, "totalPages": pages, "number": page}}
    return as_json(body), "application/hal+json", []

def document_page(query, top):
    page = number(query, "page", 1, high=1 << 30)
    chosen = [top - i for i in range((page - 1) * PER_DOCUMENT, min(page * PER_DOCUMENT, top))]
    return page, chosen, page * PER_DOCUMENT < top

def jsonfeed(h, path, query, top):
    page, chosen, more = document_page(query, top)
    host = "http://" + h.host()
    body = {"version": "https://jsonfeed.org/version/1.1", "title": "syncd dialect oracle",
            "home_page_url": "https://example.test/", "feed_url": "%s/feed.json" % host,
            "description": "The same items as every other dialect.", "language": "en",
            "authors": [{"name": "alice"}],
            "items": [{"id": IDS["jsonfeed"](n), "url": "https://example.test/items/%d" % n, "title": "item %d" % n,
                       "content_text": "item %d" % n, "summary": "item %d" % n,
                       "date_published": rfc3339(created(n)), "date_modified": rfc3339(created(n))} for n in chosen]}
    if more:
        body["next_url"] = "%s/feed.json?page=%d" % (host, page + 1)
    return as_json(body), "application/feed+json", []

def offset_page(query, top):
    limit = number(query, "limit", DEFAULT_LIMIT)
    offset = number(query, "offset", 0, low=0, high=1 << 30)
    return offset, limit, [top - i for i in range(offset, min(offset + limit, top))]

def offset(h, path, query, top):
    start, limit, chosen = offset_page(query, top)
    return as_json({"total": top, "offset": start, "limit": limit,
                    "items": [{"id": str(n), "text": "item %d" % n, "created": rfc3339(created(n))} for n in chosen]}), None, []

def pages(h, path, query, top):
    per_page = number(query, "per_page", DEFAULT_LIMIT)
    page = number(query, "page", 1, high=1 << 30)
    chosen = [top - i for i in range((page - 1) * per_page, min(page * per_page, top))]
    return as_json([{"id": n, "text": "item %d" % n, "created": rfc3339(created(n))} for n in chosen]), None, []

def bareoffset(h, path, query, top):
    _, _, chosen = offset_page(query, top)
    return as_json([{"id": str(n), "text": "item %d" % n, "created": rfc3339(created(n))} for n in chosen]), None, []

def opaque_cursor(kind, n):
    return b64url("%s:%d:%s" % (kind, n, hashlib.sha1(b"%d" % n).hexdigest()[:8]))

def read_cursor(kind, raw):
    try:
        got, n, check = unb64url(raw).split(":")
        assert got == kind and check == hashlib.sha1(n.encode()).hexdigest()[:8]
        return int(n)
    except Exception:
        raise Reply(400, as_json({"error": "invalid cursor"}))

def headercursor(h, path, query, top):
    limit = number(query, "limit", DEFAULT_LIMIT)
    start = read_cursor("hc", query["cursor"]) if query.get("cursor") else top + 1
    chosen = older(top, start, limit)
    headers = [("X-Next-Cursor", opaque_cursor("hc", chosen[-1]))] if chosen and chosen[-1] > 1 else []
    return as_json([{"id": str(n), "text": "item %d" % n, "created": rfc3339(created(n))} for n in chosen]), None, headers

def opaque(h, path, query, top):
    # min_id, since_id and max_id are not this server's: like any unknown parameter, ignored.
    limit = number(query, "limit", DEFAULT_LIMIT)
    start = read_cursor("op", query["cursor"]) if query.get("cursor") else top + 1
    chosen = older(top, start, limit)
    headers = []
    if chosen and chosen[-1] > 1:
        headers.append(("Link", '<http://%s/opaque/items?limit=%d&cursor=%s>; rel="next"' % (h.host(), limit, opaque_cursor("op", chosen[-1]))))
    return as_json([{"id": str(n), "text": "item %d" % n, "created": rfc3339(created(n))} for n in chosen]), None, headers

def ascending(h, path, query, top):
    limit = number(query, "limit", DEFAULT_LIMIT)
    after = number(query, "after", 0, low=0, high=1 << 62)
    chosen = list(range(after + 1, min(after + limit, top) + 1))
    headers = []
    if chosen and chosen[-1] < top:
        headers.append(("Link", '<http://%s/ascending/items?limit=%d&after=%d>; rel="next"' % (h.host(), limit, chosen[-1])))
    return as_json([{"id": str(n), "text": "item %d" % n, "created": rfc3339(created(n))} for n in chosen]), None, headers

def atom_entry(n):
    t = rfc3339(created(n))
    return ("<entry><id>%s</id><title>item %d</title><link href=\"https://example.test/items/%d\"/>"
            "<published>%s</published><updated>%s</updated><author><name>alice</name></author>"
            "<summary>item %d</summary><content type=\"text\">item %d</content></entry>") % (IDS["atom"](n), n, n, t, t, n, n)

def atom(h, path, query, top):
    archives = (top - 1) // PER_DOCUMENT if top > 0 else 0
    base = "http://%s/atom" % h.host()
    links = []
    if path == "/atom/current.xml":
        chosen = list(range(top, archives * PER_DOCUMENT, -1))
        links.append(("self", "%s/current.xml" % base))
        if archives:
            links.append(("prev-archive", "%s/archive/%d.xml" % (base, archives)))
        marker = ""
    else:
        match = re.fullmatch(r"/atom/archive/([0-9]+)\.xml", path)
        k = int(match.group(1)) if match else 0
        if not 1 <= k <= archives:
            raise Reply(404, b"not found", "text/plain; charset=utf-8")
        chosen = list(range(k * PER_DOCUMENT, (k - 1) * PER_DOCUMENT, -1))
        links.append(("self", "%s/archive/%d.xml" % (base, k)))
        links.append(("current", "%s/current.xml" % base))
        if k > 1:
            links.append(("prev-archive", "%s/archive/%d.xml" % (base, k - 1)))
        if k < archives:
            links.append(("next-archive", "%s/archive/%d.xml" % (base, k + 1)))
        marker = "<fh:archive/>"
    updated = rfc3339(created(chosen[0])) if chosen else rfc3339(BASE)
    xml = ('<?xml version="1.0" encoding="utf-8"?>\n'
           '<feed xmlns="http://www.w3.org/2005/Atom" xmlns:fh="http://purl.org/syndication/history/1.0">'
           "%s<title>syncd dialect oracle</title><id>tag:example.test,2026:feed</id><updated>%s</updated>"
           "<author><name>alice</name></author>%s%s</feed>\n") % (
        marker, updated, "".join('<link rel="%s" href="%s"/>' % (rel, escape(href)) for rel, href in links),
        "".join(atom_entry(n) for n in chosen))
    return xml.encode(), "application/atom+xml; charset=utf-8", []

def rss(h, path, query, top):
    page, chosen, more = document_page(query, top)
    base = "http://%s/rss.xml" % h.host()
    links = [("self", "%s?page=%d" % (base, page)), ("first", "%s?page=1" % base)]
    if page > 1:
        links.append(("previous", "%s?page=%d" % (base, page - 1)))
    if more:
        links.append(("next", "%s?page=%d" % (base, page + 1)))
    items = "".join(("<item><title>item %d</title><link>https://example.test/items/%d</link>"
                     "<guid isPermaLink=\"false\">%s</guid><pubDate>%s</pubDate><description>item %d</description></item>")
                    % (n, n, IDS["rss"](n), email.utils.formatdate(created(n), usegmt=True), n) for n in chosen)
    xml = ('<?xml version="1.0" encoding="utf-8"?>\n'
           '<rss version="2.0" xmlns:atom="http://www.w3.org/2005/Atom"><channel>'
           "<title>syncd dialect oracle</title><link>https://example.test/</link>"
           "<description>The same items as every other dialect.</description><language>en</language>"
           "<lastBuildDate>%s</lastBuildDate>%s%s</channel></rss>\n") % (
        email.utils.formatdate(created(top) if top else BASE, usegmt=True),
        "".join('<atom:link rel="%s" href="%s"/>' % (rel, escape(href)) for rel, href in links), items)
    return xml.encode(), "application/rss+xml; charset=utf-8", []

ROUTES = [
    (r"/xrpc/app\.bsky\.feed\.getAuthorFeed", bluesky),
    (r"/api/conversations\.history", slack),
    (r"/v1/charges", stripe),
    (r"/v1/blocks/[^/]+/children", notion),
    (r"/rest/api/3/search/jql", jira),
    (r"/jsonapi/articles", jsonapi),
    (r"/hal/items", hal),
    (r"/feed\.json", jsonfeed),
    (r"/offset/items", offset),
    (r"/pages/items", pages),
    (r"/bareoffset/items", bareoffset),
    (r"/headercursor/items", headercursor),
    (r"/opaque/items", opaque),
    (r"/ascending/items", ascending),
    (r"/atom/(current\.xml|archive/[^/]+\.xml)", atom),
    (r"/rss\.xml", rss),
]

class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def host(self):
        return self.headers.get("Host") or "127.0.0.1:%d" % self.server.server_address[1]

    def send(self, status, body, content_type="application/json; charset=utf-8", headers=()):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
        self.wfile.flush()

    def do_HEAD(self):
        self.do_GET()

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        self.do_GET()

    def do_GET(self):
        url = urlsplit(self.path)
        query = dict(parse_qsl(url.query, keep_blank_values=True))
        if url.path == "/health":
            return self.send(200, b"ok", "text/plain; charset=utf-8")
        if url.path.startswith("/admin/"):
            return self.admin(url.path, query)
        with lock:
            received.append({"path": url.path, "query": url.query})
            gate = None
            if state["remaining"] > 0:
                state["remaining"] -= 1
                state["waiting"] += 1
                gate = state["gate"]
        if gate is not None:
            gate.wait(HOLD_LIMIT)
            with lock:
                state["waiting"] -= 1
        with lock:
            down, top = state["down"], state["newest"]
        if down:
            # An offline period: the connection ends without a byte of answer.
            self.close_connection = True
            return
        route = next((f for pattern, f in ROUTES if re.fullmatch(pattern, url.path)), None)
        if route is None:
            return self.send(404, b'{"error":"not found"}')
        if self.command == "POST" and route is not slack:
            return self.send(405, b'{"error":"method not allowed"}', headers=[("Allow", "GET, HEAD")])
        try:
            body, content_type, headers = route(self, url.path, query, top)
        except Reply as reply:
            return self.send(reply.status, reply.body, reply.content_type, reply.headers)
        self.send(200, body, content_type or "application/json; charset=utf-8", headers)

    def admin(self, path, query):
        if path == "/admin/add":
            count = int(query.get("count", "1"))
            with lock:
                state["newest"] += count
                body = {"newest": state["newest"]}
        elif path == "/admin/ids":
            name = query.get("dialect")
            if name not in IDS:
                return self.send(404, as_json({"error": "no dialect %r; known: %s" % (name, sorted(IDS))}))
            body = {"ids": [IDS[name](n) for n in range(newest(), 0, -1)]}
        elif path == "/admin/requests":
            with lock:
                body = {"requests": list(received)}
        elif path == "/admin/requests/clear":
            with lock:
                received.clear()
            body = {}
        elif path in ("/admin/down", "/admin/up"):
            with lock:
                state["down"] = path == "/admin/down"
            body = {}
        elif path == "/admin/hold":
            with lock:
                state["remaining"] = int(query.get("count", "1"))
            body = {}
        elif path == "/admin/release":
            with lock:
                state["gate"].set()
                state["gate"] = threading.Event()
                state["remaining"] = 0
            body = {}
        elif path == "/admin/held":
            with lock:
                body = {"waiting": state["waiting"], "remaining": state["remaining"]}
        else:
            return self.send(404, b'{"error":"no such admin command"}')
        self.send(200, as_json(body))

ThreadingHTTPServer.daemon_threads = True
server = ThreadingHTTPServer(("127.0.0.1", port_arg), Handler)
print(json.dumps({"port": server.server_address[1]}), flush=True)

def watch_parent(parent=os.getppid()):
    """Ends with the process that started it, even if that one is killed."""
    while os.getppid() == parent:
        time.sleep(0.5)
    os._exit(0)

threading.Thread(target=watch_parent, daemon=True).start()
server.serve_forever()
