# Answers a feed client meets that are not the feed's JSON, for syncd's tests: an HTML sign-in
# page (directly, and after a same-origin redirect to /login), an HTML error page, a body in an
# encoding nobody asked for (br), a gzip body sent to any client, and a three-page feed whose
# Link headers are folded over several lines (obs-fold, RFC 9112 §5.2), with a tab or spaces,
# gzipped when asked. Written independently of syncd's code.
#
# Usage: odd_answers.py       prints {"port": N} once listening on 127.0.0.1.
import gzip, json
import oracle_http

oracle_http.end_on_sigterm()

PAGE = json.dumps([{"id": "2", "text": "b"}, {"id": "1", "text": "a"}]).encode()
LOGIN = b"""<!DOCTYPE html>
<html><head><title>Sign in \x1b[31m- Example SSO</title></head>
<body><form method="post" action="/login"><input name="user"><input type="password" name="pw"></form></body></html>"""
ERROR = b"<html><head><title>502 Bad Gateway</title></head><body>upstream down</body></html>"

class Handler(oracle_http.Handler):
    def do_GET(self):
        path = self.path.split("?")[0]
        if path == "/login-page":
            self.send(200, LOGIN, [("Content-Type", "text/html; charset=utf-8")])
        elif path == "/redirected":
            self.send(302, b"", [("Location", "/login?next=%2Fredirected")])
        elif path == "/login":
            self.send(200, LOGIN.replace(b'type="password"', b'type="text"'), [("Content-Type", "text/html")])
        elif path == "/error-page":
            self.send(200, ERROR, [("Content-Type", "text/html")])
        elif path == "/brotli":
            # Not real brotli: what matters is the label, which nobody asked for.
            self.send(200, b"\x8b\x02\x80" + PAGE + b"\x03", [("Content-Type", "application/json"), ("Content-Encoding", "br")])
        elif path == "/folded":
            self.folded()
        elif path == "/gzip-always":
            self.send(200, gzip.compress(PAGE), [("Content-Type", "application/json"), ("Content-Encoding", "gzip")])
        else:
            self.send(404, b'{"error":"not found"}', [("Content-Type", "application/json")])

    def folded(self):
        query = dict(part.split("=", 1) for part in self.path.partition("?")[2].split("&") if "=" in part)
        page = int(query.get("page", "1"))
        if page not in (1, 2, 3):
            return self.send(404, b'{"error":"no such page"}', [("Content-Type", "application/json")])
        top = 6 - 2 * (page - 1)
        body = json.dumps([{"id": str(top), "text": "x"}, {"id": str(top - 1), "text": "y"}]).encode()
        base = "http://127.0.0.1:%d/folded" % self.server.server_address[1]
        links = []
        if page < 3:
            links.append('<%s?page=%d>; rel="next"' % (base, page + 1))
        if page > 1:
            links.append('<%s?page=%d>; rel="prev"' % (base, page - 1))
        links.append('<%s?page=1>; rel="first"' % base)
        # Each link on a line of its own: the first after the field name, the others continued
        # with a tab, or with three spaces after trailing whitespace.
        fold = "\r\n\t" if page != 2 else "  \r\n   "
        headers = [b"HTTP/1.1 200 OK", b"Content-Type: application/json",
                   b"X-Note: folded" + fold.encode() + b"too", ("Link: " + ("," + fold).join(links)).encode()]
        if "gzip" in (self.headers.get("Accept-Encoding") or ""):
            body = gzip.compress(body)
            headers.append(b"Content-Encoding: gzip")
        headers.append(b"Content-Length: %d" % len(body))
        self.wfile.write(b"\r\n".join(headers) + b"\r\n\r\n" + body)

oracle_http.serve(Handler)
