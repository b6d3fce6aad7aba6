"""ApacheBench against the server: no failed requests, every request kept alive with -k."""

import os
import re
import subprocess

from harness import STATIC_FALLBACK, ServerTestCase, main, make_config

INDEX = b"<!doctype html><title>bench</title>\n" + b"<p>" + b"x" * 900 + b"</p>\n"
ROUTES = """
[[site.route]]
exact = "/ping"
return = 200
body = "pong"
""" + STATIC_FALLBACK


def ab(args, timeout=120):
    r = subprocess.run(["ab"] + args, capture_output=True, text=True, timeout=timeout)
    return r


def field(out, name):
    m = re.search(rf"^{re.escape(name)}:\s+(\d+)", out, re.M)
    return int(m.group(1)) if m else None


class AbTest(ServerTestCase):
    def setUp(self):
        super().setUp()
        root = self.make_root({"index.html": INDEX, "large.bin": os.urandom(256 * 1024)})
        self.srv = self.start_config(make_config(root, routes=ROUTES, workers=2))
        self.base = f"http://127.0.0.1:{self.srv.port}"

    def check(self, r, n, keepalive):
        out = r.stdout
        self.assertEqual(r.returncode, 0, f"ab failed:\n{r.stderr}\n{out}")
        self.assertEqual(field(out, "Complete requests"), n, out)
        self.assertEqual(field(out, "Failed requests"), 0, out)
        self.assertNotIn("Non-2xx responses", out, out)
        if keepalive:
            self.assertEqual(field(out, "Keep-Alive requests"), n, out)

    def test_keepalive(self):
        r = ab(["-k", "-n", "2000", "-c", "50", self.base + "/index.html"])
        self.check(r, 2000, keepalive=True)
        self.assertEqual(field(r.stdout, "Document Length"), len(INDEX), r.stdout)

    def test_no_keepalive(self):
        r = ab(["-n", "2000", "-c", "50", self.base + "/index.html"])
        self.check(r, 2000, keepalive=False)

    def test_keepalive_return_route(self):
        r = ab(["-k", "-n", "2000", "-c", "50", self.base + "/ping"])
        self.check(r, 2000, keepalive=True)
        self.assertEqual(field(r.stdout, "Document Length"), 4)

    def test_keepalive_large_file(self):
        r = ab(["-k", "-n", "300", "-c", "10", self.base + "/large.bin"])
        self.check(r, 300, keepalive=True)
        self.assertEqual(field(r.stdout, "Document Length"), 256 * 1024)

    def test_head_requests(self):
        r = ab(["-k", "-i", "-n", "1000", "-c", "20", self.base + "/index.html"])
        self.check(r, 1000, keepalive=True)

    def test_still_healthy_after_load(self):
        ab(["-k", "-n", "1000", "-c", "100", self.base + "/index.html"])
        status, _, body = self.get(self.srv.port, "/index.html")
        self.assertEqual((status, body), (200, INDEX))


if __name__ == "__main__":
    main()
