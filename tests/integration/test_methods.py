"""Any method token (issue 17, item 8): WebDAV, CalDAV and cache-purge methods reach proxy and
FastCGI back ends unchanged; static and return routes answer 405 with Allow; the parser still
refuses what is not a token.

Back ends: tests/integration/backends/http_backend.py (its /echo reports method, target and the
body's length and SHA-256) and a real php-fpm (php/env.php reports REQUEST_METHOD and the body).
Clients: raw HTTP/1.1 sockets and curl over h2c.
"""

import hashlib
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import phpfpm  # noqa: E402
from harness import ServerTestCase, h2c, main, make_config, require_tool  # noqa: E402
from test_proxy import Backend, route_toml, upstream_toml  # noqa: E402

PROPFIND_BODY = (b'<?xml version="1.0" encoding="utf-8"?>\n'
                 b'<d:propfind xmlns:d="DAV:"><d:prop><d:getetag/><d:resourcetype/></d:prop>'
                 b"</d:propfind>\n")
DAV_METHODS = ("PROPFIND", "REPORT", "MKCOL", "PURGE", "PROPPATCH", "LOCK", "UNLOCK", "COPY",
               "MOVE", "SEARCH")



class MethodsTestCase(ServerTestCase):
    def setUp(self):
        super().setUp()
        self.backend = Backend(self.tmp, "A").start()
        self.addCleanup(self.backend.kill)
        self.root = self.make_root({"hello.txt": "hello\n"})
        routes = (route_toml("/dav/", proxy="http://backend") + route_toml("/listed/", proxy="http://backend",
                                                                      methods=["GET", "PROPFIND"])
                  + '[[site.route]]\nprefix = "/moved"\nreturn = 301\nlocation = "/x"\n'
                  + '[[site.route]]\nprefix = "/purge-only"\nmethods = ["PURGE"]\n'
                    'return = 200\nbody = "purged\\n"\n'
                  + '[[site.route]]\nprefix = "/"\n')
        top = upstream_toml("backend", [self.backend.address])
        self.text = make_config(self.root, top=top, routes=routes)
        self.srv = self.start_config(h2c(self.text))
        self.port = self.srv.port

    def echo(self, method, body=b"", headers=None):
        c = self.raw(self.port)
        r = c.request(method, "/dav/files/echo", body=body, headers=headers)
        self.assertEqual(r.status, 200, f"{method}: {r}")
        c.close()
        return json.loads(r.body)

    def test_propfind_with_a_body_reaches_the_back_end_unchanged(self):
        seen = self.echo("PROPFIND", PROPFIND_BODY,
                         {"Depth": "1", "Content-Type": "application/xml; charset=utf-8"})
        self.assertEqual(seen["method"], "PROPFIND")
        self.assertEqual(seen["target"], "/dav/files/echo")
        self.assertEqual(seen["body_length"], len(PROPFIND_BODY))
        self.assertEqual(seen["body_sha256"], hashlib.sha256(PROPFIND_BODY).hexdigest())
        headers = {k.lower(): v for k, v in seen["headers"]}
        self.assertEqual(headers.get("depth"), "1")

    def test_propfind_chunked_body(self):
        c = self.raw(self.port)
        c.send(b"PROPFIND /dav/echo HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n"
               + b"%x\r\n" % len(PROPFIND_BODY) + PROPFIND_BODY + b"\r\n0\r\n\r\n")
        r = c.read_response()
        self.assertEqual(r.status, 200, r)
        seen = json.loads(r.body)
        self.assertEqual(seen["method"], "PROPFIND")
        self.assertEqual(seen["body_sha256"], hashlib.sha256(PROPFIND_BODY).hexdigest())

    def test_every_dav_method_passes_through_with_its_spelling(self):
        for method in DAV_METHODS + ("X-CUSTOM_1", "BREW"):
            with self.subTest(method=method):
                body = b"<x/>" if method in ("REPORT", "SEARCH", "LOCK") else b""
                seen = self.echo(method, body)
                self.assertEqual(seen["method"], method)
                self.assertEqual(seen["body_length"], len(body))

    def test_methods_are_case_sensitive_tokens(self):
        # RFC 9110 9.1: "propfind" is another method than PROPFIND; both pass as sent.
        self.assertEqual(self.echo("propfind")["method"], "propfind")

    def test_route_listing_methods_takes_a_listed_token_only(self):
        c = self.raw(self.port)
        r = c.request("PROPFIND", "/listed/echo")
        self.assertEqual(r.status, 200, r)
        self.assertEqual(json.loads(r.body)["method"], "PROPFIND")
        r = c.request("MKCOL", "/listed/echo")
        self.assertEqual(r.status, 405, r)
        self.assertEqual(r.header("allow"), "GET, PROPFIND")

    def test_static_route_answers_405_with_allow(self):
        for method in ("PROPFIND", "MKCOL", "PURGE"):
            with self.subTest(method=method):
                c = self.raw(self.port)
                body = PROPFIND_BODY if method == "PROPFIND" else b""
                r = c.request(method, "/hello.txt", body=body)
                self.assertEqual(r.status, 405, r)
                self.assertEqual(r.header("allow"), "GET, HEAD, OPTIONS")
                # The body was consumed: the connection serves the next request.
                self.assertEqual(c.request("GET", "/hello.txt").body, b"hello\n")

    def test_return_route_answers_405_unless_it_lists_the_token(self):
        c = self.raw(self.port)
        r = c.request("PROPFIND", "/moved")
        self.assertEqual(r.status, 405, r)
        allow = {m.strip() for m in r.header("allow").split(",")}
        self.assertIn("GET", allow)
        self.assertNotIn("PROPFIND", allow)
        self.assertEqual(c.request("GET", "/moved").status, 301)
        r = c.request("PURGE", "/purge-only")
        self.assertEqual((r.status, r.body), (200, b"purged\n"))

    def test_invalid_tokens_are_still_400(self):
        for line in (b"PRO(FIND / HTTP/1.1", b"GE T / HTTP/1.1", b"PROP\x01 / HTTP/1.1",
                     b"\"X\" / HTTP/1.1"):
            with self.subTest(line=line):
                c = self.raw(self.port)
                c.send(line + b"\r\nHost: localhost\r\n\r\n")
                r = c.read_response()
                self.assertEqual(r.status, 400, r)
        self.assert_serving(self.srv, "/hello.txt")

    def test_h2c_propfind_through_the_proxy(self):
        require_tool("curl", "curl")
        body_file = os.path.join(self.tmp, "propfind.xml")
        with open(body_file, "wb") as f:
            f.write(PROPFIND_BODY)
        out = subprocess.run(
            ["curl", "-sS", "--http2-prior-knowledge", "-X", "PROPFIND", "-H", "Depth: 0",
             "--data-binary", f"@{body_file}", f"http://127.0.0.1:{self.port}/dav/echo"],
            capture_output=True, timeout=10, check=True)
        seen = json.loads(out.stdout)
        self.assertEqual(seen["method"], "PROPFIND")
        self.assertEqual(seen["body_sha256"], hashlib.sha256(PROPFIND_BODY).hexdigest())
        out = subprocess.run(
            ["curl", "-sS", "--http2-prior-knowledge", "-X", "MKCOL", "-o", "/dev/null", "-w",
             "%{http_code}", f"http://127.0.0.1:{self.port}/hello.txt"],
            capture_output=True, timeout=10, check=True)
        self.assertEqual(out.stdout, b"405")

    def test_unknown_method_is_not_retried_after_it_was_sent(self):
        # A non-idempotent method: once the request went out, a broken back end is a 502, not a
        # second try on another server (the echo back end counts what it received).
        dead = Backend(self.tmp, "B").start()
        self.addCleanup(dead.kill)
        routes = route_toml("/", proxy="http://pair")
        top = upstream_toml("pair", [self.backend.address, dead.address], tries=2)
        srv = self.start_config(make_config(self.root, top=top, routes=routes))
        self.backend.reset()
        dead.reset()
        c = self.raw(srv.port)
        r = c.request("PROPFIND", "/post_close", body=b"<x/>")
        self.assertEqual(r.status, 502, r)
        served = self.backend.stats()["requests"] + dead.stats()["requests"]
        self.assertEqual(served, 1, "PROPFIND was sent to one server only")


