"""Limits per client (issue 17, item 1), with 2 workers and several client addresses on
127.0.0.0/8: the accepted rate is within 10 % of the configured one whichever worker a connection
lands on, refusals are 429 with Retry-After, delay mode delays instead, connections are counted
per address, and refusals are logged once per key per interval."""

import http.client
import os
import re
import socket
import subprocess
import sys
import threading
import time
import unittest

import harness
from harness import ServerTestCase

LIMITS = '''
[[limit]]
name = "rate"
rate = "50r/s"
burst = 5
key = "$remote_addr"
log_interval = "60s"

[[limit]]
name = "slow"
rate = "10r/s"
burst = 5
mode = "delay"

[[limit]]
name = "byheader"
rate = "1r/s"
key = "$http_x_api_key"

[[limit]]
name = "conns"
connections = 2
'''

ROUTES = '''
[[site.route]]
prefix = "/rate/"
limit = ["rate"]

[[site.route]]
prefix = "/slow/"
limit = ["slow"]

[[site.route]]
prefix = "/key/"
limit = ["byheader"]

[[site.route]]
prefix = "/conn/"
limit = ["conns"]
'''


def connect(port, source):
    return http.client.HTTPConnection("127.0.0.1", port, timeout=10, source_address=(source, 0))


def get(conn, path, headers=None):
    h = {"Host": "localhost"}
    h.update(headers or {})
    conn.request("GET", path, headers=h)
    resp = conn.getresponse()
    body = resp.read()
    return resp.status, resp, body


