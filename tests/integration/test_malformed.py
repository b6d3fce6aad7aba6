"""Malformed requests over raw sockets: each gets the exact error status, then the connection is
closed (a request smuggled behind it is never answered), and the server keeps serving."""

import socket
import threading

from harness import STATIC_FALLBACK, RawClient, ServerTestCase, main, make_config

ROUTES = """
[[site.route]]
exact = "/echo"
methods = ["GET", "HEAD", "POST", "PUT"]
return = 200
body = "ok"
""" + STATIC_FALLBACK

H = "Host: localhost\r\n"
SMUGGLED = b"GET /secret-follow-up HTTP/1.1\r\nHost: localhost\r\n\r\n"

# (name, raw request bytes, expected status)
CASES = [
    # Framing: Content-Length / Transfer-Encoding
    ("conflicting Content-Length headers",
     f"POST /echo HTTP/1.1\r\n{H}Content-Length: 5\r\nContent-Length: 6\r\n\r\nhello!", 400),
    ("conflicting Content-Length list",
     f"POST /echo HTTP/1.1\r\n{H}Content-Length: 5, 6\r\n\r\nhello!", 400),
    ("Content-Length and Transfer-Encoding",
     f"POST /echo HTTP/1.1\r\n{H}Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400),
    ("Transfer-Encoding and Content-Length (reversed order)",
     f"POST /echo HTTP/1.1\r\n{H}Transfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n0\r\n\r\n", 400),
    ("negative Content-Length", f"POST /echo HTTP/1.1\r\n{H}Content-Length: -1\r\n\r\n", 400),
    ("non-numeric Content-Length", f"POST /echo HTTP/1.1\r\n{H}Content-Length: abc\r\n\r\n", 400),
    ("Content-Length with plus sign", f"POST /echo HTTP/1.1\r\n{H}Content-Length: +5\r\n\r\nhello", 400),
    ("Content-Length hex", f"POST /echo HTTP/1.1\r\n{H}Content-Length: 0x5\r\n\r\nhello", 400),
    ("Content-Length overflowing 64 bits",
     f"POST /echo HTTP/1.1\r\n{H}Content-Length: 99999999999999999999999999\r\n\r\n", 400),
    ("bad chunk size (not hex)",
     f"POST /echo HTTP/1.1\r\n{H}Transfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n", 400),
    ("bad chunk size (negative)",
     f"POST /echo HTTP/1.1\r\n{H}Transfer-Encoding: chunked\r\n\r\n-5\r\nhello\r\n0\r\n\r\n", 400),
    ("bad chunk size (0x prefix)",
     f"POST /echo HTTP/1.1\r\n{H}Transfer-Encoding: chunked\r\n\r\n0x5\r\nhello\r\n0\r\n\r\n", 400),
    ("bad chunk size (empty)",
     f"POST /echo HTTP/1.1\r\n{H}Transfer-Encoding: chunked\r\n\r\n\r\nhello\r\n0\r\n\r\n", 400),
    ("chunk size overflowing 64 bits",
     f"POST /echo HTTP/1.1\r\n{H}Transfer-Encoding: chunked\r\n\r\n{'f' * 32}\r\nhello\r\n0\r\n\r\n", 400),
    ("chunk data not followed by CRLF",
     f"POST /echo HTTP/1.1\r\n{H}Transfer-Encoding: chunked\r\n\r\n5\r\nhelloXX0\r\n\r\n", 400),
    # Header syntax
    ("whitespace before colon", f"GET / HTTP/1.1\r\nHost : localhost\r\n\r\n", 400),
    ("whitespace before colon (other header)", f"GET / HTTP/1.1\r\n{H}X-Foo : bar\r\n\r\n", 400),
    ("tab before colon", f"GET / HTTP/1.1\r\n{H}X-Foo\t: bar\r\n\r\n", 400),
    ("obsolete line folding (space)", f"GET / HTTP/1.1\r\n{H}X-Foo: a\r\n b\r\n\r\n", 400),
    ("obsolete line folding (tab)", f"GET / HTTP/1.1\r\n{H}X-Foo: a\r\n\tb\r\n\r\n", 400),
    ("whitespace before the first header", f"GET / HTTP/1.1\r\n {H}\r\n", 400),
    ("NUL in header value", f"GET / HTTP/1.1\r\n{H}X-Foo: a\x00b\r\n\r\n", 400),
    ("NUL in header name", f"GET / HTTP/1.1\r\n{H}X-F\x00oo: ab\r\n\r\n", 400),
    ("bare CR in header value", f"GET / HTTP/1.1\r\n{H}X-Foo: a\rb\r\n\r\n", 400),
    ("empty header name", f"GET / HTTP/1.1\r\n{H}: value\r\n\r\n", 400),
    ("header without colon", f"GET / HTTP/1.1\r\n{H}NoColonHere\r\n\r\n", 400),
    ("invalid character in header name", f"GET / HTTP/1.1\r\n{H}X(Foo): bar\r\n\r\n", 400),
    ("missing Host on HTTP/1.1", "GET / HTTP/1.1\r\nUser-Agent: x\r\n\r\n", 400),
    ("two Host headers", f"GET / HTTP/1.1\r\n{H}Host: other\r\n\r\n", 400),
    # Request line
    ("invalid method token", f"GE@T / HTTP/1.1\r\n{H}\r\n", 400),
    ("invalid method token (parenthesis)", f"G(ET) / HTTP/1.1\r\n{H}\r\n", 400),
    ("empty method", f" / HTTP/1.1\r\n{H}\r\n", 400),
    ("double space in request line", f"GET  / HTTP/1.1\r\n{H}\r\n", 400),
    ("trailing garbage after version", f"GET / HTTP/1.1 extra\r\n{H}\r\n", 400),
    ("missing version", f"GET /\r\n{H}\r\n", 400),
    ("invalid version HTTP/1.x", f"GET / HTTP/1.x\r\n{H}\r\n", 400),
    ("invalid version lower case", f"GET / http/1.1\r\n{H}\r\n", 400),
    ("invalid protocol name", f"GET / FOO/1.1\r\n{H}\r\n", 400),
    ("invalid version 1.10", f"GET / HTTP/1.10\r\n{H}\r\n", 400),
    ("version HTTP/2.0", f"GET / HTTP/2.0\r\n{H}\r\n", 505),
    ("version HTTP/3.0", f"GET / HTTP/3.0\r\n{H}\r\n", 505),
    ("origin-form target not starting with /", f"GET hello.txt HTTP/1.1\r\n{H}\r\n", 400),
    ("control character in target", f"GET /a\x01b HTTP/1.1\r\n{H}\r\n", 400),
    ("NUL in target", f"GET /a\x00b HTTP/1.1\r\n{H}\r\n", 400),
    ("invalid percent-encoding", f"GET /a%zz HTTP/1.1\r\n{H}\r\n", 400),
    ("truncated percent-encoding", f"GET /a%2 HTTP/1.1\r\n{H}\r\n", 400),
    ("binary garbage", "\x00\x01\x02\x03garbage\r\n\r\n", 400),
    ("huge target", f"GET /{'a' * 20000} HTTP/1.1\r\n{H}\r\n", 414),
    ("huge headers", f"GET / HTTP/1.1\r\n{H}" + "".join(f"X-Pad-{i}: {'v' * 1000}\r\n" for i in range(40)) + "\r\n", 431),
    ("huge single header", f"GET / HTTP/1.1\r\n{H}X-Big: {'v' * 40000}\r\n\r\n", 431),
    ("too many header fields", f"GET / HTTP/1.1\r\n{H}" + "".join(f"X-{i}: v\r\n" for i in range(150)) + "\r\n", 431),
]


class MalformedTest(ServerTestCase):
    def setUp(self):
        super().setUp()
        root = self.make_root({"index.html": "<p>home</p>\n", "hello.txt": "hello\n"})
        self.srv = self.start_config(make_config(root, routes=ROUTES))

    def check_rejected(self, name, raw, expected):
        raw = raw.encode("latin-1") if isinstance(raw, str) else raw
        c = RawClient(self.srv.port, timeout=5)
        try:
            c.send(raw + SMUGGLED)
            try:
                r = c.read_response()
            except Exception as e:  # noqa: BLE001 - reported as a test failure with the request
                self.fail(f"[{name}] request {raw[:300]!r}: expected {expected}, got no valid response ({e})")
            self.assertEqual(r.status, expected, f"[{name}] request {raw[:300]!r}: expected {expected}, got {r}")
            self.assertTrue(c.wait_closed(3),
                            f"[{name}] request {raw[:300]!r}: connection not closed after {expected} "
                            f"(further bytes: {c.buf[:200]!r})")
        finally:
            c.close()

    def test_each_malformed_request(self):
        for name, raw, expected in CASES:
            with self.subTest(name):
                self.check_rejected(name, raw, expected)
        self.assert_serving(self.srv)

    def test_higher_minor_version_is_served_as_http11(self):
        # RFC 9110 2.5 (Apache's http_strict probe): HTTP/1.2 is processed as HTTP/1.1, answered
        # with HTTP/1.1 and kept alive; Host is required as for 1.1.
        c = self.raw(self.srv.port)
        for version in ("HTTP/1.2", "HTTP/1.9"):
            c.send(f"GET /hello.txt {version}\r\n{H}\r\n".encode())
            r = c.read_response()
            self.assertEqual((r.status, r.version), (200, "HTTP/1.1"), r)
            self.assertNotIn("close", r.connection_tokens(), r)
        c.send(b"GET /hello.txt HTTP/1.2\r\n\r\n")
        self.assertEqual(c.read_response().status, 400)

    def test_error_response_is_well_formed(self):
        c = self.raw(self.srv.port)
        c.send(f"GET / HTTP/1.1\r\n{H}X-Foo : bar\r\n\r\n".encode())
        r = c.read_response()
        self.assertEqual(r.status, 400)
        self.assertEqual(r.version, "HTTP/1.1")
        self.assertEqual(r.reason, "Bad Request")
        self.assertEqual(r.header("content-length"), str(len(r.body)), r)
        self.assertIn("close", r.connection_tokens(), f"a 400 that closes the connection should say so: {r}")

    def test_malformed_after_good_request_on_keepalive(self):
        c = self.raw(self.srv.port)
        r = c.request("GET", "/hello.txt")
        self.assertEqual(r.status, 200)
        c.send(f"GET / HTTP/1.1\r\n{H}X-Foo: a\r\n folded\r\n\r\n".encode() + SMUGGLED)
        r = c.read_response()
        self.assertEqual(r.status, 400, r)
        self.assertTrue(c.wait_closed(3), "connection open after 400 on a kept-alive connection")

    def test_no_response_leaks_into_next_connection(self):
        # Whatever state a connection closed for malformed input had (a response queued for the
        # request before the bad bytes, a half-decoded body), the next connection on the freed
        # slot gets exactly its own response and nothing else.
        bad_bodies = [
            "zz\r\nhello\r\n0\r\n\r\n",
            "5\r\nhelloXX0\r\n\r\n",
            f"{'f' * 32}\r\nhello\r\n0\r\n\r\n",
        ]
        for body in bad_bodies:
            with self.subTest(body=body):
                with RawClient(self.srv.port) as c1:
                    c1.send(f"POST /echo HTTP/1.1\r\n{H}Transfer-Encoding: chunked\r\n\r\n{body}".encode())
                    first = c1.read_until_close(timeout=3)
                self.assertNotIn(b" 200 OK", first, f"a malformed chunked body was answered 200: {first!r}")
                with RawClient(self.srv.port) as c2:
                    c2.send(f"GET /hello.txt HTTP/1.1\r\n{H}Connection: close\r\n\r\n".encode())
                    data = c2.read_until_close(timeout=3)
                self.assertEqual(data.count(b"HTTP/1.1 "), 1,
                                 f"the next connection got more than its own response: {data!r}")
                self.assertTrue(data.startswith(b"HTTP/1.1 200 OK\r\n") and data.endswith(b"\r\n\r\nhello\n"),
                                f"GET /hello.txt on a new connection got {data!r}")

    def test_pipelined_after_malformed_not_answered(self):
        # Content-Length + Transfer-Encoding: the classic smuggling vector. The second request
        # hidden in what a chunked reading would call the end of the body must never be served.
        c = self.raw(self.srv.port)
        c.send(f"POST /echo HTTP/1.1\r\n{H}Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n"
               f"0\r\n\r\nGET /hello.txt HTTP/1.1\r\n{H}\r\n".encode())
        r = c.read_response()
        self.assertEqual(r.status, 400, r)
        self.assertTrue(c.wait_closed(3), f"more data after 400: {c.buf!r}")

    def test_unknown_transfer_coding_rejected(self):
        c = self.raw(self.srv.port)
        c.send(f"POST /echo HTTP/1.1\r\n{H}Transfer-Encoding: gzip\r\n\r\nxxxx".encode() + SMUGGLED)
        r = c.read_response()
        # RFC 9112 6.1: 501 for a transfer coding the server does not understand (400 is also safe).
        self.assertIn(r.status, (400, 501), r)
        self.assertTrue(c.wait_closed(3), "connection open after an unknown transfer coding")

    def test_chunked_not_last_rejected(self):
        c = self.raw(self.srv.port)
        c.send(f"POST /echo HTTP/1.1\r\n{H}Transfer-Encoding: chunked, gzip\r\n\r\n0\r\n\r\n".encode() + SMUGGLED)
        r = c.read_response()
        self.assertIn(r.status, (400, 501), r)
        self.assertTrue(c.wait_closed(3))

    def test_empty_request_and_stray_crlf(self):
        # Leading CRLFs before a request line are allowed (RFC 9112 2.2).
        c = self.raw(self.srv.port)
        c.send(b"\r\n\r\nGET /hello.txt HTTP/1.1\r\nHost: x\r\n\r\n")
        r = c.read_response()
        self.assertEqual((r.status, r.body), (200, b"hello\n"), r)
        # A client that connects and closes without a byte does no harm.
        for _ in range(10):
            socket.create_connection(("127.0.0.1", self.srv.port)).close()
        self.assert_serving(self.srv)

    def test_concurrent_garbage_does_not_crash(self):
        errors = []

        def worker(seed):
            import random
            rnd = random.Random(seed)
            for _ in range(40):
                name, raw, _ = rnd.choice(CASES)
                data = raw.encode("latin-1")
                if rnd.random() < 0.5:
                    # Random corruption of a valid-looking request.
                    data = bytearray(data)
                    for _ in range(rnd.randint(1, 5)):
                        data[rnd.randrange(len(data))] = rnd.randrange(256)
                    data = bytes(data)
                try:
                    s = socket.create_connection(("127.0.0.1", self.srv.port), timeout=3)
                    s.sendall(data)
                    s.shutdown(socket.SHUT_WR)
                    while s.recv(65536):
                        pass
                    s.close()
                except (ConnectionResetError, BrokenPipeError):
                    pass
                except Exception as e:  # noqa: BLE001
                    errors.append(f"{name}: {e!r}")

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        self.assertEqual(errors, [], "connections hung or failed oddly")
        self.assert_serving(self.srv)


if __name__ == "__main__":
    main()
