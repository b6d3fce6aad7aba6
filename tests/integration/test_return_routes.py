"""`return` routes: fixed bodies, redirects (301/302/307/308) with $1..$9 regex captures and $uri,
route matching kinds (exact, prefix, extension, regex), first-match order, methods."""

from harness import STATIC_FALLBACK, ServerTestCase, main, make_config

ROUTES = r"""
[[site.route]]
exact = "/hello"
return = 200
body = "hello world"

[[site.route]]
exact = "/json"
return = 200
body = '{"ok": true}'
content_type = "application/json"

[[site.route]]
exact = "/teapot"
return = 418
body = "short and stout"

[[site.route]]
exact = "/gone"
return = 410
body = "gone"

[[site.route]]
exact = "/empty"
return = 204

[[site.route]]
exact = "/moved"
return = 301
location = "https://example.com/new-home"

[[site.route]]
exact = "/found"
return = 302
location = "/target"

[[site.route]]
exact = "/temp"
return = 307
location = "/temp-target"

[[site.route]]
exact = "/perm"
return = 308
location = "/perm-target"

[[site.route]]
regex = "^/old/(.*)$"
return = 301
location = "/new/$1"

[[site.route]]
regex = "^/u/([a-z]+)/([0-9]+)$"
return = 302
location = "/users/$2/$1"

[[site.route]]
prefix = "/legacy/"
return = 308
location = "https://example.org$uri"

[[site.route]]
extension = "php"
return = 403
body = "no php here"

[[site.route]]
prefix = "/api/"
methods = ["POST"]
return = 201
body = "created"

[[site.route]]
exact = "/order"
return = 200
body = "first"

[[site.route]]
prefix = "/order"
return = 200
body = "second"
""" + STATIC_FALLBACK


class ReturnRoutesTest(ServerTestCase):
    def setUp(self):
        super().setUp()
        root = self.make_root({"index.html": b"<p>static index</p>\n", "file.txt": b"static file\n"})
        self.srv = self.start_config(make_config(root, routes=ROUTES))
        self.port = self.srv.port

    def test_fixed_body(self):
        c = self.raw(self.port)
        r = c.request("GET", "/hello")
        self.assertEqual(r.status, 200)
        self.assertEqual(r.body, b"hello world")
        self.assertEqual(r.header("content-length"), "11")
        self.assertTrue((r.header("content-type") or "").startswith("text/plain"), r)

    def test_content_type(self):
        status, headers, body = self.get(self.port, "/json")
        self.assertEqual((status, body), (200, b'{"ok": true}'))
        self.assertEqual(headers["Content-Type"].split(";")[0], "application/json")

    def test_other_statuses(self):
        self.assertEqual(self.get(self.port, "/teapot")[::2], (418, b"short and stout"))
        self.assertEqual(self.get(self.port, "/gone")[::2], (410, b"gone"))
        c = self.raw(self.port)
        r = c.request("GET", "/empty")
        self.assertEqual(r.status, 204)
        self.assertIsNone(r.header("transfer-encoding"))
        self.assertIn(r.header("content-length"), (None, "0"))
        self.assertEqual(c.request("GET", "/hello").body, b"hello world", "bytes after a 204")

    def test_head(self):
        c = self.raw(self.port)
        r = c.request("HEAD", "/hello")
        self.assertEqual((r.status, r.header("content-length")), (200, "11"))
        self.assertEqual(c.request("GET", "/hello").body, b"hello world", "HEAD sent a body")

    def test_redirects(self):
        cases = {
            "/moved": (301, "https://example.com/new-home"),
            "/found": (302, "/target"),
            "/temp": (307, "/temp-target"),
            "/perm": (308, "/perm-target"),
        }
        for path, (status, location) in cases.items():
            got_status, headers, _ = self.get(self.port, path)
            self.assertEqual(got_status, status, path)
            self.assertEqual(headers.get("Location"), location, path)

    def test_regex_captures(self):
        cases = {
            "/old/page.html": "/new/page.html",
            "/old/a/b/c": "/new/a/b/c",
            "/old/": "/new/",
            "/u/alice/42": "/users/42/alice",
        }
        for path, location in cases.items():
            status, headers, _ = self.get(self.port, path)
            self.assertIn(status, (301, 302), path)
            self.assertEqual(headers.get("Location"), location, path)
        # No match (digits required): falls through to static files.
        self.assertEqual(self.get(self.port, "/u/alice/bob")[0], 404)

    def test_uri_variable(self):
        status, headers, _ = self.get(self.port, "/legacy/x/y.html")
        self.assertEqual(status, 308)
        self.assertEqual(headers.get("Location"), "https://example.org/legacy/x/y.html")

    def test_redirect_with_curl_follow(self):
        import subprocess
        r = subprocess.run(["curl", "-s", "-L", "-o", "/dev/null", "-w", "%{http_code} %{url_effective}",
                            f"http://127.0.0.1:{self.port}/found"], capture_output=True, timeout=20, text=True)
        self.assertEqual(r.stdout, f"404 http://127.0.0.1:{self.port}/target")

    def test_extension_route(self):
        for path in ("/index.php", "/a/b/c.php"):
            self.assertEqual(self.get(self.port, path)[::2], (403, b"no php here"), path)
        self.assertEqual(self.get(self.port, "/file.txt")[::2], (200, b"static file\n"))
        self.assertEqual(self.get(self.port, "/php")[0], 404)

    def test_methods(self):
        self.assertEqual(self.http(self.port, "POST", "/api/items", body=b"{}")[::2], (201, b"created"))
        status, headers, _ = self.get(self.port, "/api/items")
        self.assertEqual(status, 405)
        self.assertIn("POST", [m.strip() for m in headers.get("Allow", "").split(",")])

    def test_first_match_wins(self):
        self.assertEqual(self.get(self.port, "/order")[::2], (200, b"first"))
        self.assertEqual(self.get(self.port, "/orderly")[::2], (200, b"second"))
        self.assertEqual(self.get(self.port, "/order/x")[::2], (200, b"second"))

    def test_matching_uses_decoded_path(self):
        self.assertEqual(self.get(self.port, "/hel%6co")[::2], (200, b"hello world"))
        self.assertEqual(self.get(self.port, "/x/../hello")[::2], (200, b"hello world"))

    def test_query_does_not_affect_exact_match(self):
        self.assertEqual(self.get(self.port, "/hello?x=1")[::2], (200, b"hello world"))

    def test_static_fallthrough(self):
        self.assertEqual(self.get(self.port, "/")[::2], (200, b"<p>static index</p>\n"))
        self.assertEqual(self.get(self.port, "/hello/")[0], 404)


if __name__ == "__main__":
    main()
