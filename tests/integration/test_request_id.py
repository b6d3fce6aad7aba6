"""Request IDs ([request_id], docs/access.md): made per request (32 hex digits)
or passed on from the client when trusted and valid; they reach php-fpm (HTTP_X_REQUEST_ID), a
proxied back end (X-Request-Id), the response when asked, and the access log ($request_id).
"""

import json
import os
import re
import sys

import phpfpm
from harness import HERE, RawClient, ServerTestCase, main, make_config, q

sys.path.insert(0, HERE)
from test_proxy import Backend, upstream_toml  # noqa: E402

HEX32 = re.compile(r"^[0-9a-f]{32}$")


def read_lines(path):
    try:
        with open(path, "rb") as f:
            return [line.decode() for line in f.read().splitlines()]
    except FileNotFoundError:
        return []


class RequestIdTest(ServerTestCase):
    def start(self, request_id, routes="", top="", fmt="$request_id $status $uri"):
        self.root = self.make_root({"hello.txt": "hello\n"})
        self.log_path = os.path.join(self.tmp, "access.log")
        text = make_config(self.root, top=f"{top}\n[request_id]\n{request_id}\n",
                           site=f"access_log_format = {q(fmt)}", access_log=self.log_path,
                           routes=routes)
        return self.start_config(text)

    def lines(self, n):
        return self.wait_for(lambda: (lambda r: r if len(r) >= n else None)(read_lines(self.log_path)),
                             timeout=3.0, msg=f"{n} access log lines")

    def test_made_ids_are_unique_logged_and_echoed(self):
        srv = self.start("response = true")
        ids = []
        with RawClient(srv.port) as c:
            for _ in range(5):
                r = c.request("GET", "/hello.txt")
                self.assertEqual(r.status, 200)
                ids.append(r.header("X-Request-Id"))
        for i in ids:
            self.assertRegex(i, HEX32)
        self.assertEqual(len(set(ids)), 5)
        self.assertEqual([line.split()[0] for line in self.lines(5)], ids)

    def test_incoming_id_passed_only_when_trusted_and_valid(self):
        srv = self.start("response = true\ntrust_incoming = true")
        with RawClient(srv.port) as c:
            r = c.request("GET", "/hello.txt", headers={"X-Request-Id": "client-abc_123"})
            self.assertEqual(r.header("X-Request-Id"), "client-abc_123")
            r = c.request("GET", "/hello.txt", headers={"X-Request-Id": "bad id with spaces"})
            self.assertRegex(r.header("X-Request-Id"), HEX32)
            r = c.request("GET", "/hello.txt", headers={"X-Request-Id": "x" * 129})
            self.assertRegex(r.header("X-Request-Id"), HEX32)
        self.assertEqual(self.lines(3)[0].split()[0], "client-abc_123")

    def test_incoming_id_replaced_when_not_trusted(self):
        srv = self.start("response = true")
        with RawClient(srv.port) as c:
            r = c.request("GET", "/hello.txt", headers={"X-Request-Id": "client-abc"})
        self.assertRegex(r.header("X-Request-Id"), HEX32)
        self.assertEqual(len(r.header_all("X-Request-Id")), 1)

    def test_not_in_response_unless_asked(self):
        srv = self.start("")
        with RawClient(srv.port) as c:
            r = c.request("GET", "/hello.txt")
        self.assertIsNone(r.header("X-Request-Id"))
        self.assertRegex(self.lines(1)[0].split()[0], HEX32)

    def test_log_variable_alone_turns_ids_on(self):
        self.root = self.make_root({"hello.txt": "hello\n"})
        self.log_path = os.path.join(self.tmp, "access.log")
        srv = self.start_config(make_config(self.root, site='access_log_format = "$request_id"',
                                            access_log=self.log_path))
        with RawClient(srv.port) as c:
            c.request("GET", "/hello.txt")
        self.assertRegex(self.lines(1)[0], HEX32)

    def test_proxied_back_end_receives_the_id(self):
        backend = Backend(self.tmp, "b1").start()
        self.addCleanup(backend.kill)
        srv = self.start("response = true", top=upstream_toml("app", [backend.address]),
                         routes='[[site.route]]\nprefix = "/echo"\nproxy = "http://app"\n')
        with RawClient(srv.port) as c:
            r = c.request("GET", "/echo", headers={"X-Request-Id": "spoofed"})
        self.assertEqual(r.status, 200, r)
        sent = [v for k, v in json.loads(r.body)["headers"] if k.lower() == "x-request-id"]
        self.assertEqual(sent, [r.header("X-Request-Id")])
        self.assertRegex(sent[0], HEX32)
        self.assertEqual(self.lines(1)[0].split()[0], sent[0])

    def test_php_fpm_receives_the_id(self):
        root, _, php_upstream = phpfpm.start_for(self, children=1)
        self.log_path = os.path.join(self.tmp, "access.log")
        top = (php_upstream + '\n[request_id]\ntrust_incoming = true\n')
        srv = self.start_config(make_config(
            root, top=top, routes='[[site.route]]\nextension = "php"\nfastcgi = "php"\n',
            site='access_log_format = "$request_id $upstream_status"', access_log=self.log_path))
        with RawClient(srv.port) as c:
            r = c.request("GET", "/env.php")
            r2 = c.request("GET", "/env.php", headers={"X-Request-Id": "trace-77"})
        made = json.loads(r.body)["server"]["HTTP_X_REQUEST_ID"]
        self.assertRegex(made, HEX32)
        self.assertEqual(json.loads(r2.body)["server"]["HTTP_X_REQUEST_ID"], "trace-77")
        self.assertEqual(self.lines(2), [f"{made} 200", "trace-77 200"])


if __name__ == "__main__":
    main()
