"""Custom access-log formats (access_log_format with $variables, docs/configuration.md): each
variable's value for real requests (static, proxied, HTTP/1.0 and 1.1, keep-alive), default
escaping against forged lines, JSON escaping, and config errors with file:line:col and a hint.
"""

import json
import os
import re
import subprocess
import sys
import time

from harness import HERE, PEREGRINE_BIN, RawClient, ServerTestCase, main, make_config, q

sys.path.insert(0, HERE)
from test_proxy import Backend, upstream_toml  # noqa: E402


def read_lines(path):
    try:
        with open(path, "rb") as f:
            return [line.decode() for line in f.read().splitlines()]
    except FileNotFoundError:
        return []


ALL = ("$remote_addr|$remote_port|$remote_user|$realip_remote_addr|$time_local|$time_iso8601|"
       "$request|$request_method|$request_uri|$uri|$args|$server_protocol|$status|"
       "$body_bytes_sent|$bytes_sent|$request_length|$request_time|$upstream_addr|"
       "$upstream_status|$upstream_response_time|$http_user_agent|$http_x_custom_thing|"
       "$sent_http_content_type|$host|$tls_version|$tls_cipher|$connection|$connection_requests")
NAMES = [n.lstrip("$") for n in ALL.split("|")]


class LogFormatTest(ServerTestCase):
    def start(self, fmt, routes="", top="", escape=None):
        self.root = self.make_root({"hello.txt": "hello\n", "dir/a b.txt": "spaced\n"})
        self.log_path = os.path.join(self.tmp, "access.log")
        site = f"access_log_format = {q(fmt)}\n"
        if escape:
            site += f"access_log_escape = {q(escape)}\n"
        return self.start_config(make_config(self.root, top=top, site=site, routes=routes,
                                             access_log=self.log_path))

    def lines(self, n):
        return self.wait_for(lambda: (lambda r: r if len(r) >= n else None)(read_lines(self.log_path)),
                             timeout=3.0, msg=f"{n} access log lines")

    def test_every_variable_for_a_static_request(self):
        srv = self.start(ALL)
        with RawClient(srv.port) as c:
            req = (b"GET /dir/a%20b.txt?x=1&y=2 HTTP/1.1\r\nHost: localhost\r\n"
                   b"User-Agent: it/1.0\r\nX-Custom-Thing: yes\r\n\r\n")
            c.send(req)
            r1 = c.read_response()
            c.send(b"GET /hello.txt HTTP/1.1\r\nHost: localhost\r\n\r\n")
            r2 = c.read_response()
        self.assertEqual((r1.status, r2.status), (200, 200))
        first, second = self.lines(2)
        v = dict(zip(NAMES, first.split("|")))
        self.assertEqual(v["remote_addr"], "127.0.0.1")
        self.assertRegex(v["remote_port"], r"^\d+$")
        self.assertEqual(v["remote_user"], "-")
        self.assertEqual(v["realip_remote_addr"], "127.0.0.1")
        self.assertRegex(v["time_local"], r"^\d\d/\w{3}/\d{4}:\d\d:\d\d:\d\d \+0000$")
        self.assertRegex(v["time_iso8601"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00$")
        self.assertEqual(v["request"], "GET /dir/a%20b.txt?x=1&y=2 HTTP/1.1")
        self.assertEqual(v["request_method"], "GET")
        self.assertEqual(v["request_uri"], "/dir/a%20b.txt?x=1&y=2")
        self.assertEqual(v["uri"], "/dir/a b.txt")
        self.assertEqual(v["args"], "x=1&y=2")
        self.assertEqual(v["server_protocol"], "HTTP/1.1")
        self.assertEqual(v["status"], "200")
        self.assertEqual(v["body_bytes_sent"], "7")
        self.assertEqual(int(v["bytes_sent"]), len(r1.head_bytes) + 7)
        self.assertEqual(int(v["request_length"]), len(req))
        self.assertRegex(v["request_time"], r"^\d+\.\d{3}$")
        self.assertEqual((v["upstream_addr"], v["upstream_status"], v["upstream_response_time"]),
                         ("-", "-", "-"))
        self.assertEqual(v["http_user_agent"], "it/1.0")
        self.assertEqual(v["http_x_custom_thing"], "yes")
        self.assertEqual(v["sent_http_content_type"], r1.header("Content-Type"))
        self.assertEqual(v["host"], "localhost")
        self.assertEqual((v["tls_version"], v["tls_cipher"]), ("-", "-"))
        self.assertRegex(v["connection"], r"^\d+$")
        self.assertEqual(v["connection_requests"], "1")
        w = dict(zip(NAMES, second.split("|")))
        self.assertEqual(w["connection"], v["connection"])
        self.assertEqual(w["connection_requests"], "2")
        self.assertEqual(w["args"], "-")
        self.assertEqual(w["http_x_custom_thing"], "-")

    def test_upstream_variables(self):
        backend = Backend(self.tmp, "b1").start()
        self.addCleanup(backend.kill)
        srv = self.start("$upstream_addr $upstream_status $upstream_response_time $status",
                         top=upstream_toml("app", [backend.address]),
                         routes='[[site.route]]\nprefix = "/echo"\nproxy = "http://app"\n'
                                '[[site.route]]\nprefix = "/"\n')
        with RawClient(srv.port) as c:
            self.assertEqual(c.request("GET", "/echo").status, 200)
            self.assertEqual(c.request("GET", "/hello.txt").status, 200)
        proxied, static = self.lines(2)
        addr, status, seconds, final = proxied.split()
        self.assertEqual((addr, status, final), (backend.address, "200", "200"))
        self.assertRegex(seconds, r"^\d+\.\d{3}$")
        self.assertEqual(static, "- - - 200")

    def test_default_escaping_cannot_forge_a_line(self):
        srv = self.start('"$http_user_agent" $status')
        with RawClient(srv.port) as c:
            c.send(b'GET /hello.txt HTTP/1.1\r\nHost: x\r\nUser-Agent: a"b\\c\xe9d\r\n\r\n')
            self.assertEqual(c.read_response().status, 200)
        line = self.lines(1)[0]
        self.assertEqual(line, '"a\\x22b\\x5Cc\\xE9d" 200')

    def test_json_escaping(self):
        srv = self.start('{"ua":"$http_user_agent","uri":"$request_uri","status":$status}',
                         escape="json")
        with RawClient(srv.port) as c:
            c.request("GET", "/hello.txt?q=%22", headers={"User-Agent": 'x"y\\z\ttab'})
        record = json.loads(self.lines(1)[0])
        self.assertEqual(record, {"ua": 'x"y\\z\ttab', "uri": "/hello.txt?q=%22", "status": 200})

    def test_http10_and_presets_unchanged(self):
        srv = self.start("$server_protocol $request")
        with RawClient(srv.port) as c:
            c.send(b"GET /hello.txt HTTP/1.0\r\n\r\n")
            c.read_response()
        self.assertEqual(self.lines(1)[0], "HTTP/1.0 GET /hello.txt HTTP/1.0")

    def test_unknown_variable_is_a_config_error(self):
        root = self.make_root({})
        path = self.write_config(make_config(root, site='access_log_format = "$status $remote_adr"'))
        r = subprocess.run([PEREGRINE_BIN, "-t", "-c", path], capture_output=True, text=True)
        self.assertNotEqual(r.returncode, 0)
        out = r.stdout + r.stderr
        self.assertRegex(out, r"peregrine\.toml:\d+:30: error: unknown access log variable "
                              r"\$remote_adr \(hint: did you mean \$remote_addr\?\)")


if __name__ == "__main__":
    main()
