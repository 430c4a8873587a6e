# A GitHub-style paginated feed server for syncd's tests: page numbers, per_page, Link
# first/prev/next/last (no prev on page 1), ETag and Last-Modified with 304s, scripted
# redirects, and a second origin that records what it is sent. Written independently of
# syncd's own code so that it can serve as the truth the tests compare the store with.
import email.utils, hashlib, json, os, ssl, sys, threading, time
from http.server import ThreadingHTTPServer
from urllib.parse import urlsplit, parse_qsl, urlencode
import oracle_http

lock = threading.Lock()
items = []          # oldest first: (id, payload bytes)
counter = [0]
modified = [time.time()]
requests = []       # what each origin received
redirects = {}      # (origin, path) -> (status, location, keep_query)
closing = [False]   # whether feed answers end their connection (Connection: close)
corrupt = set()     # pages answered with a body that says gzip and is not
holds = {}          # page -> (point, Event): answers held before the response or after the headers
# A guard only: a test releases what it holds, or stops the server (which ends its threads).
HOLD_LIMIT = 600

def hold(page, point):
    with lock:
        holds[page] = (point, threading.Event())

def held(page, point):
    """Waits while `page` is held at `point` ("response" or "body")."""
    with lock:
        entry = holds.get(page)
    if entry and entry[0] == point:
        entry[1].wait(HOLD_LIMIT)

def add(ids):
    with lock:
        for item_id in ids:
            counter[0] += 1
            body = {"id": item_id, "number": counter[0], "title": "issue %d" % counter[0]}
            items.append((item_id, json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()))
        modified[0] = time.time()

