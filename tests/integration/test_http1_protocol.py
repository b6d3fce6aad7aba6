"""HTTP/1.1 protocol behaviour: keep-alive, pipelining, request bodies (Content-Length and chunked),
Expect: 100-continue, HEAD, OPTIONS, 405 (also for unknown methods), absolute-form targets, Host."""

import os
import re
import socket
import time

from harness import (STATIC_FALLBACK, RawClient, ServerTestCase, build_request, main, make_config,
                     parse_http_date)

FILES = {
    "index.html": "<!doctype html><title>home</title><p>home page</p>\n",
    "hello.txt": "hello\n",
    "a.txt": "AAAA\n",
    "b.txt": "BBBBBBBB\n",
    "c.txt": "CCCCCCCCCCCC\n",
}

# /echo accepts bodies (a `return` route that allows POST and PUT): the body is read and discarded.
ROUTES = """
[[site.route]]
exact = "/echo"
methods = ["GET", "HEAD", "POST", "PUT"]
return = 200
body = "ok"
""" + STATIC_FALLBACK


class Http1Test(ServerTestCase):
    def setUp(self):
        super().setUp()
        self.root = self.make_root(FILES)
        self.srv = self.start_config(make_config(self.root, routes=ROUTES))
        self.port = self.srv.port

    # ---- keep-alive ----

    def test_http11_keepalive_by_default(self):
        c = self.raw(self.port)
        for i in range(5):
            r = c.request("GET", "/hello.txt")
            self.assertEqual(r.status, 200, r)
            self.assertEqual(r.body, b"hello\n")
            self.assertNotIn("close", r.connection_tokens(), f"request {i}: {r}")
        self.assertFalse(c.wait_closed(0.3), "server closed an idle HTTP/1.1 keep-alive connection at once")
        r = c.request("GET", "/a.txt")
        self.assertEqual(r.body, b"AAAA\n")

    def test_status_line_date_and_server_headers(self):
        c = self.raw(self.port)
        r = c.request("GET", "/hello.txt")
        self.assertEqual(r.version, "HTTP/1.1")
        self.assertEqual(r.reason, "OK")
        date = r.header("date")
        self.assertIsNotNone(date, r)
        self.assertLess(abs(parse_http_date(date).timestamp() - time.time()), 5, date)
        self.assertEqual(r.header("server"), "peregrine", r)
        self.assertEqual(r.header("content-length"), "6", r)

    def test_many_requests_one_http_client_connection(self):
        import http.client
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
        self.addCleanup(conn.close)
        conn.connect()
        sock = conn.sock
        for i in range(200):
            conn.request("GET", "/b.txt" if i % 2 else "/a.txt")
            resp = conn.getresponse()
            self.assertEqual(resp.status, 200)
            self.assertEqual(resp.read(), b"BBBBBBBB\n" if i % 2 else b"AAAA\n")
            self.assertIs(conn.sock, sock, f"http.client had to reconnect after request {i}")

    def test_http10_closes_by_default(self):
        c = self.raw(self.port)
        c.send(b"GET /hello.txt HTTP/1.0\r\n\r\n")
        r = c.read_response()
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.body, b"hello\n")
        self.assertNotIn("keep-alive", r.connection_tokens(), r)
        self.assertTrue(c.wait_closed(2), "HTTP/1.0 request without keep-alive: connection left open")

    def test_http10_keepalive(self):
        c = self.raw(self.port)
        for path, body in (("/hello.txt", b"hello\n"), ("/a.txt", b"AAAA\n"), ("/b.txt", b"BBBBBBBB\n")):
            c.send(f"GET {path} HTTP/1.0\r\nConnection: keep-alive\r\n\r\n".encode())
            r = c.read_response()
            self.assertEqual(r.status, 200, r)
            self.assertEqual(r.body, body)
            self.assertIn("keep-alive", r.connection_tokens(),
                          f"HTTP/1.0 + Connection: keep-alive must be answered with Connection: keep-alive: {r}")
            self.assertIsNotNone(r.header("content-length"), r)
        self.assertFalse(c.wait_closed(0.3), "HTTP/1.0 keep-alive connection closed after the response")

    def test_connection_close_request(self):
        c = self.raw(self.port)
        r = c.request("GET", "/hello.txt", {"Connection": "close"})
        self.assertEqual(r.status, 200)
        self.assertEqual(r.body, b"hello\n")
        self.assertIn("close", r.connection_tokens(), r)
        self.assertTrue(c.wait_closed(2), "Connection: close request: connection left open")

    def test_request_sent_one_byte_at_a_time(self):
        c = self.raw(self.port)
        for b in build_request("GET", "/hello.txt", {"User-Agent": "slow"}):
            c.send(bytes([b]))
            time.sleep(0.002)
        r = c.read_response()
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.body, b"hello\n")

    def test_query_string_ignored_for_files(self):
        status, _, body = self.get(self.port, "/hello.txt?x=1&y=%20")
        self.assertEqual((status, body), (200, b"hello\n"))

    # ---- pipelining ----

    def test_pipelining_in_order(self):
        c = self.raw(self.port)
        paths = ["/a.txt", "/b.txt", "/hello.txt", "/c.txt", "/nope.txt", "/a.txt"]
        c.send(b"".join(build_request("GET", p) for p in paths))
        expected = [(200, b"AAAA\n"), (200, b"BBBBBBBB\n"), (200, b"hello\n"), (200, b"CCCCCCCCCCCC\n"),
                    (404, None), (200, b"AAAA\n")]
        for p, (status, body) in zip(paths, expected):
            r = c.read_response()
            self.assertEqual(r.status, status, f"pipelined GET {p}: {r}")
            if body is not None:
                self.assertEqual(r.body, body, f"pipelined GET {p}")

    def test_pipelining_many_with_head_and_extra_crlf(self):
        c = self.raw(self.port)
        reqs = []
        for i in range(50):
            method = "HEAD" if i % 5 == 0 else "GET"
            reqs.append((method, "/c.txt" if i % 2 else "/b.txt"))
        data = b""
        for method, path in reqs:
            data += build_request(method, path)
        c.send(data)
        for i, (method, path) in enumerate(reqs):
            r = c.read_response(head_request=(method == "HEAD"))
            self.assertEqual(r.status, 200, f"request {i} {method} {path}: {r}")
            want = b"CCCCCCCCCCCC\n" if path == "/c.txt" else b"BBBBBBBB\n"
            self.assertEqual(r.header("content-length"), str(len(want)))
            self.assertEqual(r.body, b"" if method == "HEAD" else want, f"request {i} {method} {path}")
        self.assertEqual(c.buf, b"", "bytes after the last pipelined response")

    def test_pipelining_across_packets(self):
        c = self.raw(self.port)
        data = build_request("GET", "/a.txt") + build_request("GET", "/b.txt") + build_request("GET", "/c.txt")
        # Split in the middle of the second request's head.
        cut = len(build_request("GET", "/a.txt")) + 9
        c.send(data[:cut])
        time.sleep(0.1)
        c.send(data[cut:])
        self.assertEqual(c.read_response().body, b"AAAA\n")
        self.assertEqual(c.read_response().body, b"BBBBBBBB\n")
        self.assertEqual(c.read_response().body, b"CCCCCCCCCCCC\n")

    # ---- request bodies ----

    def test_content_length_body_then_next_request(self):
        c = self.raw(self.port)
        body = b"x" * 1000
        c.send(build_request("POST", "/echo", {"Content-Type": "text/plain"}, body) + build_request("GET", "/a.txt"))
        r = c.read_response()
        self.assertEqual((r.status, r.body), (200, b"ok"), r)
        r = c.read_response()
        self.assertEqual((r.status, r.body), (200, b"AAAA\n"),
                         f"request after a Content-Length body was misparsed: {r}")

    def test_body_sent_in_pieces(self):
        c = self.raw(self.port)
        body = b"0123456789" * 300
        c.send(build_request("PUT", "/echo", {"Content-Length": str(len(body))}))
        for i in range(0, len(body), 700):
            time.sleep(0.02)
            c.send(body[i:i + 700])
        r = c.read_response()
        self.assertEqual((r.status, r.body), (200, b"ok"), r)
        self.assertEqual(c.request("GET", "/a.txt").body, b"AAAA\n")

    def test_chunked_body(self):
        c = self.raw(self.port)
        chunked = (b"5\r\nhello\r\n"
                   b"1A;name=value\r\n" + b"z" * 26 + b"\r\n"
                   b"0\r\n"
                   b"X-Trailer: yes\r\n"
                   b"\r\n")
        c.send(build_request("POST", "/echo", {"Transfer-Encoding": "chunked"}) + chunked
               + build_request("GET", "/b.txt"))
        r = c.read_response()
        self.assertEqual((r.status, r.body), (200, b"ok"), r)
        r = c.read_response()
        self.assertEqual((r.status, r.body), (200, b"BBBBBBBB\n"),
                         f"request after a chunked body (with extension and trailer) was misparsed: {r}")

    def test_chunked_body_byte_by_byte(self):
        c = self.raw(self.port)
        chunked = b"3\r\nabc\r\n10\r\n" + b"y" * 16 + b"\r\n0\r\n\r\n"
        c.send(build_request("POST", "/echo", {"Transfer-Encoding": "chunked"}))
        for b in chunked:
            c.send(bytes([b]))
            time.sleep(0.002)
        r = c.read_response()
        self.assertEqual((r.status, r.body), (200, b"ok"), r)
        self.assertEqual(c.request("GET", "/c.txt").body, b"CCCCCCCCCCCC\n")

    def test_chunked_uppercase_hex_and_large(self):
        c = self.raw(self.port)
        data = b"q" * 0xABCD
        c.send(build_request("POST", "/echo", {"Transfer-Encoding": "chunked"})
               + b"ABCD\r\n" + data + b"\r\n0\r\n\r\n")
        r = c.read_response()
        self.assertEqual((r.status, r.body), (200, b"ok"), r)
        self.assertEqual(c.request("GET", "/a.txt").body, b"AAAA\n")

    # ---- Expect: 100-continue ----

    def check_expect_continue(self, method, head_headers, body):
        """RFC 9110 10.1.1: either an interim 100 Continue, then the final response once the body
        is sent; or a final response right away, which then either closes the connection or (if
        it stays open) reads the body that follows. Never a hang, never the body taken as the
        next request."""
        c = self.raw(self.port)
        c.send(build_request(method, "/echo", dict(head_headers, Expect="100-continue")))
        r = c.read_response(timeout=3)
        if r.status == 100:
            self.assertTrue(r.head_bytes.startswith(b"HTTP/1.1 100 Continue\r\n"), r.head_bytes)
            c.send(body)
            r = c.read_response()
            self.assertEqual((r.status, r.body), (200, b"ok"), r)
        else:
            self.assertEqual((r.status, r.body), (200, b"ok"), r)
            if "close" in r.connection_tokens():
                self.assertTrue(c.wait_closed(2), "response said Connection: close but the connection stayed open")
                return
            c.send(body)
        self.assertEqual(c.request("GET", "/a.txt").body, b"AAAA\n", "request after the body")

    def test_expect_100_continue(self):
        self.check_expect_continue("POST", {"Content-Length": "5"}, b"hello")

    def test_expect_100_continue_chunked(self):
        self.check_expect_continue("PUT", {"Transfer-Encoding": "chunked"}, b"4\r\nbody\r\n0\r\n\r\n")

    def test_expect_with_body_already_sent(self):
        # Clients (curl after a second, http.client always) may send the body without waiting.
        c = self.raw(self.port)
        c.send(build_request("POST", "/echo", {"Content-Length": "5", "Expect": "100-continue"}) + b"hello"
               + build_request("GET", "/a.txt"))
        r = c.read_final_response()
        self.assertEqual((r.status, r.body), (200, b"ok"), r)
        if "close" not in r.connection_tokens():
            self.assertEqual(c.read_final_response().body, b"AAAA\n", "the body was taken for the next request")

    def test_curl_expect_continue(self):
        import subprocess
        body_file = os.path.join(self.tmp, "upload.bin")
        with open(body_file, "wb") as f:
            f.write(b"u" * 200000)
        r = subprocess.run(["curl", "-s", "-S", "--max-time", "10", "-H", "Expect: 100-continue",
                            "--data-binary", "@" + body_file, f"http://127.0.0.1:{self.port}/echo",
                            "-w", "\n%{http_code}"], capture_output=True, timeout=20)
        self.assertEqual(r.stdout, b"ok\n200", r.stderr)

    def test_expect_100_continue_not_sent_when_body_is_refused(self):
        # POST to a static file is refused with 405: the body will not be read, so no 100.
        c = self.raw(self.port)
        c.send(build_request("POST", "/hello.txt", {"Content-Length": "5", "Expect": "100-continue"}))
        r = c.read_response(timeout=3)
        self.assertEqual(r.status, 405, f"POST with Expect: 100-continue to a static file: {r}")

    def test_http_client_with_body_and_expect(self):
        status, _, body = self.http(self.port, "POST", "/echo", headers={"Expect": "100-continue"},
                                    body=b"payload")
        # http.client sends the body right away; the server must cope with that too.
        self.assertEqual((status, body), (200, b"ok"))

    # ---- HEAD, OPTIONS, 405 ----

    def test_head_same_headers_as_get(self):
        for path in ("/hello.txt", "/", "/index.html", "/nope.txt", "/echo"):
            c = self.raw(self.port)
            g = c.request("GET", path)
            h = c.request("HEAD", path)
            self.assertEqual(h.status, g.status, path)
            self.assertEqual(h.body, b"")
            strip = lambda hs: sorted((k.lower(), v) for k, v in hs if k.lower() not in ("date",))
            self.assertEqual(strip(h.headers), strip(g.headers), f"HEAD vs GET headers for {path}")
            self.assertEqual(h.header("content-length"), str(len(g.body)), f"HEAD {path}: {h}")
            # Nothing after the HEAD response head: the next response starts right away.
            self.assertEqual(c.request("GET", "/a.txt").body, b"AAAA\n", f"after HEAD {path}")

    def test_options(self):
        for target in ("/hello.txt", "/"):
            c = self.raw(self.port)
            r = c.request("OPTIONS", target)
            self.assertIn(r.status, (200, 204), f"OPTIONS {target}: {r}")
            allow = {m.strip() for m in (r.header("allow") or "").split(",")}
            self.assertTrue({"GET", "HEAD", "OPTIONS"} <= allow, f"OPTIONS {target} Allow: {r.header('allow')!r}")
            if r.status == 200:
                self.assertEqual(r.header("content-length", "0"), "0", r)
            self.assertEqual(c.request("GET", "/a.txt").body, b"AAAA\n", "request after OPTIONS")

    def test_options_asterisk(self):
        c = self.raw(self.port)
        r = c.request("OPTIONS", "*")
        self.assertIn(r.status, (200, 204), f"OPTIONS * HTTP/1.1: {r}")

    def test_405_on_static_file(self):
        for method in ("POST", "PUT", "DELETE", "PATCH"):
            c = self.raw(self.port)
            body = b"data" if method in ("POST", "PUT", "PATCH") else b""
            r = c.request(method, "/hello.txt", body=body)
            self.assertEqual(r.status, 405, f"{method} /hello.txt: {r}")
            allow = {m.strip() for m in (r.header("allow") or "").split(",")}
            self.assertTrue({"GET", "HEAD"} <= allow, f"{method} /hello.txt Allow: {r.header('allow')!r}")
            self.assertNotIn(method, allow)
            # The connection stays usable (the body, if any, was consumed).
            if "close" not in r.connection_tokens():
                self.assertEqual(c.request("GET", "/a.txt").body, b"AAAA\n", f"after 405 for {method}")

    def test_unknown_method_on_static_is_405(self):
        # Any token is routed (proxy and FastCGI pass it on); a static route does not serve it.
        for method in ("FOO", "BREW", "PROPFIND2"):
            c = self.raw(self.port)
            c.send(f"{method} / HTTP/1.1\r\nHost: localhost\r\n\r\n".encode())
            r = c.read_response()
            self.assertEqual(r.status, 405, f"{method} / HTTP/1.1: {r}")
            self.assertEqual(r.header("allow"), "GET, HEAD, OPTIONS")
        self.assert_serving(self.srv)

    # ---- request targets and Host ----

    def test_absolute_form_target(self):
        c = self.raw(self.port)
        c.send(b"GET http://localhost/hello.txt HTTP/1.1\r\nHost: localhost\r\n\r\n")
        r = c.read_response()
        self.assertEqual((r.status, r.body), (200, b"hello\n"), r)
        c.send(f"GET http://127.0.0.1:{self.port}/a.txt?q=1 HTTP/1.1\r\nHost: 127.0.0.1:{self.port}\r\n\r\n".encode())
        r = c.read_response()
        self.assertEqual((r.status, r.body), (200, b"AAAA\n"), r)

    def test_missing_host_http11_is_400(self):
        c = self.raw(self.port)
        c.send(b"GET /hello.txt HTTP/1.1\r\nUser-Agent: x\r\n\r\n")
        r = c.read_response()
        self.assertEqual(r.status, 400, f"HTTP/1.1 request without Host: {r}")

    def test_missing_host_http10_is_fine(self):
        c = self.raw(self.port)
        c.send(b"GET /hello.txt HTTP/1.0\r\n\r\n")
        r = c.read_response()
        self.assertEqual((r.status, r.body), (200, b"hello\n"), r)

    def test_header_names_case_insensitive(self):
        c = self.raw(self.port)
        c.send(b"GET /hello.txt HTTP/1.1\r\nhOsT: localhost\r\ncoNNection: close\r\n\r\n")
        r = c.read_response()
        self.assertEqual((r.status, r.body), (200, b"hello\n"), r)
        self.assertTrue(c.wait_closed(2), "`coNNection: close` was not honoured")

    def test_many_concurrent_connections(self):
        clients = [RawClient(self.port) for _ in range(100)]
        try:
            for c in clients:
                c.send(build_request("GET", "/hello.txt"))
            for c in clients:
                r = c.read_response()
                self.assertEqual((r.status, r.body), (200, b"hello\n"))
        finally:
            for c in clients:
                c.close()
        self.assert_serving(self.srv)

    def test_client_disconnect_mid_request_does_not_hurt(self):
        for i in range(20):
            s = socket.create_connection(("127.0.0.1", self.port))
            s.sendall(b"GET /hello.txt HTTP/1.1\r\nHost: x" if i % 2 else build_request("GET", "/hello.txt")[:5])
            s.close()
        s = socket.create_connection(("127.0.0.1", self.port))
        s.sendall(build_request("GET", "/hello.txt"))
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        s.close()  # RST
        time.sleep(0.1)
        self.assert_serving(self.srv)


