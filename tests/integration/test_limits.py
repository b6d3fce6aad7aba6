"""[limits]: header_timeout (slowloris), keepalive_timeout, body_timeout, send_timeout,
max_connections, max_header_bytes, max_body_bytes, max_requests_per_connection."""

import os
import socket
import time

from harness import STATIC_FALLBACK, RawClient, ServerTestCase, build_request, main, make_config

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


if __name__ == "__main__":
    main()
