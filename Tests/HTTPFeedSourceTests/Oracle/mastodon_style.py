# A Mastodon-style timeline whose statuses are edited and deleted, for syncd's tests. Newest
# first; `limit` (default 20, at most 40), `max_id` (older than), `since_id` (the newest above),
# `min_id` (the oldest above, adjacent); a Link header with rel="next" (max_id of the last) and
# rel="prev" (min_id of the first), omitted on an empty page, as Mastodon pages its timelines.
# Ids are numbers as strings, larger is newer (Mastodon's snowflakes compare the same way).
# Written independently of syncd's own code: /admin/items is the truth a mirror is compared with.
#
# The same statuses are also served in a body-cursor dialect, as Bluesky pages its feeds:
# GET /xrpc/feed?limit=&cursor= -> {"feed": [...], "cursor": "<opaque>"} newest first, the cursor
# omitted on the last page; it encodes the last status's id, but a client cannot know that.
#
# Usage: mastodon_style.py PORT ITEMS
# PORT 0 takes a free port and prints {"port": N} once listening on 127.0.0.1.
# Control: /admin/add?count=K puts K new statuses at the top; /admin/delete?id=X removes one
# (with &tombstone=1 it stays listed in its place as {"id": X, "deleted": true});
# /admin/edit?id=X&text=T changes one's content and edited_at (its place does not change);
# /admin/items -> [[id, payload], ...] newest first, tombstones left out; /admin/requests -> every timeline query.
import base64, json, sys, threading
from urllib.parse import urlsplit, parse_qsl, urlencode
import oracle_http

oracle_http.end_on_sigterm()
port, count = int(sys.argv[1]), int(sys.argv[2])
lock = threading.Lock()
statuses = {}       # id (int) -> dict
edits = [0]
requests = []

def status(n, text=None, edited=None):
    return {"id": str(n), "created_at": "2026-01-01T00:%02d:%02d.000Z" % (n // 60 % 60, n % 60),
            "content": "<p>%s</p>" % (text or "status %d" % n), "edited_at": edited}

def payload(s):
    return json.dumps(s, ensure_ascii=False, separators=(",", ":"))

for n in range(1, count + 1):
    statuses[n] = status(n)
newest = [count]

class Handler(oracle_http.Handler):
    def answer(self, url, query):
        if url.path == "/xrpc/feed":
            return self.body_cursor(query)
        if url.path != "/api/v1/timelines/public":
            return self.send(404, b'{"error":"Record not found"}', [("Content-Type", "application/json")])
        try:
            limit = max(1, min(40, int(query.get("limit", "20"))))
            max_id = int(query["max_id"]) if "max_id" in query else None
            since_id = int(query["since_id"]) if "since_id" in query else None
            min_id = int(query["min_id"]) if "min_id" in query else None
        except ValueError:
            return self.send(422, b'{"error":"bad id"}')
        with lock:
            requests.append(url.query)
            ids = sorted(statuses, reverse=True)
            chosen = [n for n in ids if (max_id is None or n < max_id) and (since_id is None or n > since_id) and (min_id is None or n > min_id)]
            if min_id is not None:
                chosen = chosen[-limit:]  # the oldest above min_id: adjacent to it
            else:
                chosen = chosen[:limit]
            body = ("[" + ",".join(payload(statuses[n]) for n in chosen) + "]").encode()
        headers = [("Content-Type", "application/json; charset=utf-8")]
        if chosen:
            base = "http://%s%s?" % (self.headers["Host"], url.path)
            kept = [(k, v) for k, v in parse_qsl(url.query) if k not in ("max_id", "min_id", "since_id")]
            links = ['<%s%s>; rel="next"' % (base, urlencode(kept + [("max_id", str(chosen[-1]))])),
                     '<%s%s>; rel="prev"' % (base, urlencode(kept + [("min_id", str(chosen[0]))]))]
            headers.append(("Link", ", ".join(links)))
        self.send(200, body, headers)

    def body_cursor(self, query):
        try:
            limit = max(1, min(100, int(query.get("limit", "20"))))
            before = int(base64.urlsafe_b64decode(query["cursor"]).decode().split(":")[1]) if "cursor" in query else None
        except (ValueError, IndexError):
            return self.send(400, b'{"error":"InvalidRequest","message":"bad cursor"}')
        with lock:
            requests.append("xrpc " + urlsplit(self.path).query)
            ids = [n for n in sorted(statuses, reverse=True) if before is None or n < before]
            chosen, more = ids[:limit], len(ids) > limit
            document = '{"feed":[' + ",".join(payload(statuses[n]) for n in chosen) + "]"
        if more:
            document += ',"cursor":"%s"' % base64.urlsafe_b64encode(("before:%d" % chosen[-1]).encode()).decode()
        self.send(200, (document + "}").encode(), [("Content-Type", "application/json")])

    def admin(self, path, query):
        with lock:
            if path == "/admin/add":
                for _ in range(int(query.get("count", "1"))):
                    newest[0] += 1
                    statuses[newest[0]] = status(newest[0])
                body = json.dumps({"newest": newest[0]})
            elif path == "/admin/delete":
                if query.get("tombstone") == "1":
                    statuses[int(query["id"])] = {"id": query["id"], "deleted": True}
                else:
                    statuses.pop(int(query["id"]), None)
                body = "{}"
            elif path == "/admin/edit":
                n = int(query["id"])
                if n in statuses:
                    edits[0] += 1
                    statuses[n] = status(n, query.get("text", "edited"), "2026-02-01T00:00:%02d.000Z" % (edits[0] % 60))
                body = "{}"
            elif path == "/admin/items":
                # Tombstones are not part of what a mirror holds.
                body = json.dumps([[str(n), payload(statuses[n])] for n in sorted(statuses, reverse=True)
                                   if not statuses[n].get("deleted")], ensure_ascii=False)
            elif path == "/admin/requests":
                body = json.dumps(requests)
            else:
                return self.send(404, b"{}")
        self.send(200, body.encode(), [("Content-Type", "application/json")])

oracle_http.serve(Handler, port)