class MethodsFastcgiTestCase(ServerTestCase):
    def setUp(self):
        super().setUp()
        self.root, self.fpm, top = phpfpm.start_for(self)
        routes = ('[[site.route]]\nregex = \'[^/]\\.php(/|$)\'\nfastcgi = "php"\n'
                  '[[site.route]]\nprefix = "/"\n')
        self.srv = self.start_config(h2c(make_config(self.root, top=top, routes=routes)))

    def test_request_method_reaches_php(self):
        for method in ("PROPFIND", "REPORT", "MKCOL", "PURGE"):
            with self.subTest(method=method):
                c = self.raw(self.srv.port)
                r = c.request(method, "/env.php", body=PROPFIND_BODY,
                              headers={"Content-Type": "application/xml"})
                self.assertEqual(r.status, 200, r)
                out = json.loads(r.body)
                self.assertEqual(out["server"]["REQUEST_METHOD"], method)
                self.assertEqual(out["body_length"], len(PROPFIND_BODY))
                self.assertEqual(out["body_sha256"], hashlib.sha256(PROPFIND_BODY).hexdigest())

    def test_request_method_reaches_php_over_h2c(self):
        require_tool("curl", "curl")
        out = subprocess.run(
            ["curl", "-sS", "--http2-prior-knowledge", "-X", "PROPFIND", "--data-binary", "<x/>",
             f"http://127.0.0.1:{self.srv.port}/env.php"], capture_output=True, timeout=10,
            check=True)
        seen = json.loads(out.stdout)
        self.assertEqual(seen["server"]["REQUEST_METHOD"], "PROPFIND")
        self.assertEqual(seen["body_length"], 4)

    def test_static_file_under_the_fastcgi_site_answers_405(self):
        c = self.raw(self.srv.port)
        r = c.request("PROPFIND", "/static.txt")
        self.assertEqual(r.status, 405, r)
        self.assertEqual(r.header("allow"), "GET, HEAD, OPTIONS")


if __name__ == "__main__":
    main()
