"""Live metrics and the admin listener (issue 14, items 1-3): known traffic over HTTP/1.0,
HTTP/1.1 and h2c (curl --http2-prior-knowledge) to two sites and a proxied route with a real back
end (backends/http_backend.py), then /metrics parsed by Debian's python3-prometheus-client text
parser and /api/stats read as JSON, both checked against the traffic exactly. Also: token auth
(401 + WWW-Authenticate), the Host check, auth = "none" refused off loopback, quick mode's
printed token.
"""

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (HERE, PEREGRINE_BIN, RawClient, ServerTestCase, h2c, main, make_config, q,  # noqa: E402
                     require_tool)

sys.path.insert(0, HERE)
from test_proxy import Backend, free_port  # noqa: E402

TOKEN = "metrics-test-token-0123456789abcdef"
ADMIN_RE = re.compile(rb"admin API listening on 127\.0\.0\.1:(\d+)")
LISTEN_ALL_RE = re.compile(rb"\] listening on 127\.0\.0\.1:(\d+)")


def parse_prometheus(text):
    """Families by name, through the strict text parser; raises on any malformed line."""
    from prometheus_client.parser import text_string_to_metric_families
    return {f.name: f for f in text_string_to_metric_families(text)}


class MetricsTestCase(ServerTestCase):
    def setUp(self):
        super().setUp()
        self.root = self.make_root({"index.html": "a index\n"})
        self.root_b = self.make_root({"index.html": "b index!\n"}, name="www_b")
        token_path = os.path.join(self.tmp, "admin.token")
        with open(token_path, "w") as f:
            f.write(TOKEN + "\n")
        os.chmod(token_path, 0o600)
        self.token_path = token_path

    def start_with_admin(self, upstreams="", routes="", admin_keys="", workers=2):
        top = (upstreams + "\n[admin]\nlisten = \"127.0.0.1:0\"\n"
               f"token_file = {q(self.token_path)}\n{admin_keys}\n")
        text = make_config(self.root, top=top, routes=routes, workers=workers, hosts=("a.test",),
                           extra_sites=f'[[site]]\nhosts = ["b.test"]\nroot = {q(self.root_b)}\n')
        text = h2c(text)
        srv = self.start_config(text)
        self.wait_for(lambda: ADMIN_RE.search(srv._read(srv.log_path)), msg="admin listener")
        srv.admin_port = int(ADMIN_RE.search(srv._read(srv.log_path)).group(1))
        return srv

    def admin_get(self, srv, path, token=TOKEN, host=None):
        headers = {}
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        if host is not None:
            headers["Host"] = host
        return self.http(srv.admin_port, "GET", path, headers=headers)

    def metrics(self, srv):
        status, headers, body = self.admin_get(srv, "/metrics")
        self.assertEqual(status, 200, body)
        self.assertTrue(headers["Content-Type"].startswith("text/plain; version=0.0.4"))
        return body.decode()

    def stats(self, srv):
        status, headers, body = self.admin_get(srv, "/api/stats")
        self.assertEqual(status, 200, body)
        self.assertEqual(headers["Content-Type"], "application/json")
        return json.loads(body)


def request_counts(families):
    """{(site, route, protocol, tls, code): value} from peregrine_http_requests_total."""
    out = {}
    for s in families["peregrine_http_requests"].samples:
        if s.name != "peregrine_http_requests_total":
            continue
        key = (s.labels["site"], s.labels["route"], s.labels["protocol"], s.labels["tls"],
               s.labels["code"])
        out[key] = out.get(key, 0) + s.value
    return out


def site_totals(counts, site):
    totals = {}
    for (s, route, protocol, tls, code), v in counts.items():
        if s == site:
            totals[(protocol, code)] = totals.get((protocol, code), 0) + v
    return totals


