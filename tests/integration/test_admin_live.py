"""The admin's run-time endpoints (issue 14, item 3): drain, disable and enable an upstream
server against real back ends (backends/http_backend.py) and see it in /api/upstreams and
/metrics; the routes table and route-test answered by the real route table; the live log tail as
server-sent events (an access line, an error line, the filter, a reader that never reads).
"""

import http.client
import json
import os
import signal
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import HERE, main, make_config, q  # noqa: E402

sys.path.insert(0, HERE)
from test_metrics import ADMIN_RE, TOKEN, MetricsTestCase, parse_prometheus  # noqa: E402
from test_proxy import Backend, upstream_toml  # noqa: E402

class LiveCase(MetricsTestCase):
    def start_admin_config(self, upstreams="", routes="", extra_sites="", access_log="off"):
        top = (upstreams + "\n[admin]\nlisten = \"127.0.0.1:0\"\n"
               f"token_file = {q(self.token_path)}\n")
        text = make_config(self.root, top=top, routes=routes, workers=2, hosts=("a.test",),
                           extra_sites=extra_sites, access_log=access_log)
        srv = self.start_config(text)
        self.wait_for(lambda: ADMIN_RE.search(srv._read(srv.log_path)), msg="admin listener")
        srv.admin_port = int(ADMIN_RE.search(srv._read(srv.log_path)).group(1))
        return srv

    def backend(self, ident, extra=()):
        b = Backend(self.tmp, ident, extra=extra).start()
        self.addCleanup(b.kill)
        return b

    def admin(self, srv, method, path, token=TOKEN):
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        status, _, body = self.http(srv.admin_port, method, path, headers=headers)
        return status, (json.loads(body) if body.startswith(b"{") else body)

    def backend_of(self, port, path="/"):
        status, headers, _ = self.get(port, path, {"Host": "a.test"})
        self.assertEqual(status, 200)
        return headers["X-Backend"]

    def server(self, srv, address):
        status, body = self.admin(srv, "GET", "/api/upstreams")
        self.assertEqual(status, 200, body)
        for group in body["upstreams"]:
            for s in group["servers"]:
                if s["address"] == address:
                    return s
        self.fail(f"{address} not in {body}")

    def metric_state(self, srv, address):
        families = parse_prometheus(self.metrics(srv))
        states = [s.labels["state"] for s in families["peregrine_upstream_server_state"].samples
                  if s.labels["server"] == address and s.value == 1]
        self.assertEqual(len(states), 1, states)
        return states[0]


