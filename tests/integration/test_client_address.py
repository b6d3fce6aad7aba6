"""The real client address ([client_address], docs/access.md): X-Forwarded-For
and Forwarded believed only from trusted proxies, the right-most untrusted hop wins, spoofing
attempts from untrusted peers are ignored; the address reaches the access log, php-fpm's
REMOTE_ADDR and a proxied back end's X-Forwarded-For. Clients connect from several loopback
addresses (127.0.0.1 trusted, 127.0.0.2 not) by binding their source address.
"""

import json
import os
import socket
import sys

import phpfpm
from harness import HERE, PEREGRINE_BIN, ServerTestCase, main, make_config
import subprocess

sys.path.insert(0, HERE)
from test_proxy import Backend, upstream_toml  # noqa: E402


def read_all_json_lines(path):
    try:
        with open(path, "rb") as f:
            return [json.loads(line) for line in f.read().splitlines() if line.strip()]
    except FileNotFoundError:
        return []


def raw_get(port, headers, source="127.0.0.1", path="/hello.txt"):
    """One GET from `source`; returns (status, head text, body)."""
    s = socket.socket()
    s.settimeout(5)
    s.bind((source, 0))
    s.connect(("127.0.0.1", port))
    lines = [f"GET {path} HTTP/1.1", "Host: localhost", "Connection: close"]
    lines += [f"{k}: {v}" for k, v in headers]
    s.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    s.close()
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), head.decode(), body