class TrafficCounts(MetricsTestCase):
    def test_counters_match_known_traffic(self):
        live = Backend(self.tmp, "live").start()
        self.addCleanup(live.kill)
        dead = f"127.0.0.1:{free_port()}"
        upstreams = ('[[upstream]]\nname = "app"\n'
                     f'servers = [{q(live.address)}, {q(dead)}]\n')
        routes = '[[site.route]]\nprefix = "/app/"\nproxy = "http://app"\n' \
                 '\n[[site.route]]\nprefix = "/"\n'
        srv = self.start_with_admin(upstreams, routes)
        port = srv.port

        # HTTP/1.1: 7 x 200 and 3 x 404 on site a.test, 4 x 200 on b.test.
        for _ in range(7):
            self.assertEqual(self.get(port, "/index.html", {"Host": "a.test"})[0], 200)
        for _ in range(3):
            self.assertEqual(self.get(port, "/missing", {"Host": "a.test"})[0], 404)
        for _ in range(4):
            self.assertEqual(self.get(port, "/index.html", {"Host": "b.test"})[0], 200)
        # HTTP/1.0: 2 x 200 on a.test.
        for _ in range(2):
            with RawClient(port) as c:
                r = c.request("GET", "/index.html", version="HTTP/1.0", host="a.test")
                self.assertEqual(r.status, 200)
        # h2c: 5 x 200 on a.test (one connection each: curl 7.88 does not send a second request on
        # a reused prior-knowledge connection).
        require_tool("curl", "curl")
        for _ in range(5):
            out = subprocess.run(["curl", "-s", "--http2-prior-knowledge", "-o", "/dev/null",
                                  "-w", "%{http_version} %{http_code}", "-H", "Host: a.test",
                                  f"http://127.0.0.1:{port}/index.html"],
                                 capture_output=True, timeout=20)
            self.assertEqual(out.stdout.decode(), "2 200", out)
        # Proxied: 6 x 200 through group "app"; the dead server's refusals are retried on the live
        # one, so each request ends there exactly once.
        for _ in range(6):
            self.assertEqual(self.get(port, "/app/hello", {"Host": "a.test"})[0], 200)

        expected_a = {("HTTP/1.1", "2xx"): 7 + 6, ("HTTP/1.1", "4xx"): 3,
                      ("HTTP/1.0", "2xx"): 2, ("HTTP/2", "2xx"): 5}
        expected_b = {("HTTP/1.1", "2xx"): 4}

        # A streamed (proxied) response is counted when its last byte is queued: allow a moment.
        deadline = time.monotonic() + 5
        while True:
            families = parse_prometheus(self.metrics(srv))
            counts = request_counts(families)
            if (site_totals(counts, "a.test") == expected_a and
                    site_totals(counts, "b.test") == expected_b) or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        self.assertEqual(site_totals(counts, "a.test"), expected_a, counts)
        self.assertEqual(site_totals(counts, "b.test"), expected_b, counts)
        self.assertEqual(counts.get(("a.test", "/app/", "HTTP/1.1", "false", "2xx")), 6, counts)
        self.assertEqual(counts.get(("a.test", "/", "HTTP/1.1", "false", "4xx")), 3, counts)
        self.assertEqual(counts.get(("a.test", "/", "HTTP/2", "false", "2xx")), 5, counts)

        # Every family has HELP and TYPE (the parser keeps them), histograms are consistent.
        for name, family in families.items():
            self.assertTrue(family.documentation, name)
            self.assertIn(family.type, ("counter", "gauge", "histogram"), name)
        duration = families["peregrine_http_request_duration_seconds"]
        buckets = [s for s in duration.samples if s.name.endswith("_bucket")]
        self.assertEqual(buckets[-1].labels["le"], "+Inf")
        values = [s.value for s in buckets]
        self.assertEqual(values, sorted(values), "cumulative buckets never decrease")
        count = [s.value for s in duration.samples if s.name.endswith("_count")][0]
        self.assertEqual(values[-1], count)
        self.assertGreaterEqual(count, 7 + 3 + 4 + 2 + 5 + 6)

        def sample(family, **labels):
            for s in families[family].samples:
                if all(s.labels.get(k) == v for k, v in labels.items()) and \
                        not s.name.endswith("_created"):
                    return s.value
            return None

        self.assertEqual(sample("peregrine_upstream_requests", group="app", server=live.address), 6)
        refused = sample("peregrine_upstream_failures", group="app", server=dead, kind="refused")
        self.assertGreaterEqual(refused, 1)
        self.assertEqual(sample("peregrine_upstream_requests", group="app", server=dead), refused)
        self.assertEqual(sample("peregrine_upstream_failures", group="app", server=live.address,
                                kind="refused"), 0)
        opened = sample("peregrine_upstream_connections_opened", group="app", server=live.address)
        reused = sample("peregrine_upstream_connections_reused", group="app", server=live.address)
        self.assertEqual(opened + reused, 6)  # each try on a new or a pooled connection
        self.assertGreaterEqual(reused, 1)
        self.assertEqual(sample("peregrine_upstream_in_flight", group="app", server=live.address), 0)
        self.assertEqual(sample("peregrine_http2_streams"), 5)
        self.assertEqual(sample("peregrine_workers"), 2)
        self.assertEqual(sample("peregrine_config_generation"), 1)
        self.assertGreater(sample("process_resident_memory_bytes"), 1_000_000)
        self.assertGreater(sample("process_open_fds"), 3)
        self.assertGreater(sample("peregrine_received_bytes", protocol="http1"), 0)
        self.assertGreater(sample("peregrine_sent_bytes", protocol="http2"), 0)

        # The JSON has the same figures.
        stats = self.stats(srv)
        json_a = {}
        for r in stats["routes"]:
            if r["site"] != "a.test":
                continue
            for e in r["requests"]:
                key = (e["protocol"], e["code"])
                json_a[key] = json_a.get(key, 0) + e["count"]
        self.assertEqual(json_a, expected_a)
        (app,) = [g for g in stats["upstreams"] if g["group"] == "app"]
        servers = {s["server"]: s for s in app["servers"]}
        self.assertEqual(servers[live.address]["requests"], 6)
        self.assertEqual(servers[live.address]["state"], "up")
        self.assertEqual(servers[dead]["failures"]["refused"], refused)
        self.assertEqual(stats["http2_streams_total"], 5)
        self.assertEqual(stats["workers"], 2)
        self.assertGreater(stats["duration"]["count"], 0)

    def test_status_and_reload_counters(self):
        srv = self.start_with_admin()
        status, _, body = self.admin_get(srv, "/api/status")
        self.assertEqual(status, 200)
        st = json.loads(body)
        self.assertEqual(st["workers"], 2)
        self.assertEqual(st["generation"], 1)
        self.assertEqual([l["kind"] for l in st["listeners"]], ["http", "admin"])
        self.assertTrue(st["listeners"][0]["http2"])
        # A good reload, then a bad one.
        srv.signal(signal.SIGHUP)
        self.wait_for(lambda: b"configuration reloaded" in srv._read(srv.log_path), msg="reload")
        with open(srv.config_path, "a") as f:
            f.write("\nnot valid toml [[[\n")
        srv.signal(signal.SIGHUP)
        self.wait_for(lambda: b"reload failed" in srv._read(srv.log_path), msg="failed reload")
        families = parse_prometheus(self.metrics(srv))
        values = {(s.name, tuple(sorted(s.labels.items()))): s.value
                  for f in families.values() for s in f.samples}
        self.assertEqual(values[("peregrine_reloads_total", (("result", "succeeded"),))], 1)
        self.assertEqual(values[("peregrine_reloads_total", (("result", "failed"),))], 1)
        self.assertEqual(values[("peregrine_config_generation", ())], 2)