class UpstreamControl(LiveCase):
    def start_two(self):
        a, b = self.backend("A"), self.backend("B")
        srv = self.start_with_admin(upstream_toml("app", [a.address, b.address]),
                                    '[[site.route]]\nprefix = "/"\nproxy = "http://app"\n')
        return a, b, srv

    def test_drain_then_disable_then_enable(self):
        a, b, srv = self.start_two()
        port = srv.port
        seen = {self.backend_of(port) for _ in range(10)}
        self.assertEqual(seen, {"A", "B"})
        self.assertEqual(self.server(srv, a.address)["state"], "up")

        # Requests in flight on A when it is drained finish there.
        results = []

        def slow():
            results.append(self.get(port, "/slow?ms=1500", {"Host": "a.test"}))
        threads = [threading.Thread(target=slow) for _ in range(6)]
        for t in threads:
            t.start()
        self.wait_for(lambda: a.stats()["by_path"].get("/slow", 0) >= 1, timeout=5,
                      msg="a slow request on A")
        status, body = self.admin(srv, "POST", f"/api/upstreams/app/servers/{a.address}/drain")
        self.assertEqual(status, 200, body)
        self.assertEqual(body["address"], a.address)
        self.assertEqual(body["state"], "drained")
        self.assertGreaterEqual(body["in_flight"], 1)
        # Slow requests routed to A before the drain may still be arriving: count the others.
        def a_not_slow():
            stats = a.stats()
            return stats["requests"] - stats["by_path"].get("/slow", 0)
        a_before = a_not_slow()
        for _ in range(20):
            self.assertEqual(self.backend_of(port), "B")
        self.assertEqual(a_not_slow(), a_before)
        for t in threads:
            t.join(10)
        self.assertEqual(len(results), 6)
        self.assertTrue(all(r[0] == 200 for r in results), [r[0] for r in results])
        self.assertIn("A", {r[1]["X-Backend"] for r in results})
        self.assertEqual(self.server(srv, a.address)["state"], "drained")
        self.wait_for(lambda: self.metric_state(srv, a.address) == "drained", msg="metric state")
        self.assertEqual(self.server(srv, a.address)["in_flight"], 0)

        # Disable: still no requests, and A's pooled connections are closed.
        status, body = self.admin(srv, "POST", f"/api/upstreams/app/servers/{a.address}/disable")
        self.assertEqual((status, body["state"]), (200, "disabled"))
        self.wait_for(lambda: a.stats()["active"] == 0, timeout=5, msg="A's pool closed")
        for _ in range(10):
            self.assertEqual(self.backend_of(port), "B")
        self.wait_for(lambda: self.metric_state(srv, a.address) == "disabled", msg="disabled")
        self.assertEqual(self.metric_state(srv, b.address), "up")

        # Enable: A takes requests again.
        status, body = self.admin(srv, "POST", f"/api/upstreams/app/servers/{a.address}/enable")
        self.assertEqual((status, body["state"]), (200, "up"))
        self.wait_for(lambda: "A" in {self.backend_of(port) for _ in range(6)}, msg="A back")
        self.assertEqual(self.metric_state(srv, a.address), "up")
        s = self.server(srv, a.address)
        self.assertGreater(s["requests"], 0)
        self.assertEqual(s["history"], [])
        self.assertIsNone(s["last_check"])

    def test_all_drained_is_a_502_and_state_survives_reload(self):
        a, b, srv = self.start_two()
        for x in (a, b):
            self.assertEqual(self.admin(srv, "POST",
                                        f"/api/upstreams/app/servers/{x.address}/drain")[0], 200)
        self.wait_for(lambda: self.get(srv.port, "/", {"Host": "a.test"})[0] == 502,
                      msg="502 with every server drained")
        self.admin(srv, "POST", f"/api/upstreams/app/servers/{b.address}/enable")
        os.kill(srv.pid, signal.SIGHUP)
        self.wait_for(lambda: self.stats(srv)["generation"] == 2, msg="reload")
        for _ in range(6):
            self.assertEqual(self.backend_of(srv.port), "B")
        self.assertEqual(self.server(srv, a.address)["state"], "drained")
        self.assertEqual(self.metric_state(srv, a.address), "drained")

    def test_health_history(self):
        a, b = self.backend("A"), self.backend("B")
        health = {"path": "/health", "interval": "200ms", "timeout": "1s", "rise": 1, "fall": 1}
        srv = self.start_with_admin(upstream_toml("app", [a.address, b.address],
                                                  health_check=health),
                                    '[[site.route]]\nprefix = "/"\nproxy = "http://app"\n')
        self.wait_for(lambda: len(self.server(srv, b.address)["history"]) >= 4, timeout=5,
                      msg="health checks recorded")
        s = self.server(srv, b.address)
        self.assertTrue(s["last_check"]["ok"])
        self.assertTrue(all(h["ok"] for h in s["history"]), s["history"])
        times = [h["time"] for h in s["history"]]
        self.assertEqual(times, sorted(times, reverse=True))
        self.assertLessEqual(abs(times[0] - time.time()), 5)
        b.set_healthy(False)
        self.wait_for(lambda: self.server(srv, b.address)["state"] == "down", timeout=5,
                      msg="B down after its failed check")
        s = self.server(srv, b.address)
        self.assertFalse(s["last_check"]["ok"])
        self.assertFalse(s["history"][0]["ok"])
        self.assertLessEqual(len(s["history"]), 16)
        self.assertEqual(self.metric_state(srv, b.address), "down")
        # A drained server that fails its checks shows what the operator set.
        self.admin(srv, "POST", f"/api/upstreams/app/servers/{b.address}/drain")
        self.assertEqual(self.server(srv, b.address)["state"], "drained")

    def test_bad_requests(self):
        a, b, srv = self.start_two()
        base = f"/api/upstreams/app/servers/{a.address}"
        self.assertEqual(self.admin(srv, "POST", base + "/drain", token=None)[0], 401)
        self.assertEqual(self.admin(srv, "POST", base + "/drain", token="wrong")[0], 401)
        self.assertEqual(self.admin(srv, "GET", base + "/drain")[0], 405)
        status, body = self.admin(srv, "POST", base + "/pause")
        self.assertEqual(status, 404)
        self.assertIn("drain, disable or enable", body["error"])
        status, body = self.admin(srv, "POST", "/api/upstreams/nope/servers/1.2.3.4:5/drain")
        self.assertEqual(status, 404)
        self.assertIn("no upstream group", body["error"])
        status, body = self.admin(srv, "POST", "/api/upstreams/app/servers/127.0.0.1:1/drain")
        self.assertEqual(status, 404)
        self.assertIn("has no server", body["error"])
        self.assertEqual(self.admin(srv, "POST", "/api/upstreams/app/x")[0], 404)
        self.assertEqual(self.admin(srv, "POST", "/api/upstreams")[0], 405)
        self.assertEqual(self.admin(srv, "GET", "/api/upstreams", token=None)[0], 401)
        self.assertEqual(self.server(srv, a.address)["state"], "up")