class Handler(oracle_http.Handler):
    origin = "main"

    def setup(self):
        if isinstance(self.request, ssl.SSLSocket):
            # A guard against a client that never finishes its handshake, not a bound on one
            # that does: the suite's congested first seconds can slow a handshake a lot.
            self.request.settimeout(60)
            self.request.do_handshake()
        super().setup()

    def send(self, status, body=b"", headers=(), page=None):
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        if closing[0] and urlsplit(self.path).path == "/feed":
            self.send_header("Connection", "close")
        self.end_headers()
        if page is not None:
            self.wfile.flush()
            held(page, "body")
        if body and self.command != "HEAD":
            self.wfile.write(body)

    def answer(self, url, query):
        with lock:
            requests.append({"origin": self.origin, "path": self.path, "peer": self.client_address[1],
                             "headers": {k.lower(): v for k, v in self.headers.items()}})
            redirect = redirects.get((self.origin, url.path))
        if redirect:
            status, location, keep_query = redirect
            if keep_query and url.query:
                location += ("&" if "?" in location else "?") + url.query
            return self.send(status, b"", [("Location", location)])
        if url.path != "/feed":
            return self.send(404, b'{"message":"Not Found"}', [("Content-Type", "application/json")])
        try:
            page = int(query.get("page", "1"))
            per_page = min(100, int(query.get("per_page", "30")))
        except ValueError:
            return self.send(422, b'{"message":"bad page"}')
        page = max(1, page)
        with lock:
            newest_first = list(reversed(items))
            stamp = modified[0]
        chunk = newest_first[(page - 1) * per_page: page * per_page]
        body = b"[" + b",".join(payload for _, payload in chunk) + b"]"
        last = max(1, (len(newest_first) + per_page - 1) // per_page)
        kept = [(k, v) for k, v in parse_qsl(url.query) if k != "page"]
        def link(number, rel):
            scheme = "https" if isinstance(self.connection, ssl.SSLSocket) else "http"
            return '<%s://%s%s?%s>; rel="%s"' % (scheme, self.headers["Host"], url.path, urlencode(kept + [("page", str(number))]), rel)
        links = []
        if page < last:
            links += [link(page + 1, "next"), link(last, "last")]
        if page > 1:
            links += [link(1, "first"), link(page - 1, "prev")]
        etag = 'W/"%s"' % hashlib.sha1(body).hexdigest()
        last_modified = email.utils.formatdate(stamp, usegmt=True)
        headers = [("Content-Type", "application/json; charset=utf-8"), ("ETag", etag), ("Last-Modified", last_modified)]
        if links:
            headers.append(("Link", ", ".join(links)))
        match = self.headers.get("If-None-Match")
        since = self.headers.get("If-Modified-Since")
        if match is not None:
            if etag in [tag.strip() for tag in match.split(",")]:
                return self.send(304, b"", [("ETag", etag)])
        elif since is not None:
            try:
                if int(stamp) <= email.utils.parsedate_to_datetime(since).timestamp():
                    return self.send(304, b"", [("Last-Modified", last_modified)])
            except (TypeError, ValueError):
                pass
        held(page, "response")
        with lock:
            bad = page in corrupt
        if bad:
            headers.append(("Content-Encoding", "gzip"))
            body = b"\x1f\x8b\x08\x00" + b"this is not a gzip stream" * 8
        self.send(200, body, headers, page=page)

    def admin(self, path, query):
        if path == "/admin/add":
            ids = json.loads(query["ids"]) if "ids" in query else None
            if ids is None:
                base = 1000 + 7 * (counter[0] + 1)
                ids = [base + 7 * n for n in range(int(query.get("count", "1")))]
            add(ids)
            return self.send(200, b"{}")
        if path == "/admin/edit":
            # An issue retitled: its body changes, its place in the list (by creation) does not.
            with lock:
                for index, (item_id, payload) in enumerate(items):
                    if str(item_id) == query["id"]:
                        body = json.loads(payload)
                        body["title"] = query.get("title", "")  # parse_qsl drops a blank value
                        items[index] = (item_id, json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode())
                modified[0] = time.time()
            return self.send(200, b"{}")
        if path == "/admin/delete":
            # An issue deleted: it leaves the list, and the pages after it shift up by one.
            with lock:
                items[:] = [(i, p) for i, p in items if str(i) != query["id"]]
                modified[0] = time.time()
            return self.send(200, b"{}")
        if path == "/admin/items":
            with lock:
                body = json.dumps([[i, p.decode()] for i, p in reversed(items)], ensure_ascii=False).encode()
            return self.send(200, body, [("Content-Type", "application/json")])
        if path == "/admin/requests":
            with lock:
                body = json.dumps(requests).encode()
            return self.send(200, body, [("Content-Type", "application/json")])
        if path == "/admin/corrupt":
            page = int(query["page"])
            with lock:
                corrupt.add(page)
            hold(page, "response")
            return self.send(200, b"{}")
        if path == "/admin/hold":
            hold(int(query["page"]), query.get("at", "response"))
            return self.send(200, b"{}")
        if path == "/admin/release":
            # One page's hold, or every one; answers asked for later are not held either.
            with lock:
                events = [event for page, (_, event) in holds.items() if "page" not in query or page == int(query["page"])]
            for event in events:
                event.set()
            return self.send(200, b"{}")
        if path == "/admin/closing":
            closing[0] = query.get("on") == "1"
            return self.send(200, b"{}")
        if path == "/admin/redirect":
            with lock:
                redirects[(query.get("origin", "main"), query["path"])] = (int(query["status"]), query["location"], query.get("keep_query") == "1")
            return self.send(200, b"{}")
        self.send(404, b"{}")

class Other(Handler):
    origin = "other"

oracle_http.end_on_sigterm()
servers = [ThreadingHTTPServer(("127.0.0.1", 0), Handler), ThreadingHTTPServer(("127.0.0.1", 0), Other)]
# --https NAME:CERT:KEY[:CLIENT_CA] adds an HTTPS origin serving the same feed; with CLIENT_CA
# it requires a client certificate signed by that CA.
args = sys.argv[1:]
while args:
    flag, spec, args = args[0], args[1], args[2:]
    assert flag == "--https", flag
    name, cert, key, *client_ca = spec.split(":")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    if client_ca:
        context.verify_mode = ssl.CERT_REQUIRED
        context.load_verify_locations(client_ca[0])
    handler = type("Secure_" + name, (Handler,), {"origin": name})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler, bind_and_activate=True)
    # Handshakes happen in the handler threads, so a failed one never stops the accept loop.
    server.socket = context.wrap_socket(server.socket, server_side=True, do_handshake_on_connect=False)
    servers.append(server)
for server in servers:
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
print(json.dumps({"ports": [s.server_address[1] for s in servers]}), flush=True)
# Ends with the test process that started it, even if that one is killed.
parent = os.getppid()
while os.getppid() == parent:
    time.sleep(0.5)