class ReadBuffers(MetricsTestCase):
    def test_a_burst_on_400_connections_leaves_a_few_spare_buffers(self):
        # A request buffer (max_header_bytes + 4 KiB) is held while a request is read and
        # answered, not by an idle keep-alive connection, and the worker keeps what it frees for
        # the next. On io_uring an answer goes out with the next wait; when a connection held its
        # buffer until then, a burst left one spare per connection of the batch (256, 5 MB).
        srv = self.start_with_admin(workers=1)
        clients = [socket.create_connection(("127.0.0.1", srv.port), timeout=10) for _ in range(400)]
        for c in clients:
            self.addCleanup(c.close)

        def ask_each(clients):
            for c in clients:
                c.sendall(b"GET /index.html HTTP/1.1\r\nHost: a.test\r\n\r\n")

        def read_each(clients):
            for c in clients:
                answer = b""
                while not answer.endswith(b"a index\n"):
                    data = c.recv(4096)
                    self.assertTrue(data, answer)
                    answer += data
                self.assertTrue(answer.startswith(b"HTTP/1.1 200 "), answer)

        # A connection's first request is read and answered before the connection is registered;
        # the next ones come through the poller (on io_uring, with the ring's receive and send).
        ask_each(clients)
        read_each(clients)
        # Stopped, the server finds all 400 requests at once when it goes on: one batch.
        srv.signal(signal.SIGSTOP)
        try:
            ask_each(clients)
        finally:
            srv.signal(signal.SIGCONT)
        read_each(clients)

        def sampled_after_the_burst():  # the worker samples once a second
            stats = self.stats(srv)
            return stats if stats["connections"]["idle"] == 400 else None

        stats = self.wait_for(sampled_after_the_burst, timeout=5, msg="400 idle connections sampled")
        self.assertEqual(stats["read_buffers"]["in_use"], 0, stats["read_buffers"])
        self.assertLessEqual(stats["read_buffers"]["spare"], 8, stats["read_buffers"])
        families = parse_prometheus(self.metrics(srv))
        buffers = {s.labels["state"]: s.value for s in families["peregrine_read_buffers"].samples}
        self.assertEqual(set(buffers), {"in_use", "spare"})