class Routes(LiveCase):
    ROUTES = ('[[site.route]]\nexact = "/old"\nreturn = 301\nlocation = "/new"\n\n'
              '[[site.route]]\nprefix = "/api/"\nmethods = ["GET"]\nproxy = "http://app"\n\n'
              '[[site.route]]\nextension = "txt"\n')

    def test_routes_and_route_test(self):
        a = self.backend("A")
        # c.test has no root, so no implicit catch-all route: its unmatched paths are the route
        # table's own 404.
        c_test = ('[[site]]\nhosts = ["c.test"]\n\n'
                  '[[site.route]]\nexact = "/only"\nreturn = 204\n')
        srv = self.start_admin_config(upstream_toml("app", [a.address]), self.ROUTES, c_test)
        status, body = self.admin(srv, "GET", "/api/routes")
        self.assertEqual(status, 200, body)
        sites = body["sites"]
        self.assertEqual([s["names"] for s in sites], [["a.test"], ["c.test"]])
        self.assertEqual(sites[0]["listen"], ["127.0.0.1:0"])
        routes = sites[0]["routes"]
        # The site's root serves what no declared route takes: one implicit static route, last.
        self.assertEqual([r["match"] for r in routes],
                         ["exact /old", "prefix /api/", "extension txt", "prefix /"])
        self.assertEqual([r["handler"] for r in routes], ["return", "proxy", "static", "static"])
        self.assertEqual(routes[3]["target"], self.root)
        self.assertEqual(routes[0]["target"], "301 /new")
        self.assertEqual(routes[1]["target"], "http://app")
        self.assertEqual(routes[1]["methods"], ["GET"])

        def test(host, path, method="GET"):
            qs = f"host={host}&path={path.replace('?', '%3F')}&method={method}"
            status, body = self.admin(srv, "GET", "/api/route-test?" + qs)
            self.assertEqual(status, 200, body)
            return body

        r = test("a.test", "/old")
        self.assertEqual((r["site"], r["route"], r["match"], r["handler"], r["status"]),
                         (0, 0, "exact /old", "return", 301))
        r = test("a.test", "/api/users?id=1")
        self.assertEqual((r["route"], r["handler"], r["target"], r["status"]),
                         (1, "proxy", "http://app", None))
        r = test("a.test", "/api/users", "POST")
        self.assertEqual((r["route"], r["status"], r["allow"]), (1, 405, "GET"))
        r = test("a.test", "/nothing")
        self.assertEqual((r["site"], r["route"], r["match"], r["status"]),
                         (0, 3, "prefix /", None))
        r = test("A.TEST:8080", "/x/readme.txt")
        self.assertEqual((r["site"], r["route"], r["handler"]), (0, 2, "static"))
        r = test("c.test", "/nothing")
        self.assertEqual((r["site"], r["site_names"], r["route"], r["status"]),
                         (1, ["c.test"], None, 404))
        r = test("c.test", "/only", "DELETE")
        self.assertEqual((r["route"], r["status"]), (0, 204))
        r = test("unknown.test", "/old")  # the default site
        self.assertEqual((r["site"], r["route"], r["status"]), (0, 0, 301))
        r = test("c.test", "/a/%2e%2e/only")  # normalized as a real request is
        self.assertEqual((r["route"], r["status"]), (0, 204))
        r = test("c.test", "/a/../../x")
        self.assertEqual((r["route"], r["status"]), (None, 400))
        # The real table agrees: the same questions asked of the server itself.
        self.assertEqual(self.get(srv.port, "/old", {"Host": "a.test"})[0], 301)
        self.assertEqual(self.http(srv.port, "POST", "/api/users",
                                   headers={"Host": "a.test"}, body=b"")[0], 405)
        self.assertEqual(self.get(srv.port, "/nothing", {"Host": "c.test"})[0], 404)
        self.assertEqual(self.get(srv.port, "/a/%2e%2e/only", {"Host": "c.test"})[0], 204)

        status, body = self.admin(srv, "GET", "/api/route-test?host=a.test")
        self.assertEqual(status, 400)
        self.assertIn("path", body["error"])
        self.assertEqual(self.admin(srv, "GET", "/api/route-test?host=a&path=/", token=None)[0],
                         401)
        self.assertEqual(self.admin(srv, "POST", "/api/routes")[0], 405)