class ClientAddressTest(ServerTestCase):
    def start(self, client_address, routes="", top=""):
        self.root = self.make_root({"hello.txt": "hello\n"})
        self.log_path = os.path.join(self.tmp, "access.log")
        text = make_config(self.root, top=f"{top}\n[client_address]\n{client_address}\n",
                           site='access_log_format = "json"', access_log=self.log_path,
                           routes=routes)
        return self.start_config(text)

    def logged_addresses(self, n):
        records = self.wait_for(
            lambda: (lambda r: r if len(r) >= n else None)(read_all_json_lines(self.log_path)),
            timeout=3.0, msg=f"{n} access log lines in {self.log_path}")
        return [r["remote_addr"] for r in records]

    def test_trusted_peer_gives_right_most_untrusted_hop(self):
        srv = self.start('trusted_proxies = ["127.0.0.1", "10.0.0.0/8"]')
        cases = [
            [("X-Forwarded-For", "203.0.113.7")],
            # a spoofed hop the client put in front: the proxy's own hop wins
            [("X-Forwarded-For", "6.6.6.6, 203.0.113.8")],
            [("X-Forwarded-For", "6.6.6.6, 203.0.113.9, 10.1.2.3")],
            # two header lines are one list
            [("X-Forwarded-For", "6.6.6.6"), ("X-Forwarded-For", "198.51.100.4")],
            [("X-Forwarded-For", "2001:db8::7")],
            [("X-Forwarded-For", "[2001:db8::8]:4711")],
            # every hop trusted: the left-most
            [("X-Forwarded-For", "10.0.0.5, 10.0.0.6")],
            # garbage after the real client: nothing usable, the peer stays
            [("X-Forwarded-For", "203.0.113.10, not-an-address")],
            [("X-Forwarded-For", "")],
            [],
            # the other header is not read in x-forwarded-for mode
            [("Forwarded", "for=203.0.113.11")],
        ]
        for headers in cases:
            status, _, _ = raw_get(srv.port, headers)
            self.assertEqual(status, 200, headers)
        self.assertEqual(self.logged_addresses(len(cases)), [
            "203.0.113.7", "203.0.113.8", "203.0.113.9", "198.51.100.4", "2001:db8::7",
            "2001:db8::8", "10.0.0.5", "127.0.0.1", "127.0.0.1", "127.0.0.1", "127.0.0.1"])

    def test_untrusted_peer_cannot_spoof(self):
        srv = self.start('trusted_proxies = ["127.0.0.1"]')
        raw_get(srv.port, [("X-Forwarded-For", "203.0.113.7")], source="127.0.0.2")
        raw_get(srv.port, [("X-Forwarded-For", "127.0.0.1")], source="127.0.0.2")
        raw_get(srv.port, [("X-Forwarded-For", "203.0.113.7")], source="127.0.0.1")
        self.assertEqual(self.logged_addresses(3), ["127.0.0.2", "127.0.0.2", "203.0.113.7"])

    def test_no_trusted_proxies_means_no_header_is_believed(self):
        srv = self.start('header = "x-forwarded-for"')
        raw_get(srv.port, [("X-Forwarded-For", "203.0.113.7")])
        self.assertEqual(self.logged_addresses(1), ["127.0.0.1"])

    def test_forwarded_header(self):
        srv = self.start('trusted_proxies = ["127.0.0.0/8"]\nheader = "forwarded"')
        cases = [
            [("Forwarded", "for=192.0.2.60;proto=http;by=203.0.113.43")],
            [("Forwarded", 'for="[2001:db8:cafe::17]:4711"')],
            [("Forwarded", "for=6.6.6.6, for=198.51.100.17;proto=https")],
            [("Forwarded", "for=_hidden")],  # obfuscated: the peer stays
            [("Forwarded", 'for="[2001:db8::1'), ],  # malformed: the peer stays
            [("X-Forwarded-For", "203.0.113.7")],  # not read in forwarded mode
        ]
        for headers in cases:
            self.assertEqual(raw_get(srv.port, headers)[0], 200)
        self.assertEqual(self.logged_addresses(len(cases)), [
            "192.0.2.60", "2001:db8:cafe::17", "198.51.100.17", "127.0.0.1", "127.0.0.1",
            "127.0.0.1"])

    def test_config_errors(self):
        root = self.make_root({})
        for body, fragment in [('trusted_proxies = ["10.0.0.1/8"]', "host bits"),
                               ('trusted_proxies = ["nonsense"]', "not an IPv4"),
                               ('header = "x-real-ip"', "one of"),
                               ('trusted = ["10.0.0.0/8"]', "trusted")]:
            path = self.write_config(make_config(root, top=f"[client_address]\n{body}\n"))
            r = subprocess.run([PEREGRINE_BIN, "-t", "-c", path], capture_output=True, text=True)
            self.assertNotEqual(r.returncode, 0, body)
            self.assertIn(fragment, r.stderr + r.stdout, body)
            self.assertRegex(r.stderr + r.stdout, r"peregrine\.toml:\d+:\d+: error", body)

    def test_proxied_back_end_sees_real_client(self):
        backend = Backend(self.tmp, "b1").start()
        self.addCleanup(backend.kill)
        srv = self.start('trusted_proxies = ["127.0.0.1"]',
                         routes='[[site.route]]\nprefix = "/echo"\nproxy = "http://app"\n',
                         top=upstream_toml("app", [backend.address]))
        status, _, body = raw_get(srv.port, [("X-Forwarded-For", "6.6.6.6, 203.0.113.7")],
                                  path="/echo")
        self.assertEqual(status, 200, body)
        echoed = json.loads(body)
        xff = [v for k, v in echoed["headers"] if k.lower() == "x-forwarded-for"]
        # the incoming chain is passed on and our hop is the real client
        self.assertEqual(xff, ["6.6.6.6, 203.0.113.7, 203.0.113.7"])
        real_ip = [v for k, v in echoed["headers"] if k.lower() == "x-real-ip"]
        if real_ip:
            self.assertEqual(real_ip, ["203.0.113.7"])
        # from an untrusted peer the spoofed chain is passed on, with the socket's address appended
        status, _, body = raw_get(srv.port, [("X-Forwarded-For", "203.0.113.7")], path="/echo",
                                  source="127.0.0.2")
        xff = [v for k, v in json.loads(body)["headers"] if k.lower() == "x-forwarded-for"]
        self.assertEqual(xff, ["203.0.113.7, 127.0.0.2"])

    def test_php_fpm_remote_addr(self):
        self.root, _, php_upstream = phpfpm.start_for(self, children=1)
        self.log_path = os.path.join(self.tmp, "access.log")
        top = (php_upstream + '\n[client_address]\ntrusted_proxies = ["127.0.0.1"]\n')
        routes = '[[site.route]]\nextension = "php"\nfastcgi = "php"\n'
        srv = self.start_config(make_config(self.root, top=top, routes=routes,
                                            access_log=self.log_path))
        status, _, body = raw_get(srv.port, [("X-Forwarded-For", "2001:db8::99, 203.0.113.70:4711")],
                                  path="/env.php")
        self.assertEqual(status, 200, body)
        server = json.loads(body)["server"]
        self.assertEqual(server["REMOTE_ADDR"], "203.0.113.70")
        self.assertEqual(server["REMOTE_PORT"], "4711")
        status, _, body = raw_get(srv.port, [("X-Forwarded-For", "203.0.113.70")],
                                  path="/env.php", source="127.0.0.2")
        self.assertEqual(json.loads(body)["server"]["REMOTE_ADDR"], "127.0.0.2")


if __name__ == "__main__":
    main()