class AdminAuth(MetricsTestCase):
    def test_token_required(self):
        srv = self.start_with_admin(workers=1)
        for token in (None, "wrong-token", TOKEN + "x"):
            status, headers, body = self.admin_get(srv, "/metrics", token=token)
            self.assertEqual(status, 401, token)
            self.assertEqual(headers["WWW-Authenticate"], 'Bearer realm="peregrine admin"')
            self.assertNotIn(b"peregrine_", body)
        self.wait_for(lambda: b"admin: 401" in srv._read(srv.log_path), msg="401 logged")
        status, _, _ = self.admin_get(srv, "/metrics")
        self.assertEqual(status, 200)
        # Basic is not Bearer.
        status, _, _ = self.http(srv.admin_port, "GET", "/metrics",
                                 headers={"Authorization": "Basic " + TOKEN})
        self.assertEqual(status, 401)
        # Unknown endpoint and wrong method, once authenticated.
        self.assertEqual(self.admin_get(srv, "/nothing")[0], 404)
        status, headers, _ = self.http(srv.admin_port, "POST", "/metrics", body=b"",
                                       headers={"Authorization": f"Bearer {TOKEN}"})
        self.assertEqual(status, 405)
        self.assertEqual(headers["Allow"], "GET, HEAD")
        # The admin endpoints are not on the site listener.
        self.assertEqual(self.get(srv.port, "/metrics", {"Host": "a.test"})[0], 404)

    def test_host_check(self):
        srv = self.start_with_admin(workers=1, admin_keys='hosts = ["admin.example"]')
        for host in ("localhost", f"127.0.0.1:{srv.admin_port}", "admin.example", "[::1]:1"):
            self.assertEqual(self.admin_get(srv, "/api/status", host=host)[0], 200, host)
        for host in ("evil.example", "localhost.evil.example", "127.0.0.1.nip.io"):
            status, _, body = self.admin_get(srv, "/api/status", host=host)
            self.assertEqual(status, 403, host)
            self.assertIn(b"Host not allowed", body)

    def test_no_auth_refused_off_loopback(self):
        text = make_config(self.root, top='[admin]\nlisten = "0.0.0.0:0"\nauth = "none"\n')
        path = self.write_config(text)
        out = subprocess.run([PEREGRINE_BIN, "-t", "-c", path], capture_output=True, timeout=20)
        self.assertNotEqual(out.returncode, 0)
        err = out.stderr.decode()
        self.assertRegex(err, r'peregrine\.toml:\d+:\d+: error: auth = "none" is refused on '
                              r"'0\.0\.0\.0:0'")
        self.assertIn("hint: listen on 127.0.0.1, [::1] or a unix: socket", err)

    def test_no_auth_on_loopback(self):
        text = make_config(self.root, top='[admin]\nlisten = "127.0.0.1:0"\nauth = "none"\n')
        srv = self.start_config(text)
        self.wait_for(lambda: ADMIN_RE.search(srv._read(srv.log_path)), msg="admin listener")
        admin_port = int(ADMIN_RE.search(srv._read(srv.log_path)).group(1))
        status, _, body = self.http(admin_port, "GET", "/api/stats")
        self.assertEqual(status, 200)
        self.assertIn("routes", json.loads(body))

    def test_quick_mode_prints_a_token_once(self):
        srv = self.start_quick(self.root, extra=["--admin", "127.0.0.1:0"])
        self.wait_for(lambda: ADMIN_RE.search(srv._read(srv.log_path)), msg="admin listener")
        srv.admin_port = int(ADMIN_RE.search(srv._read(srv.log_path)).group(1))
        log = srv._read(srv.log_path).decode()
        tokens = re.findall(r"admin API token \(shown once[^)]*\): ([0-9a-f]+)", log)
        self.assertEqual(len(tokens), 1, log)
        self.assertEqual(len(tokens[0]), 64)
        self.assertEqual(self.admin_get(srv, "/metrics", token=None)[0], 401)
        self.assertEqual(self.admin_get(srv, "/metrics", token=tokens[0])[0], 200)


if __name__ == "__main__":
    main()
