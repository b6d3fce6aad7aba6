"""[limits]: header_timeout (slowloris), keepalive_timeout, body_timeout, send_timeout,
max_connections, max_header_bytes, max_body_bytes, max_requests_per_connection.

ClientLimitsTest: limits per client (issue 17, item 1, [[limit]]), with 2 workers and several client
addresses on 127.0.0.0/8: the accepted rate is within 10 % of the configured one whichever worker a
connection lands on, refusals are 429 with Retry-After, delay mode delays instead (HTTP/1 and
HTTP/2), connections are counted per address, and refusals are logged once per key per interval."""

import http.client
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

import harness

from harness import STATIC_FALLBACK, RawClient, ServerTestCase, build_request, h2c, main, make_config

ECHO = """
[[site.route]]
exact = "/echo"
methods = ["GET", "HEAD", "POST", "PUT"]
return = 200
body = "ok"
""" + STATIC_FALLBACK

FILES = {"hello.txt": b"hello\n", "index.html": b"<p>index</p>\n"}


class LimitsTest(ServerTestCase):
    def start(self, limits, files=None, workers=1):
        root = self.make_root(files or FILES)
        self.srv = self.start_config(make_config(root, limits=limits, routes=ECHO, workers=workers))
        self.port = self.srv.port
        return self.srv

    def closed_after(self, c, min_s, max_s, what, early_response=None):
        """Wait for the server to close `c`; the close must come after min_s and before max_s.
        Accepts a 408 response before the close, and `early_response` (bytes) before that."""
        t0 = time.monotonic()
        data = b""
        while True:
            remaining = max_s - (time.monotonic() - t0)
            if remaining <= 0:
                self.fail(f"{what}: connection still open after {max_s}s (got {data[:200]!r})")
            try:
                c.sock.settimeout(remaining)
                chunk = c.sock.recv(65536)
            except ConnectionResetError:
                chunk = b""
            except (socket.timeout, TimeoutError):
                continue
            if not chunk:
                break
            data += chunk
        elapsed = time.monotonic() - t0
        self.assertGreaterEqual(elapsed, min_s, f"{what}: closed after {elapsed:.2f}s, before the timeout")
        rest = data
        if early_response and rest.startswith(b"HTTP/1.1 ") and early_response in rest:
            rest = rest[rest.index(early_response) + len(early_response):]
        if rest:
            self.assertTrue(rest.startswith(b"HTTP/1.1 408 "), f"{what}: only a 408 may precede the close, got {data[:300]!r}")
        return elapsed, data

    # ---- timeouts ----

    def test_header_timeout_partial_head(self):
        self.start('header_timeout = "1s"\nkeepalive_timeout = "10s"')
        c = self.raw(self.port)
        c.send(b"GET /hello.txt HTTP/1.1\r\nHost: localhost\r\n")
        self.closed_after(c, 0.8, 3.5, "partial head then silence")
        self.assert_serving(self.srv, "/hello.txt")

    def test_header_timeout_slowloris(self):
        self.start('header_timeout = "1s"\nkeepalive_timeout = "10s"')
        c = self.raw(self.port)
        c.send(b"GET /hello.txt HTTP/1.1\r\nHost: localhost\r\n")
        t0 = time.monotonic()
        closed = False
        i = 0
        while time.monotonic() - t0 < 4.0:
            try:
                c.send(f"X-Drip-{i}: a\r\n".encode())
            except (BrokenPipeError, ConnectionResetError):
                closed = True
                break
            i += 1
            if c.wait_closed(0.25):
                closed = True
                break
            if c.buf:
                self.assertTrue(c.buf.startswith(b"HTTP/1.1 408 "), c.buf[:200])
                c.read_response()  # the 408 itself; then the close
                closed = c.wait_closed(1.0)
                break
        elapsed = time.monotonic() - t0
        self.assertTrue(closed, "a client trickling header lines kept the connection open past header_timeout")
        self.assertLess(elapsed, 3.5)

    def test_idle_new_connection_closed(self):
        self.start('header_timeout = "1s"\nkeepalive_timeout = "1s"')
        c = self.raw(self.port)
        self.closed_after(c, 0.7, 3.5, "connection that never sends a byte")

    def test_keepalive_timeout(self):
        self.start('header_timeout = "10s"\nkeepalive_timeout = "1s"')
        c = self.raw(self.port)
        self.assertEqual(c.request("GET", "/hello.txt").status, 200)
        time.sleep(0.3)
        self.assertEqual(c.request("GET", "/hello.txt").status, 200, "closed before keepalive_timeout")
        elapsed, data = self.closed_after(c, 0.7, 3.5, "idle keep-alive connection")
        self.assertEqual(data, b"", "an idle keep-alive connection is closed silently (no 408)")

    def test_body_timeout(self):
        self.start('body_timeout = "1s"\nheader_timeout = "10s"\nkeepalive_timeout = "10s"')
        c = self.raw(self.port)
        c.send(build_request("POST", "/echo", {"Content-Length": "100"}) + b"x" * 10)
        # /echo does not read its body, so its response may come first; the server still has to
        # drain the body, and gives up body_timeout after the last body bytes.
        self.closed_after(c, 0.8, 3.5, "request body stalled", early_response=b"\r\n\r\nok")
        self.assert_serving(self.srv, "/hello.txt")

    def test_send_timeout(self):
        big = os.urandom(24 * 1024 * 1024)
        self.start('send_timeout = "1s"', files={"big.bin": big})
        c = self.raw(self.port, rcvbuf=4096)
        c.send(build_request("GET", "/big.bin"))
        version, status, reason, headers, _ = c.read_head()
        self.assertEqual(status, 200)
        time.sleep(3.5)  # never read: the server must give up after send_timeout
        received = len(c.buf)
        c.sock.settimeout(5)
        try:
            while True:
                chunk = c.sock.recv(1 << 20)
                if not chunk:
                    break
                received += len(chunk)
        except ConnectionResetError:
            pass
        except (socket.timeout, TimeoutError):
            self.fail(f"connection still open and silent long after send_timeout ({received} bytes read)")
        self.assertLess(received, len(big), "the whole body arrived although the client never read")
        self.assert_serving(self.srv, "/hello.txt")

    # ---- sizes ----

    def test_max_header_bytes(self):
        self.start("max_header_bytes = 2048")
        ok = {f"X-H{i}": "v" * 100 for i in range(10)}  # ~1.1 KB
        self.assertEqual(self.raw_request(self.port, "GET", "/hello.txt", ok).status, 200)
        c = self.raw(self.port)
        c.send(build_request("GET", "/hello.txt", {f"X-H{i}": "v" * 100 for i in range(30)}))
        r = c.read_response()
        self.assertEqual(r.status, 431, r)
        self.assertTrue(c.wait_closed(3), "connection open after 431")

    def test_huge_target_414(self):
        self.start("max_header_bytes = 2048")
        c = self.raw(self.port)
        c.send(build_request("GET", "/" + "a" * 3000))
        r = c.read_response()
        self.assertEqual(r.status, 414, r)
        self.assertTrue(c.wait_closed(3), "connection open after 414")

    def test_max_body_bytes_content_length(self):
        self.start('max_body_bytes = "1k"')
        c = self.raw(self.port)
        r = c.request("POST", "/echo", body=b"x" * 1024)
        self.assertEqual((r.status, r.body), (200, b"ok"), "a body of exactly max_body_bytes is fine")
        c = self.raw(self.port)
        c.send(build_request("POST", "/echo", {"Content-Length": "2000"}))  # the body is never sent
        r = c.read_response()
        self.assertEqual(r.status, 413, r)
        self.assertTrue(c.wait_closed(3), "connection open after 413")

    def test_max_body_bytes_chunked(self):
        self.start('max_body_bytes = "1k"')
        c = self.raw(self.port)
        chunks = b"".join(b"1f4\r\n" + b"y" * 500 + b"\r\n" for _ in range(4)) + b"0\r\n\r\n"
        c.send(build_request("POST", "/echo", {"Transfer-Encoding": "chunked"}) + chunks)
        r = c.read_response()
        self.assertEqual(r.status, 413, r)
        self.assertTrue(c.wait_closed(3), "connection open after 413")

    def test_max_body_bytes_expect_continue(self):
        self.start('max_body_bytes = "1k"')
        c = self.raw(self.port)
        c.send(build_request("POST", "/echo", {"Content-Length": "5000", "Expect": "100-continue"}))
        r = c.read_response(timeout=3)
        self.assertEqual(r.status, 413, f"no 100 Continue for a body that will be refused: {r}")

    def test_max_requests_per_connection(self):
        self.start("max_requests_per_connection = 3")
        c = self.raw(self.port)
        for i in range(1, 4):
            r = c.request("GET", "/hello.txt")
            self.assertEqual(r.status, 200)
            if i < 3:
                self.assertNotIn("close", r.connection_tokens(), f"response {i}: {r}")
            else:
                self.assertIn("close", r.connection_tokens(), f"response 3 of 3 must carry Connection: close: {r}")
        self.assertTrue(c.wait_closed(2), "connection open after max_requests_per_connection")

    def test_max_requests_per_connection_pipelined(self):
        self.start("max_requests_per_connection = 3")
        c = self.raw(self.port)
        c.send(b"".join(build_request("GET", "/hello.txt") for _ in range(5)))
        for i in range(3):
            r = c.read_response()
            self.assertEqual((r.status, r.body), (200, b"hello\n"))
        self.assertIn("close", r.connection_tokens())
        self.assertTrue(c.wait_closed(2), f"more than 3 responses on one connection: {c.buf[:200]!r}")

    # ---- connections ----

    def test_max_connections(self):
        self.start('max_connections = 4\nkeepalive_timeout = "30s"\nheader_timeout = "30s"')
        held = [self.raw(self.port) for _ in range(4)]
        for c in held:
            self.assertEqual(c.request("GET", "/hello.txt").status, 200)
        # One more: refused cleanly (a 503 then close, or a close), promptly, never left hanging.
        extra = self.raw(self.port, timeout=3)
        try:
            extra.send(build_request("GET", "/hello.txt"))
            data = extra.read_until_close(timeout=3)
        except (ConnectionResetError, BrokenPipeError):
            data = b""
        if data:
            self.assertTrue(data.startswith(b"HTTP/1.1 503 "), f"connection over max_connections got {data[:300]!r}")
        # The established connections keep working.
        for c in held:
            self.assertEqual(c.request("GET", "/hello.txt").body, b"hello\n")
        # Freeing a slot lets a new connection in.
        held[0].close()

        def new_conn_works():
            try:
                with RawClient(self.port, timeout=2) as c:
                    return c.request("GET", "/hello.txt").status == 200
            except (OSError, AssertionError, Exception):  # noqa: BLE001
                return False

        self.wait_for(new_conn_works, timeout=3, interval=0.1, msg="a new connection after one closed")


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


class ClientLimitsTest(ServerTestCase):
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
        line = 'limit "conns": refusing connections over 2 from 127.0.0.8'
        self.assertIn(line, srv.stderr_once_it_has(line))

    def test_http2_refusals_carry_retry_after(self):
        harness.require_tool("curl", "curl")
        root = self.make_root({"key/f.txt": "key\n", "conn/f.txt": "conn\n"})
        text = harness.make_config(root, workers=2, routes=ROUTES + harness.STATIC_FALLBACK)
        text = text.replace("[[site]]\n", LIMITS + "\n[[site]]\n", 1)
        text = h2c(text)
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
        text = h2c(text)
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
        srv.signal(signal.SIGHUP)
        self.wait_for(lambda: "reload" in srv.stderr().lower(), msg="the reload")
        time.sleep(0.3)
        conn2 = connect(srv.port, "127.0.0.10")
        statuses = [get(conn2, "/key/f.txt", {"X-Api-Key": "r"})[0] for _ in range(3)]
        self.assertEqual(statuses.count(200), 1, statuses)


if __name__ == "__main__":
    main()
