"""examples/hello: the library embedded in a program with one in-process handler that answers
"Hello world" to every request."""

import os
import re
import signal
import subprocess
import threading

from harness import HELLO_BIN, RawClient, ServerTestCase, build_request, main


class HelloTest(ServerTestCase):
    def setUp(self):
        super().setUp()
        self.assertTrue(os.path.exists(HELLO_BIN), f"HELLO_BIN {HELLO_BIN} does not exist")
        self.srv = self.start_argv([HELLO_BIN, "--listen", "127.0.0.1:0"], name="hello")
        self.port = self.srv.port

    def assert_hello(self, status, body, what):
        self.assertEqual(status, 200, what)
        self.assertEqual(body.rstrip(b"\n"), b"Hello world", what)

    def test_any_path(self):
        for path in ("/", "/index.html", "/a/b/c?x=1", "/x/%2e%2e/y", "/nonexistent.php"):
            status, _, body = self.get(self.port, path)
            self.assert_hello(status, body, f"GET {path}")

    def test_callback_and_coroutine_routes(self):
        # The asynchronous API's two styles give the same answer, on new and kept-alive
        # connections alike.
        for path in ("/callback", "/coroutine", "/coroutine/x?y=1"):
            status, _, body = self.get(self.port, path)
            self.assert_hello(status, body, f"GET {path}")
            c = self.raw(self.port)
            for i in range(50):
                r = c.request("GET", path)
                self.assert_hello(r.status, r.body, f"GET {path} #{i} on one connection")
            r = c.request("HEAD", path)
            self.assertEqual((r.status, r.body), (200, b""), f"HEAD {path}")

    def test_methods(self):
        status, _, body = self.http(self.port, "POST", "/submit", body=b"a=1&b=2",
                                    headers={"Content-Type": "application/x-www-form-urlencoded"})
        self.assert_hello(status, body, "POST")
        status, _, body = self.http(self.port, "PUT", "/thing", body=b"x" * 5000)
        self.assert_hello(status, body, "PUT")
        c = self.raw(self.port)
        r = c.request("HEAD", "/")
        self.assertEqual(r.status, 200)
        self.assertEqual(r.body, b"")
        self.assertIn(r.header("content-length"), ("11", "12"))
        r = c.request("GET", "/")
        self.assert_hello(r.status, r.body, "GET after HEAD on the same connection")

    def test_keepalive_and_pipelining(self):
        c = self.raw(self.port)
        c.send(b"".join(build_request("GET", f"/p{i}") for i in range(20)))
        for i in range(20):
            r = c.read_response()
            self.assert_hello(r.status, r.body, f"pipelined request {i}")
        self.assertFalse(c.wait_closed(0.3))

    def test_chunked_post(self):
        c = self.raw(self.port)
        c.send(build_request("POST", "/", {"Transfer-Encoding": "chunked"}) + b"5\r\nhello\r\n0\r\n\r\n"
               + build_request("GET", "/after"))
        r = c.read_response()
        self.assert_hello(r.status, r.body, "chunked POST")
        r = c.read_response()
        self.assert_hello(r.status, r.body, "GET after chunked POST")

    def test_expect_100_continue(self):
        # The application handler reads bodies: the client must get 100 Continue before the body.
        for framing, body in (({"Content-Length": "5"}, b"hello"),
                              ({"Transfer-Encoding": "chunked"}, b"5\r\nhello\r\n0\r\n\r\n")):
            c = self.raw(self.port)
            c.send(build_request("POST", "/upload", dict(framing, Expect="100-continue")))
            r = c.read_response(timeout=3)
            self.assertEqual(r.status, 100, f"{framing}: expected 100 Continue first, got {r}")
            self.assertTrue(r.head_bytes.startswith(b"HTTP/1.1 100 Continue\r\n"), r.head_bytes)
            c.send(body)
            r = c.read_response()
            self.assert_hello(r.status, r.body, f"final response after 100 Continue ({framing})")
            r = c.request("GET", "/next")
            self.assert_hello(r.status, r.body, f"next request on the connection ({framing})")

    def test_expect_100_continue_too_large(self):
        # Over the default max_body_bytes (1 MiB): the final 413 comes at once, no 100.
        c = self.raw(self.port)
        c.send(build_request("POST", "/upload", {"Content-Length": str(2 * 1024 * 1024), "Expect": "100-continue"}))
        r = c.read_response(timeout=3)
        self.assertEqual(r.status, 413, r)

    def test_curl_upload(self):
        path = os.path.join(self.tmp, "up.bin")
        with open(path, "wb") as f:
            f.write(os.urandom(300000))
        r = subprocess.run(["curl", "-sS", "--max-time", "10", "--data-binary", "@" + path,
                            f"http://127.0.0.1:{self.port}/up", "-w", "\n%{http_code}"],
                           capture_output=True, timeout=20)
        self.assertEqual(r.stdout.rstrip(b"\n").split(b"\n")[-1], b"200", r.stderr)
        self.assertEqual(r.stdout.split(b"\n")[0], b"Hello world")

    def test_malformed_is_rejected(self):
        c = self.raw(self.port)
        c.send(b"GET / HTTP/1.1\r\nHost: x\r\nBad Header: y\r\n\r\n")
        r = c.read_response()
        self.assertEqual(r.status, 400)
        self.assertTrue(c.wait_closed(2))

    def test_concurrent(self):
        errors = []

        def run():
            try:
                with RawClient(self.port) as c:
                    for _ in range(50):
                        r = c.request("GET", "/")
                        if r.status != 200 or r.body.rstrip(b"\n") != b"Hello world":
                            errors.append(r)
            except Exception as e:  # noqa: BLE001
                errors.append(repr(e))

        threads = [threading.Thread(target=run) for _ in range(10)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        self.assertEqual(errors, [])

    def test_ab(self):
        r = subprocess.run(["ab", "-k", "-n", "1000", "-c", "20", f"http://127.0.0.1:{self.port}/"],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr + r.stdout)
        self.assertRegex(r.stdout, r"Complete requests:\s+1000\b")
        self.assertRegex(r.stdout, r"Failed requests:\s+0\b")
        self.assertRegex(r.stdout, r"Keep-Alive requests:\s+1000\b")
        self.assertNotIn("Non-2xx responses", r.stdout)

    def test_sigterm(self):
        self.assertEqual(self.get(self.port, "/")[0], 200)
        self.stop_ok(self.srv, signal.SIGTERM, timeout=5)


if __name__ == "__main__":
    main()