class BackPressureTest(ServerTestCase):
    def test_deep_pipeline_without_reading(self):
        # 400 pipelined requests for a 16 KB file sent before reading anything: the server must
        # stop reading while its output is blocked, then deliver every response, in order.
        body = bytes(range(256)) * 64
        root = self.make_root({"f.bin": body, "g.txt": b"g\n"})
        srv = self.start_config(make_config(root))
        c = self.raw(srv.port, timeout=15)
        reqs = b"".join(build_request("GET", "/f.bin" if i % 3 else "/g.txt") for i in range(400))
        import threading
        sender = threading.Thread(target=c.send, args=(reqs,))
        sender.start()
        time.sleep(0.5)
        for i in range(400):
            r = c.read_response()
            self.assertEqual(r.status, 200, f"response {i}")
            self.assertEqual(r.body, body if i % 3 else b"g\n", f"response {i}")
        sender.join(10)
        self.assertFalse(c.wait_closed(0.2))

    def test_half_close_after_request(self):
        root = self.make_root({"hello.txt": b"hello\n"})
        srv = self.start_config(make_config(root))
        c = self.raw(srv.port)
        c.send(build_request("GET", "/hello.txt"))
        c.sock.shutdown(socket.SHUT_WR)
        r = c.read_response()
        self.assertEqual((r.status, r.body), (200, b"hello\n"), "a client that half-closes after its request")
        self.assertTrue(c.wait_closed(2))

    def test_many_idle_connections(self):
        root = self.make_root({"hello.txt": b"hello\n"})
        srv = self.start_config(make_config(root, workers=2))
        idle = [RawClient(srv.port) for _ in range(500)]
        try:
            time.sleep(0.3)
            self.assertEqual(self.get(srv.port, "/hello.txt")[::2], (200, b"hello\n"))
            for c in idle[::50]:
                self.assertEqual(c.request("GET", "/hello.txt").body, b"hello\n")
        finally:
            for c in idle:
                c.close()