class LimitsTest(ServerTestCase):
    def start_config_top(self):
        root = self.make_root({"rate/f.txt": "x" * 100, "slow/f.txt": "slow\n",
                               "key/f.txt": "key\n", "conn/f.txt": "conn\n"})
        text = harness.make_config(root, workers=2, routes=ROUTES + harness.STATIC_FALLBACK)
        # [[limit]] tables go after the [limits] table; the site's tables follow.
        text = text.replace("[[site]]\n", LIMITS + "\n[[site]]\n", 1)
        return self.start_config(text)

    def test_rate_within_ten_percent_across_workers_and_addresses(self):
        srv = self.start_config_top()
        sources = ["127.0.0.2", "127.0.0.3", "127.0.0.4"]
        per_conn = 4  # connections per address, spread over both workers by SO_REUSEPORT
        duration = 4.0
        results = {s: {"ok": 0, "refused": 0, "no_retry_after": 0, "first": None, "last": None}
                   for s in sources}
        lock = threading.Lock()
        errors = []

        def hammer(source):
            try:
                conn = connect(srv.port, source)
                end = time.monotonic() + duration
                while time.monotonic() < end:
                    sent = time.monotonic()
                    status, resp, _ = get(conn, "/rate/f.txt")
                    with lock:
                        r = results[source]
                        if status == 200:
                            r["ok"] += 1
                            r["first"] = sent if r["first"] is None else min(r["first"], sent)
                            r["last"] = sent
                        elif status == 429:
                            r["refused"] += 1
                            if not re.fullmatch(r"[1-9]\d*", resp.getheader("Retry-After", "")):
                                r["no_retry_after"] += 1
                        else:
                            errors.append(status)
                    time.sleep(0.002)
                conn.close()
            except Exception as e:  # reported below
                errors.append(repr(e))

        start = time.monotonic()
        threads = [threading.Thread(target=hammer, args=(s,)) for s in sources
                   for _ in range(per_conn)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.monotonic() - start
        self.assertEqual(errors, [])
        for source, r in results.items():
            # The bucket starts full (burst + 1), then one request per 20 ms.
            expected = 6 + 50 * elapsed
            print(f"\n  {source}: {r['ok']} accepted, {r['refused']} refused in {elapsed:.2f} s; "
                  f"expected {expected:.0f} ({(r['ok'] / expected - 1) * 100:+.1f} %)",
                  file=sys.stderr)
            self.assertGreater(r["refused"], r["ok"], f"{source}: the clients must outpace 50 r/s")
            self.assertLessEqual(abs(r["ok"] - expected) / expected, 0.10,
                                 f"{source}: {r['ok']} accepted in {elapsed:.2f}s, expected "
                                 f"{expected:.0f} (±10 %)")
            self.assertEqual(r["no_retry_after"], 0, "every 429 carries Retry-After")
        # Logged once per key per interval (60 s), not once per refused request.
        log = srv.stderr()
        for source in sources:
            lines = re.findall(r'limit "rate": refusing requests over the rate from '
                               + re.escape(source) + r"\b", log)
            self.assertEqual(len(lines), 1, log[-2000:])

    def test_429_then_accepted_after_retry_after(self):
        srv = self.start_config_top()
        conn = connect(srv.port, "127.0.0.5")
        statuses = [get(conn, "/key/f.txt", {"X-Api-Key": "k1"})[0] for _ in range(3)]
        self.assertEqual(statuses, [200, 429, 429])
        status, resp, body = get(conn, "/key/f.txt", {"X-Api-Key": "k1"})
        self.assertEqual(status, 429)
        self.assertEqual(resp.getheader("Retry-After"), "1")
        self.assertIn(b"429", body)
        # Another key (same address) has its own bucket; requests without the header are not
        # limited by it.
        self.assertEqual(get(conn, "/key/f.txt", {"X-Api-Key": "k2"})[0], 200)
        self.assertEqual([get(conn, "/key/f.txt")[0] for _ in range(3)], [200] * 3)
        time.sleep(1.05)
        self.assertEqual(get(conn, "/key/f.txt", {"X-Api-Key": "k1"})[0], 200)
        self.assertIn('limit "byheader": refusing requests over the rate from header x-api-key="k1"',
                      srv.stderr())

    def test_delay_mode_delays_instead_of_refusing(self):
        srv = self.start_config_top()
        # 8 requests at once: the first passes, 5 more wait 100..500 ms, 2 are refused.
        outcomes = []
        lock = threading.Lock()

        def one():
            conn = connect(srv.port, "127.0.0.6")
            t0 = time.monotonic()
            status, _, _ = get(conn, "/slow/f.txt")
            with lock:
                outcomes.append((status, time.monotonic() - t0))
            conn.close()

        threads = [threading.Thread(target=one) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        ok = sorted(t for s, t in outcomes if s == 200)
        refused = [t for s, t in outcomes if s == 429]
        self.assertEqual(len(ok), 6, outcomes)
        self.assertEqual(len(refused), 2, outcomes)
        self.assertGreater(ok[-1], 0.45, "the last one waited its turn (500 ms)")
        self.assertGreater(ok[-1] - ok[0], 0.3, "the first was not delayed")
        self.assertLess(ok[-1], 2.0)
        self.assertTrue(all(t < 0.3 for t in refused), "beyond the burst: refused at once")
        # Sequential requests on one connection are spaced to the rate too (as nginx's
        # limit_req without nodelay): 5 requests take 4 intervals.
        conn = connect(srv.port, "127.0.0.7")
        t0 = time.monotonic()
        for _ in range(5):
            self.assertEqual(get(conn, "/slow/f.txt")[0], 200)
        self.assertGreater(time.monotonic() - t0, 0.35)

    def test_delay_mode_with_pipelined_requests_and_a_body(self):
        srv = self.start_config_top()
        with self.raw(srv.port) as c:
            t0 = time.monotonic()
            c.send(harness.build_request("GET", "/slow/f.txt")
                   + harness.build_request("POST", "/slow/f.txt", body=b"x" * 5000)
                   + harness.build_request("GET", "/slow/f.txt"))
            statuses = [c.read_response().status for _ in range(3)]
            elapsed = time.monotonic() - t0
        self.assertEqual(statuses[0], 200)
        self.assertEqual(statuses[1], 405, "the body was read and dropped after the wait")
        self.assertEqual(statuses[2], 200)
        self.assertGreater(elapsed, 0.15, "the second and third waited 100 and 200 ms")

    def test_connections_per_address(self):
        srv = self.start_config_top()
        first, second = connect(srv.port, "127.0.0.8"), connect(srv.port, "127.0.0.8")
        self.assertEqual(get(first, "/conn/f.txt")[0], 200)
        self.assertEqual(get(second, "/conn/f.txt")[0], 200)
        third = connect(srv.port, "127.0.0.8")
        status, resp, _ = get(third, "/conn/f.txt")
        self.assertEqual(status, 503)
        self.assertEqual(resp.getheader("Connection"), "close")
        third.close()
        # Another address is counted apart; the kept connections still work.
        other = connect(srv.port, "127.0.0.9")
        self.assertEqual(get(other, "/conn/f.txt")[0], 200)
        self.assertEqual(get(first, "/conn/f.txt")[0], 200)
        # Once one closes, its place is free again (the close is seen by the server a moment
        # later).
        first.close()

        def fourth_ok():
            c = connect(srv.port, "127.0.0.8")
            try:
                return get(c, "/conn/f.txt")[0] == 200
            finally:
                c.close()
        self.wait_for(fourth_ok, msg="a place freed by the closed connection")
        second.close()
        other.close()
        self.assertIn('limit "conns": refusing connections over 2 from 127.0.0.8', srv.stderr())

    def test_http2_refusals_carry_retry_after(self):
        harness.require_tool("curl", "curl")
        root = self.make_root({"key/f.txt": "key\n", "conn/f.txt": "conn\n"})
        text = harness.make_config(root, workers=2, routes=ROUTES + harness.STATIC_FALLBACK)
        text = text.replace("[[site]]\n", LIMITS + "\n[[site]]\n", 1)
        text = text.replace('listen = ["127.0.0.1:0"]',
                            'listen = [{ address = "127.0.0.1:0", http2 = true }]', 1)
        srv = self.start_config(text)
        url = f"http://127.0.0.1:{srv.port}/key/f.txt"
        # Three HTTP/2 requests with the same key (one connection each: curl 7.88 fails to reuse a
        # prior-knowledge connection, with main's binary too): one passes.
        heads = ""
        for _ in range(3):
            out = subprocess.run(["curl", "-sS", "--http2-prior-knowledge", "-H", "X-Api-Key: h2",
                                  "-o", "/dev/null", "-D", "-", url],
                                 capture_output=True, text=True, timeout=20)
            self.assertEqual(out.returncode, 0, out.stderr)
            heads += out.stdout
        statuses = re.findall(r"^HTTP/2 (\d+)", heads, re.M)
        self.assertEqual(statuses, ["200", "429", "429"], heads)
        self.assertRegex(heads, r"(?mi)^retry-after: 1\r?$")
        # Connection limit over HTTP/2: with two HTTP/1 connections of 127.0.0.11 open, the
        # first stream of a third connection gets 503 (and the connection a GOAWAY).
        held = [connect(srv.port, "127.0.0.11") for _ in range(2)]
        for c in held:
            self.assertEqual(get(c, "/conn/f.txt")[0], 200)
        out = subprocess.run(["curl", "-sS", "--http2-prior-knowledge", "-o", "/dev/null",
                              "-w", "%{http_code}", "--interface", "127.0.0.11",
                              f"http://127.0.0.1:{srv.port}/conn/f.txt"],
                             capture_output=True, text=True, timeout=20)
        self.assertEqual(out.stdout, "503", out.stderr)
        for c in held:
            c.close()

    def test_http2_delay_mode(self):
        harness.require_tool("curl", "curl")
        root = self.make_root({"slow/f.txt": "slow\n"})
        text = harness.make_config(root, workers=2, routes=ROUTES + harness.STATIC_FALLBACK)
        text = text.replace("[[site]]\n", LIMITS + "\n[[site]]\n", 1)
        text = text.replace('listen = ["127.0.0.1:0"]',
                            'listen = [{ address = "127.0.0.1:0", http2 = true }]', 1)
        srv = self.start_config(text)
        url = f"http://127.0.0.1:{srv.port}/slow/f.txt"
        # Four requests at once (a POST with a body among them): they leave 100 ms apart.
        cmds = [["curl", "-sS", "--http2-prior-knowledge", "--interface", "127.0.0.12", "-o",
                 "/dev/null", "-w", "%{http_code} %{time_total}", url] for _ in range(3)]
        cmds.append(["curl", "-sS", "--http2-prior-knowledge", "--interface", "127.0.0.12",
                     "--data-binary", "x" * 70000, "-o", "/dev/null", "-w",
                     "%{http_code} %{time_total}", url])
        t0 = time.monotonic()
        procs = [subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for c in cmds]
        results = [p.communicate(timeout=20) for p in procs]
        elapsed = time.monotonic() - t0
        codes = sorted(out.split()[0] for out, _ in results)
        self.assertEqual(codes, ["200", "200", "200", "405"], results)
        # Whenever the first arrived, the fourth left 300 ms after it (none was refused).
        self.assertGreater(elapsed, 0.28, results)

    def test_reload_keeps_limits_working(self):
        srv = self.start_config_top()
        conn = connect(srv.port, "127.0.0.10")
        self.assertEqual([get(conn, "/key/f.txt", {"X-Api-Key": "r"})[0] for _ in range(2)],
                         [200, 429])
        import signal
        srv.signal(signal.SIGHUP)
        self.wait_for(lambda: "reload" in srv.stderr().lower(), msg="the reload")
        time.sleep(0.3)
        conn2 = connect(srv.port, "127.0.0.10")
        statuses = [get(conn2, "/key/f.txt", {"X-Api-Key": "r"})[0] for _ in range(3)]
        self.assertEqual(statuses.count(200), 1, statuses)


if __name__ == "__main__":
    harness.main()