class SseClient:
    """GET /api/logs on a raw socket; de-chunks the body and splits it into events."""

    def __init__(self, port, query, rcvbuf=None):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.connect(("127.0.0.1", port))
        self.sock.settimeout(10)
        self.sock.sendall(f"GET /api/logs?{query} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                          f"Authorization: Bearer {TOKEN}\r\n\r\n".encode())
        self.raw = b""
        self.body = b""
        self.head = None
        self.ended = False  # the last chunk arrived

    def _fill(self, deadline):
        self.sock.settimeout(max(0.05, deadline - time.monotonic()))
        data = self.sock.recv(65536)
        if not data:
            raise EOFError("stream closed")
        self.raw += data
        if self.head is None and b"\r\n\r\n" in self.raw:
            self.head, self.raw = self.raw.split(b"\r\n\r\n", 1)
        while self.head is not None and b"\r\n" in self.raw:
            size_text, rest = self.raw.split(b"\r\n", 1)
            size = int(size_text, 16)
            if len(rest) < size + 2:
                break
            self.ended = self.ended or size == 0
            self.body += rest[:size]
            self.raw = rest[size + 2:]

    def wait_for(self, needle, timeout=8.0):
        """The body up to and including the event containing `needle`; consumed."""
        deadline = time.monotonic() + timeout
        while needle not in self.body:
            if time.monotonic() > deadline:
                raise AssertionError(f"{needle!r} not in stream: {self.body[-2000:]!r}")
            try:
                self._fill(deadline)
            except socket.timeout:
                pass
        end = self.body.index(b"\n\n", self.body.index(needle)) + 2
        seen, self.body = self.body[:end], self.body[end:]
        return seen

    def close(self):
        self.sock.close()


class LogTail(LiveCase):
    def start_with_admin(self):
        """The default site logs to a file: the log writer offers its lines to the tail."""
        return self.start_admin_config(access_log=os.path.join(self.tmp, "access.log"))

    def test_access_and_error_lines_and_filter(self):
        srv = self.start_with_admin()
        both = SseClient(srv.admin_port, "stream=both")
        self.addCleanup(both.close)
        only_b = SseClient(srv.admin_port, "stream=access&filter=marker-b")
        self.addCleanup(only_b.close)
        errors = SseClient(srv.admin_port, "stream=error")
        self.addCleanup(errors.close)
        for c in (both, only_b, errors):
            c.wait_for(b": subscribed")
            self.assertIn(b"200 OK", c.head)
            self.assertIn(b"text/event-stream", c.head)

        self.assertEqual(self.get(srv.port, "/index.html?marker-a", {"Host": "a.test"})[0], 200)
        self.assertEqual(self.get(srv.port, "/index.html?marker-b", {"Host": "a.test"})[0], 200)
        seen = both.wait_for(b"marker-a")
        self.assertIn(b"event: access\ndata: ", seen)
        self.assertIn(b"GET /index.html?marker-a HTTP/1.1\" 200", seen)
        self.assertEqual(only_b.wait_for(b"marker-b").count(b"event: access"), 1)
        self.assertNotIn(b"marker-a", only_b.body)

        # An error-log line: a refused admin request is logged (warn) and appears in the tail.
        self.assertEqual(self.admin(srv, "GET", "/api/status", token="wrong-token-xyz")[0], 401)
        seen = errors.wait_for(b"wrong credentials")
        self.assertIn(b"event: error\ndata: ", seen)
        self.assertNotIn(b"event: access", seen)
        both.wait_for(b"wrong credentials")
        # The access tail only got access lines.
        time.sleep(1.5)
        self.assertEqual(self.get(srv.port, "/index.html?marker-b2", {"Host": "a.test"})[0], 200)
        seen = only_b.wait_for(b"marker-b2")
        self.assertNotIn(b"event: error", seen)

    def test_bad_tail_requests(self):
        srv = self.start_with_admin()
        self.assertEqual(self.admin(srv, "GET", "/api/logs?stream=nope")[0], 400)
        self.assertEqual(self.admin(srv, "GET", "/api/logs", token=None)[0], 401)
        self.assertEqual(self.admin(srv, "POST", "/api/logs")[0], 405)
        self.assert_serving(srv, "/index.html")

    def test_graceful_stop_ends_the_stream(self):
        srv = self.start_with_admin()
        tail = SseClient(srv.admin_port, "stream=both")
        self.addCleanup(tail.close)
        tail.wait_for(b": subscribed")
        started = time.monotonic()
        self.stop_ok(srv, signal.SIGQUIT, timeout=10)  # shutdown_timeout is 30 s
        self.assertLess(time.monotonic() - started, 8)
        with self.assertRaises(EOFError):
            while True:
                tail._fill(time.monotonic() + 5)
        self.assertTrue(tail.ended, tail.raw)

    def test_slow_reader_does_not_stall_the_server(self):
        srv = self.start_with_admin()
        stalled = SseClient(srv.admin_port, "stream=access", rcvbuf=4096)
        self.addCleanup(stalled.close)
        stalled.wait_for(b": subscribed")
        # Some 6 MB of access lines, far beyond the socket buffers and the 256 KiB queue, while
        # the tail's client reads nothing.
        long_query = "x" * 4000
        conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=5)
        started = time.monotonic()
        for i in range(1500):
            conn.request("GET", f"/index.html?{i}-{long_query}", headers={"Host": "a.test"})
            r = conn.getresponse()
            r.read()
            self.assertEqual(r.status, 200)
        conn.close()
        self.assertLess(time.monotonic() - started, 60)
        status, body = self.admin(srv, "GET", "/api/status")
        self.assertEqual(status, 200)
        # Once the reader reads, the stream goes on and says how many lines it lost.
        stalled.wait_for(b": dropped ", timeout=15)
        self.assertEqual(self.get(srv.port, "/index.html?after-drop", {"Host": "a.test"})[0], 200)
        stalled.wait_for(b"after-drop", timeout=10)


if __name__ == "__main__":
    main()
