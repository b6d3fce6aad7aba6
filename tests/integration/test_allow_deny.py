"""Allow and deny by client address (issue 17, item 2): ordered rules per site and per route, the
first match wins, 403 for a refusal, for IPv4 and IPv6. Clients bind their sockets to different
addresses of 127.0.0.0/8 (and ::1) so the server sees several peers."""

import http.client
import os
import socket
import subprocess
import unittest

import harness
from harness import ServerTestCase


def status_from(port, path, source, host="127.0.0.1"):
    conn = http.client.HTTPConnection(host, port, timeout=5, source_address=(source, 0))
    try:
        conn.request("GET", path, headers={"Host": "localhost"})
        resp = conn.getresponse()
        resp.read()
        return resp.status
    finally:
        conn.close()


def have_ipv6_loopback():
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


class AllowDenyTest(ServerTestCase):
    def start(self, site="", routes="", listen=None):
        root = self.make_root({"index.html": "home\n", "admin/index.html": "admin\n",
                               "open/index.html": "open\n", "f.txt": "file\n"})
        text = harness.make_config(root, workers=2, site=site, routes=routes + harness.STATIC_FALLBACK)
        if listen:
            text = text.replace('listen = ["127.0.0.1:0"]', listen)
        return self.start_config(text)

    def test_route_rules_first_match_wins_ipv4(self):
        srv = self.start(routes='''
[[site.route]]
prefix = "/admin/"
access = [ { deny = "127.0.0.3" }, { allow = "127.0.0.0/24" }, { deny = "all" } ]
''')
        self.assertEqual(status_from(srv.port, "/admin/", "127.0.0.2"), 200)
        self.assertEqual(status_from(srv.port, "/admin/", "127.0.0.3"), 403, "denied before the allow")
        self.assertEqual(status_from(srv.port, "/admin/", "127.0.1.2"), 403, "'all' catches the rest")
        # Other routes have no rules.
        self.assertEqual(status_from(srv.port, "/f.txt", "127.0.0.3"), 200)
        self.assertEqual(status_from(srv.port, "/f.txt", "127.0.1.2"), 200)

    def test_allow_first_then_deny_all_reversed_order_differs(self):
        srv = self.start(routes='''
[[site.route]]
prefix = "/admin/"
access = [ { deny = "all" }, { allow = "127.0.0.2" } ]
''')
        self.assertEqual(status_from(srv.port, "/admin/", "127.0.0.2"), 403,
                         "deny all comes first, so the allow never matches")

    def test_site_rules_cover_routes_and_404_and_routes_replace_them(self):
        srv = self.start(site='access = [ { deny = "127.0.0.4" } ]', routes='''
[[site.route]]
prefix = "/open/"
access = [ { allow = "all" } ]
''')
        self.assertEqual(status_from(srv.port, "/f.txt", "127.0.0.4"), 403)
        self.assertEqual(status_from(srv.port, "/missing", "127.0.0.4"), 403)
        self.assertEqual(status_from(srv.port, "/f.txt", "127.0.0.2"), 200)
        self.assertEqual(status_from(srv.port, "/missing", "127.0.0.2"), 404)
        self.assertEqual(status_from(srv.port, "/open/", "127.0.0.4"), 200,
                         "the route's own rules replace the site's")

    def test_site_rules_cover_404_without_routes(self):
        # A site with no declared routes but a root gets the implicit "/" route: it inherits.
        root = self.make_root({"f.txt": "file\n"})
        text = harness.make_config(root, workers=2, site='access = [ { deny = "127.0.0.5" } ]')
        srv = self.start_config(text)
        self.assertEqual(status_from(srv.port, "/f.txt", "127.0.0.5"), 403)
        self.assertEqual(status_from(srv.port, "/nothing", "127.0.0.5"), 403)
        self.assertEqual(status_from(srv.port, "/f.txt", "127.0.0.6"), 200)

    def test_ipv6(self):
        if not have_ipv6_loopback():
            self.skipTest("no IPv6 loopback")
        srv = self.start(listen='listen = ["127.0.0.1:0", "[::1]:0"]', routes='''
[[site.route]]
prefix = "/admin/"
access = [ { allow = "::1/128" }, { deny = "all" } ]

[[site.route]]
prefix = "/open/"
access = [ { deny = "::/0" }, { allow = "127.0.0.0/8" } ]
''')
        port6 = srv.listening_port("[::1]")
        self.assertEqual(status_from(port6, "/admin/", "::1", host="::1"), 200)
        self.assertEqual(status_from(srv.port, "/admin/", "127.0.0.2"), 403)
        self.assertEqual(status_from(port6, "/open/", "::1", host="::1"), 403)
        self.assertEqual(status_from(srv.port, "/open/", "127.0.0.2"), 200)

    def test_config_errors_name_the_place(self):
        root = self.make_root({"f.txt": "x"})
        path = self.write_config(harness.make_config(
            root, site='access = [ { allow = "10.0.0.1/8" } ]'))
        out = subprocess.run([harness.PEREGRINE_BIN, "-t", "-c", path], capture_output=True,
                             text=True, timeout=10)
        self.assertNotEqual(out.returncode, 0)
        self.assertRegex(out.stderr + out.stdout, r"peregrine\.toml:\d+:\d+: error: invalid network")


if __name__ == "__main__":
    harness.main()