class QuickModeTest(ServerTestCase):
    def test_quick_mode_serves_root(self):
        root = self.make_root(FILES)
        srv = self.start_quick(root, workers=2)
        status, headers, body = self.get(srv.port, "/hello.txt")
        self.assertEqual((status, body), (200, b"hello\n"))
        status, headers, body = self.get(srv.port, "/")
        self.assertEqual(status, 200)
        self.assertEqual(body, FILES["index.html"].encode())

    def test_several_workers_share_the_port(self):
        root = self.make_root(FILES)
        srv = self.start_quick(root, workers=3)
        ports = set(re.findall(r"listening on 127\.0\.0\.1:(\d+)", srv.stderr()))
        self.assertEqual(ports, {str(srv.port)}, "workers listen on different ports")
        clients = [RawClient(srv.port) for _ in range(150)]
        try:
            for c in clients:
                c.send(build_request("GET", "/c.txt"))
            for c in clients:
                self.assertEqual(c.read_response().body, b"CCCCCCCCCCCC\n")
        finally:
            for c in clients:
                c.close()

    def test_quick_mode_default_workers(self):
        root = self.make_root(FILES)
        srv = self.start_quick(root, workers=None)
        for _ in range(20):
            self.assertEqual(self.get(srv.port, "/a.txt")[2], b"AAAA\n")


if __name__ == "__main__":
    main()
