# A Mastodon-style timeline for syncd's tests, counting every byte it sends. Newest first,
# `limit`, `max_id` and `min_id`, a Link header with rel="next" (older) and rel="prev" (newer),
# as Mastodon pages its timelines. Written independently of syncd's own code: the bytes it
# counts on its sockets are the truth a metered budget is held against.
#
# Usage: mastodon_counting.py PORT ITEMS PAYLOAD_BYTES STATS_FILE [gzip]
# PORT 0 takes a free port and prints {"port": N} once listening. With "gzip", bodies go out
# gzip-compressed to a client that accepts it. After each response but /health's it writes
# STATS_FILE (atomically): {"bytes": all bytes sent, "bodies": body bytes as sent, "requests":
# responses, "largest": the largest response}.
import gzip, json, os, signal, sys, threading
from http.server import ThreadingHTTPServer, BaseHTTPRequestHandler
from urllib.parse import urlsplit, parse_qsl

# A child of Foundation's Process inherits SIGTERM blocked: unblocked, the test's stop ends it.
signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
port, count, payload, stats_path = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
compress = sys.argv[5:] == ["gzip"]
lock = threading.Lock()
stats = {"bytes": 0, "bodies": 0, "requests": 0, "largest": 0}
# Newest first; ids are numbers as strings, larger is newer.
items = [
    json.dumps({"id": str(n), "content": "x" * payload}, separators=(",", ":")).encode()
    for n in range(count, 0, -1)
]
ids = list(range(count, 0, -1))

class Counting:
    """The handler's output stream, counting what reaches the socket."""
    def __init__(self, inner):
        self.inner = inner
        self.sent = 0
    def write(self, data):
        self.sent += len(data)
        return self.inner.write(data)
    def flush(self):
        self.inner.flush()
    def close(self):
        self.inner.close()
    @property
    def closed(self):
        return self.inner.closed

class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def setup(self):
        super().setup()
        self.wfile = Counting(self.wfile)

    def do_GET(self):
        url = urlsplit(self.path)
        if url.path == "/health":
            self.answer(b"ok", [], counted=False)
            return
        if url.path != "/api/v1/timelines/public":
            self.answer(b'{"error":"Record not found"}', [], status=404)
            return
        query = dict(parse_qsl(url.query))
        limit = min(int(query.get("limit", "20")), 40)
        chosen = [n for n in ids if ("max_id" not in query or n < int(query["max_id"]))
                  and ("min_id" not in query or n > int(query["min_id"]))]
        # min_id: the items just newer than it, oldest of them last, as Mastodon answers.
        chosen = chosen[-limit:] if "min_id" in query else chosen[:limit]
        body = b"[" + b",".join(items[count - n] for n in chosen) + b"]"
        links = []
        base = "http://%s%s?limit=%d" % (self.headers["Host"], url.path, limit)
        if chosen:
            links.append('<%s&max_id=%d>; rel="next"' % (base, chosen[-1]))
            links.append('<%s&min_id=%d>; rel="prev"' % (base, chosen[0]))
        self.answer(body, [("Link", ", ".join(links))] if links else [])

    def answer(self, body, headers, status=200, counted=True):
        before = self.wfile.sent
        if compress and "gzip" in self.headers.get("Accept-Encoding", ""):
            body = gzip.compress(body)
            headers = headers + [("Content-Encoding", "gzip")]
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()
        if not counted:
            return
        size = self.wfile.sent - before
        with lock:
            stats["bytes"] += size
            stats["bodies"] += len(body)
            stats["requests"] += 1
            stats["largest"] = max(stats["largest"], size)
            with open(stats_path + ".tmp", "w") as out:
                json.dump(stats, out)
            os.replace(stats_path + ".tmp", stats_path)

ThreadingHTTPServer.daemon_threads = True
server = ThreadingHTTPServer(("127.0.0.1" if port == 0 else "0.0.0.0", port), Handler)
if port == 0:
    print(json.dumps({"port": server.server_address[1]}), flush=True)
server.serve_forever()
