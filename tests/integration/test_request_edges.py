"""What is answered before any handler runs, the same for every kind of route: 405 with Allow on
FastCGI and proxy routes (the upstream never hears of the request), OPTIONS *, and request bodies
(Content-Length and chunked) read by one reader for buffered, dropped and streamed bodies, held to
max_body_bytes (413) and checked for framing (400), on static, return and proxy routes."""

import json
import os
import re
import subprocess
import sys

from harness import HERE, ServerTestCase, build_request, main, make_config, q

BACKEND = os.path.join(HERE, "backends", "http_backend.py")

FILES = {"hello.txt": "hello\n", "php/x.php": "<?php echo 1;\n"}


def chunked(pieces):
    return b"".join(b"%x\r\n" % len(p) + p + b"\r\n" for p in pieces) + b"0\r\n\r\n"


class RequestEdgesTest(ServerTestCase):
    def setUp(self):
        super().setUp()
        self.root = self.make_root(FILES)

    def backend(self):
        log = open(os.path.join(self.tmp, "backend.log"), "ab")
        proc = subprocess.Popen([sys.executable, BACKEND, "--id", "A", "--port", "0"],
                                stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL)

        def stop():
            proc.kill()
            proc.wait()
            proc.stdout.close()
            log.close()

        self.addCleanup(stop)
        m = re.match(r"listening on 127\.0\.0\.1:(\d+)", proc.stdout.readline().decode())
        self.assertIsNotNone(m, "the back end did not start")
        return int(m.group(1))

    def backend_requests(self, port):
        status, _, body = self.http(port, "GET", "/control/stats")
        self.assertEqual(status, 200)
        return json.loads(body)["requests"]

    def start_server(self, backend_port, limits=""):
        """/app/ goes to the proxy (GET and POST only), /php/ to FastCGI (GET only; no php-fpm
        runs: a request that reached it would get 502), /echo takes bodies, the root serves the
        rest (the site's implicit static route)."""
        top = (f'[[upstream]]\nname = "app"\nservers = [{q(f"127.0.0.1:{backend_port}")}]\n'
               f'[[upstream]]\nname = "php"\nservers = [{q("unix:" + self.tmp + "/none.sock")}]\n')
        routes = ('[[site.route]]\nprefix = "/app/"\nproxy = "http://app"\nmethods = ["GET", "POST"]\n'
                  '[[site.route]]\nprefix = "/php/"\nfastcgi = "php"\nmethods = ["GET"]\n'
                  '[[site.route]]\nexact = "/echo"\nmethods = ["POST"]\nreturn = 200\nbody = "ok"\n'
                  )
        return self.start_config(make_config(self.root, top=top, routes=routes, limits=limits))

    # ---- route-level answers on asynchronous routes ----

    def test_405_on_proxy_and_fastcgi_routes_never_reaches_the_upstream(self):
        backend = self.backend()
        srv = self.start_server(backend)
        c = self.raw(srv.port)
        for method, path, allow in (("PUT", "/app/x", "GET, POST"), ("DELETE", "/app/x", "GET, POST"),
                                    ("HEAD", "/app/x", "GET, POST"), ("POST", "/php/x.php", "GET"),
                                    ("OPTIONS", "/php/x.php", "GET")):
            r = c.request(method, path)
            self.assertEqual(r.status, 405, f"{method} {path}: {r}")
            self.assertEqual(r.header("allow"), allow, f"{method} {path}: {r}")
            self.assertNotIn("close", r.connection_tokens(), f"{method} {path}: {r}")
        # With a body: it is read (and dropped) before the 405, and the connection goes on.
        r = c.request("PUT", "/app/x", {"Content-Length": "5"}, body=b"12345")
        self.assertEqual((r.status, r.header("allow")), (405, "GET, POST"), r)
        c.send(build_request("PUT", "/app/x", {"Transfer-Encoding": "chunked"}) + chunked([b"abc", b"de"]))
        r = c.read_final_response()
        self.assertEqual(r.status, 405, r)
        self.assertEqual(c.request("GET", "/hello.txt").body, b"hello\n")
        self.assertEqual(self.backend_requests(backend), 0, "a 405 reached the back end")
        # The methods the route lists do go through.
        r = c.request("GET", "/app/echo")
        self.assertEqual((r.status, json.loads(r.body)["method"]), (200, "GET"), r)
        self.assertEqual(c.request("GET", "/php/x.php").status, 502, "the FastCGI route is tried")

    def test_options_asterisk(self):
        srv = self.start_server(self.backend())
        c = self.raw(srv.port)
        r = c.request("OPTIONS", "*")
        self.assertEqual(r.status, 204, r)
        self.assertEqual(r.header("allow"), "GET, HEAD, POST, PUT, DELETE, OPTIONS")
        self.assertIsNone(r.header("content-length"), "204 carries no Content-Length")
        self.assertEqual(c.request("GET", "/hello.txt").body, b"hello\n")

    # ---- request bodies: one reader, every route kind ----

    def test_chunked_body_over_max_body_bytes_is_413_on_every_route_kind(self):
        backend = self.backend()
        srv = self.start_server(backend, limits='max_body_bytes = "1k"')
        big = chunked([b"y" * 500] * 4)
        for path in ("/hello.txt", "/echo", "/nowhere", "/app/echo"):
            c = self.raw(srv.port)
            c.send(build_request("POST", path, {"Transfer-Encoding": "chunked"}) + big)
            r = c.read_final_response()
            self.assertEqual(r.status, 413, f"POST {path}: {r}")
            self.assertIn("close", r.connection_tokens(), f"POST {path}: {r}")
            self.assertTrue(c.wait_closed(3), f"connection open after 413 on {path}")
        # Exactly the limit goes through, buffered (return) and streamed (proxy) alike.
        fits = chunked([b"z" * 512, b"z" * 512])
        for path in ("/echo", "/app/echo"):
            c = self.raw(srv.port)
            c.send(build_request("POST", path, {"Transfer-Encoding": "chunked"}) + fits)
            r = c.read_final_response()
            self.assertEqual(r.status, 200, f"POST {path}: {r}")
        r = json.loads(c.request("GET", "/app/echo").body)
        self.assertEqual(r["body_length"], 0)

    def test_streamed_chunked_body_reaches_the_upstream_whole(self):
        backend = self.backend()
        srv = self.start_server(backend)
        c = self.raw(srv.port)
        pieces = [os.urandom(n) for n in (1, 100, 4096, 70000, 3)]
        c.send(build_request("POST", "/app/echo", {"Transfer-Encoding": "chunked"}))
        body = chunked(pieces)
        for i in range(0, len(body), 997):  # chunk lines split across reads
            c.send(body[i:i + 997])
        r = c.read_final_response()
        self.assertEqual(r.status, 200, r)
        self.assertEqual(json.loads(r.body)["body_length"], sum(map(len, pieces)))
        self.assertEqual(c.request("GET", "/hello.txt").body, b"hello\n", "keep-alive after")

    def test_malformed_chunked_body_is_400_on_buffered_and_streamed_routes(self):
        backend = self.backend()
        srv = self.start_server(backend)
        for path in ("/echo", "/app/echo"):
            c = self.raw(srv.port)
            c.send(build_request("POST", path, {"Transfer-Encoding": "chunked"}) + b"5\r\nhelloXX0\r\n\r\n")
            r = c.read_final_response()
            self.assertEqual(r.status, 400, f"POST {path}: {r}")
            self.assertTrue(c.wait_closed(3), f"connection open after 400 on {path}")
        self.wait_for(lambda: srv.stderr().count("malformed chunked body") == 2,
                      msg="one log line per malformed body")

    def test_a_body_nobody_reads_is_dropped_and_the_connection_goes_on(self):
        srv = self.start_server(self.backend())
        c = self.raw(srv.port)
        r = c.request("POST", "/hello.txt", {"Content-Length": "11"}, body=b"hello world")
        self.assertEqual(r.status, 405, r)  # the static handler's own answer
        self.assertNotIn("close", r.connection_tokens(), r)
        c.send(build_request("POST", "/hello.txt", {"Transfer-Encoding": "chunked"})
               + chunked([b"abc"]) + build_request("GET", "/hello.txt"))
        self.assertEqual(c.read_final_response().status, 405)
        self.assertEqual(c.read_final_response().body, b"hello\n", "the pipelined request after the body")


if __name__ == "__main__":
    main()
