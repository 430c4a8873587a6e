# What the feed oracles of syncd's tests share: the test's stop ends them, and a quiet HTTP/1.1
# handler whose answers carry a Content-Length, so that a client keeps its connection.
import json, os, signal
from http.server import ThreadingHTTPServer, BaseHTTPRequestHandler
from urllib.parse import urlsplit, parse_qsl

def end_on_sigterm():
    # A child of Foundation's Process inherits SIGTERM blocked, and may inherit it ignored: both
    # survive exec.
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})

class Handler(BaseHTTPRequestHandler):
    """GET and POST alike: /admin/... goes to `admin(path, query)`, the rest to `answer(url, query)`."""
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def send(self, status, body=b"", headers=()):
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if body and self.command != "HEAD":
            self.wfile.write(body)

    def do_POST(self):
        self.do_GET()

    def do_GET(self):
        url = urlsplit(self.path)
        query = dict(parse_qsl(url.query))
        if url.path.startswith("/admin/"):
            return self.admin(url.path, query)
        self.answer(url, query)

def serve(handler, port=0):
    """Serves on 127.0.0.1:`port` (0: a free one), saying {"port": N} once it listens."""
    server = ThreadingHTTPServer(("127.0.0.1", port), handler)
    server.daemon_threads = True
    print(json.dumps({"port": server.server_address[1]}), flush=True)
    server.serve_forever()
