"""Response headers on any site and route (issue 17, item 5): `headers = { set, add, remove,
always }` on every handler kind (static, return, FastCGI through a real php-fpm, proxy to a real
HTTP/1.1 back end), over HTTP/1.1 (raw sockets) and h2c (curl --http2-prior-knowledge).
Without `always` the rules apply to 2xx and 3xx only; with it to the server's own errors too
(404, 405, 400, 502...).
"""

import os
import socket
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import phpfpm  # noqa: E402
from harness import ServerTestCase, h2c, main, make_config, require_tool  # noqa: E402
from test_proxy import Backend, upstream_toml  # noqa: E402


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port



SITE_HEADERS = ('headers = { set = { "X-Content-Type-Options" = "nosniff" }, '
                'add = { "X-Site-Always" = "yes" }, always = true }\n')


class ResponseHeadersTestCase(ServerTestCase):
    def setUp(self):
        super().setUp()
        self.root, self.fpm, php_upstream = phpfpm.start_for(self)
        self.backend = Backend(self.tmp, "A").start()
        self.addCleanup(self.backend.kill)
        route_headers = ('headers = { set = { "X-Route" = "{name}", "Cache-Control" = "no-store" }, '
                         'remove = ["X-Backend", "X-Powered-By", "Server"] }\n')

        def rh(name):
            return route_headers.replace("{name}", name)

        top = (upstream_toml("app", [self.backend.address])
               + upstream_toml("dead", [f"127.0.0.1:{free_port()}"], tries=1)
               + php_upstream)
        routes = (
            '[[site.route]]\nprefix = "/ret"\nreturn = 200\nbody = "ret\\n"\n' + rh("return")
            + '[[site.route]]\nprefix = "/redirect"\nreturn = 302\nlocation = "/x"\n' + rh("redirect")
            + '[[site.route]]\nprefix = "/teapot"\nreturn = 418\n' + rh("teapot")
            + '[[site.route]]\nprefix = "/always/"\nreturn = 503\n'
              'headers = { add = { "X-Error-Too" = "1" }, always = true }\n'
            + '[[site.route]]\nregex = \'[^/]\\.php(/|$)\'\nfastcgi = "php"\n' + rh("fastcgi")
            + '[[site.route]]\nprefix = "/proxy/"\nproxy = "http://app"\n' + rh("proxy")
            + '[[site.route]]\nprefix = "/download"\nproxy = "http://app"\n' + rh("proxy")
            + '[[site.route]]\nprefix = "/down/"\nproxy = "http://dead"\n' + rh("down")
            + '[[site.route]]\nprefix = "/post-only/"\nmethods = ["POST"]\nreturn = 200\n' + rh("post")
            + '[[site.route]]\nprefix = "/"\n' + rh("static"))
        self.text = make_config(self.root, top=top, site=SITE_HEADERS, routes=routes)
        self.srv = self.start_config(h2c(self.text))
        self.port = self.srv.port

    # ---- clients ----

    def h1(self, method, path, body=b""):
        c = self.raw(self.port)
        r = c.request(method, path, body=body)
        c.close()
        return r.status, {k.lower(): v for k, v in r.headers}, [k.lower() for k, _ in r.headers]

    def h2(self, method, path):
        require_tool("curl", "curl")
        out = subprocess.run(["curl", "-sS", "--http2-prior-knowledge", "-X", method, "-D", "-",
                              "-o", "/dev/null", f"http://127.0.0.1:{self.port}{path}"],
                             capture_output=True, timeout=10, check=True).stdout.decode()
        lines = [line for line in out.split("\r\n") if line]
        status = int(lines[0].split()[1])
        headers = [tuple(part.strip() for part in line.split(":", 1)) for line in lines[1:]]
        return status, {k.lower(): v for k, v in headers}, [k.lower() for k, _ in headers]

    def both(self, method, path):
        for client in (self.h1, self.h2):
            yield client.__name__, client(method, path)

    # ---- success responses: site rules, then the route's ----

    def test_every_handler_gets_site_and_route_headers(self):
        cases = [("/hello.php", "fastcgi"), ("/proxy/x", "proxy"), ("/static.txt", "static"),
                 ("/ret", "return"), ("/redirect", "redirect")]
        for path, name in cases:
            for proto, (status, headers, names) in self.both("GET", path):
                with self.subTest(path=path, proto=proto):
                    self.assertLess(status, 400)
                    self.assertEqual(headers.get("x-route"), name)
                    self.assertEqual(headers.get("cache-control"), "no-store")
                    self.assertEqual(headers.get("x-content-type-options"), "nosniff")
                    self.assertEqual(headers.get("x-site-always"), "yes")
                    self.assertNotIn("server", headers)  # the server's own line, removed
                    self.assertIn("date", headers)
                    self.assertEqual(names.count("cache-control"), 1, "set replaces")
                    self.assertEqual(names.count("x-route"), 1)

    def test_remove_strips_what_the_back_end_and_php_send(self):
        for path in ("/proxy/x", "/hello.php"):
            for proto, (status, headers, _) in self.both("GET", path):
                with self.subTest(path=path, proto=proto):
                    self.assertEqual(status, 200)
                    self.assertNotIn("x-backend", headers)
                    self.assertNotIn("x-powered-by", headers)
        # Without the rule the back end's header arrives: the removal above is the rule's doing.
        r = self.raw(self.backend.port).request("GET", "/x")
        self.assertEqual(r.header("x-backend"), "A")

    def test_framing_survives_the_rules(self):
        # Content-Length, keep-alive and the body are the server's own, whatever the rules.
        c = self.raw(self.port)
        for _ in range(3):
            r = c.request("GET", "/static.txt")
            self.assertEqual(r.status, 200)
            self.assertEqual(r.header("x-route"), "static")
            self.assertEqual(int(r.header("content-length")), len(r.body))
        r = c.request("GET", "/download?bytes=100000&chunked=1")
        self.assertEqual((r.status, len(r.body)), (200, 100000))
        self.assertEqual(r.header("x-route"), "proxy")

    # ---- errors: only `always` rules ----

    def test_errors_get_only_always_rules(self):
        cases = [("GET", "/missing.txt", 404), ("GET", "/teapot", 418), ("GET", "/down/x", 502),
                 ("GET", "/post-only/", 405), ("PROPFIND", "/static.txt", 405),
                 ("GET", "/missing.php", 404)]
        for method, path, expected in cases:
            for proto, (status, headers, _) in self.both(method, path):
                with self.subTest(path=path, method=method, proto=proto):
                    self.assertEqual(status, expected)
                    self.assertEqual(headers.get("x-site-always"), "yes", "site: always")
                    self.assertEqual(headers.get("x-content-type-options"), "nosniff")
                    self.assertNotIn("x-route", headers, "route rules without always")
                    self.assertNotIn("cache-control", headers)
                    self.assertIn("server", headers, "the route's remove does not apply either")

    def test_route_always_reaches_its_error(self):
        for proto, (status, headers, _) in self.both("GET", "/always/x"):
            with self.subTest(proto=proto):
                self.assertEqual(status, 503)
                self.assertEqual(headers.get("x-error-too"), "1")
                self.assertEqual(headers.get("x-site-always"), "yes")

    def test_refused_request_gets_the_sites_always_rules(self):
        c = self.raw(self.port)
        c.send(b"GET /a/%00/b HTTP/1.1\r\nHost: localhost\r\n\r\n")
        r = c.read_response()
        self.assertEqual(r.status, 400)
        self.assertEqual(r.header("x-site-always"), "yes")


class ResponseHeadersWithoutAlwaysTestCase(ServerTestCase):
    def test_site_rules_without_always_skip_errors(self):
        root = self.make_root({"a.txt": "a\n"})
        srv = self.start_config(make_config(
            root, site='headers = { add = { "X-Frame-Options" = "DENY" } }\n'))
        ok = self.raw(srv.port).request("GET", "/a.txt")
        self.assertEqual(ok.header("x-frame-options"), "DENY")
        missing = self.raw(srv.port).request("GET", "/nope")
        self.assertEqual(missing.status, 404)
        self.assertIsNone(missing.header("x-frame-options"))

    def test_bad_rule_is_a_config_error(self):
        root = self.make_root({"a.txt": "a\n"})
        path = self.write_config(make_config(
            root, site='headers = { remove = ["Content-Length"] }\n'))
        from harness import PEREGRINE_BIN
        out = subprocess.run([PEREGRINE_BIN, "-t", "-c", path], capture_output=True, timeout=10)
        self.assertNotEqual(out.returncode, 0)
        self.assertIn(b"header 'Content-Length' is managed by the server", out.stderr)
        self.assertIn(b":", out.stderr.split(b"header")[0])  # file:line:col first


if __name__ == "__main__":
    main()
