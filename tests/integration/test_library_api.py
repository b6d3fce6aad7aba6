"""Every public entry point of libperegrine, through tests/library/library_app.cc: route,
route_factory, route_async(_factory), register_handler / register_async_handler named by a
config file's `handler = "NAME"` routes, a SIGHUP reload that keeps them; and the asynchronous
API over HTTP/1.1 and h2c: streamed request bodies, streamed responses with back-pressure,
cancellation on client disconnect, timers, post_all."""

import os
import signal
import socket
import subprocess
import time

from harness import (PEREGRINE_BIN, RawClient, ServerTestCase, build_request, h2c, main, missing,
                     make_config, proc_status_kb)

APP_BIN = os.path.join(os.path.dirname(PEREGRINE_BIN), "library_app")


def curl(args, timeout=60):
    return subprocess.run(["curl", "-sS", "--max-time", str(timeout)] + args, capture_output=True,
                          timeout=timeout + 10)


class CodeRoutesTest(ServerTestCase):
    """Routes set up in code: route, route_factory, route_async, route_async_factory."""

    def setUp(self):
        super().setUp()
        self.assertTrue(os.path.exists(APP_BIN), f"{APP_BIN} does not exist (build library_app)")
        self.srv = self.start_argv([APP_BIN, "--listen", "127.0.0.1:0", "--workers", "2"],
                                   name="library_app")
        self.port = self.srv.port

    def test_sync_route(self):
        status, _, body = self.get(self.port, "/anything")
        self.assertEqual((status, body), (200, b"sync\n"))

    def test_route_factory_once_per_worker(self):
        # Two workers: the factory made two instances, numbered 1 and 2.
        seen = set()
        for _ in range(40):
            with RawClient(self.port) as c:  # new connections spread over the workers
                r = c.request("GET", "/counted")
                self.assertEqual(r.status, 200)
                seen.add(r.body)
        self.assertTrue(seen <= {b"instance 1\n", b"instance 2\n"}, seen)

    def test_route_async_lambda(self):
        status, _, body = self.get(self.port, "/lambda/x")
        self.assertEqual((status, body), (200, b"lambda /lambda/x\n"))

    def test_forgotten_response_is_500(self):
        status, _, _ = self.get(self.port, "/async/forget")
        self.assertEqual(status, 500)
        # The error log has its own writer thread: the line may come a moment after the answer.
        self.wait_for(lambda: "dropped its response without answering" in self.srv.stderr(),
                      timeout=3, msg="the error-log line")
        self.assert_serving(self.srv)

    def test_timers(self):
        status, _, body = self.get(self.port, "/async/timers")
        self.assertEqual(status, 200)
        self.assertEqual(body, b"soon=1 once=1 every=5 cancelled=0 cancel=true again=false\n")

    def test_post_all_reaches_every_worker(self):
        status, _, body = self.get(self.port, "/async/post_all")
        self.assertEqual((status, body), (200, b"workers=2 seen=0,1\n"))

    def test_callback_body_with_pauses(self):
        data = os.urandom(300000)
        status, _, body = self.http(self.port, "POST", "/async/callback", body=data)
        self.assertEqual((status, body), (200, b"bytes=300000\n"))
        status, _, body = self.http(self.port, "GET", "/async/callback")
        self.assertEqual((status, body), (200, b"bytes=0\n"))

    def test_callback_streamed_ticks(self):
        c = self.raw(self.port)
        r = c.request("GET", "/async/ticks?n=4&ms=10")
        self.assertEqual(r.status, 200)
        self.assertEqual(r.header("transfer-encoding"), "chunked")
        self.assertEqual(r.body, b"tick 1\ntick 2\ntick 3\ntick 4\n")
        r = c.request("GET", "/anything")  # the connection is kept
        self.assertEqual(r.body, b"sync\n")


class ConfigRoutesTest(ServerTestCase):
    """Routes from a config file naming registered handlers, and a reload that keeps them."""

    def config(self, routes, http2=False):
        text = make_config(self.make_root(), workers=2, routes=routes)
        return h2c(text) if http2 else text

    ROUTES = ('[[site.route]]\nprefix = "/hello"\nhandler = "hello"\n'
              '[[site.route]]\nprefix = "/async/"\nhandler = "async"\n'
              '[[site.route]]\nprefix = "/counted"\nhandler = "counted"\n')

    def start_app(self, text):
        path = self.write_config(text)
        self.srv = self.start_argv([APP_BIN, "--config", path], name="library_app")
        self.srv.config_path = path
        return self.srv

    def test_named_handlers_and_reload(self):
        srv = self.start_app(self.config(self.ROUTES))
        self.assertEqual(self.get(srv.port, "/hello")[2], b"hello\n")
        self.assertEqual(self.get(srv.port, "/async/timers")[0], 200)
        self.assertEqual(self.get(srv.port, "/bye")[0], 404)
        # Reload with one more route naming another registered handler: old and new both work.
        self.write_config(self.config(self.ROUTES + '[[site.route]]\nprefix = "/bye"\nhandler = "bye"\n'))
        srv.signal(signal.SIGHUP)
        self.wait_for(lambda: self.get(srv.port, "/bye")[0] == 200, timeout=5, msg="reloaded /bye")
        self.assertEqual(self.get(srv.port, "/bye")[2], b"bye\n")
        self.assertEqual(self.get(srv.port, "/hello")[2], b"hello\n")
        status, _, body = self.http(srv.port, "POST", "/async/echo", body=b"x" * 100000)
        self.assertEqual((status, len(body)), (200, 100000))
        # The factory ran again on reload, once per worker: instances 3 and 4 now.
        seen = set()
        for _ in range(30):
            with RawClient(srv.port) as c:
                seen.add(c.request("GET", "/counted").body)
        self.assertTrue(seen <= {b"instance 3\n", b"instance 4\n"}, seen)

    def test_unregistered_name_fails_start(self):
        path = self.write_config(self.config('[[site.route]]\nprefix = "/"\nhandler = "nope"\n'))
        r = subprocess.run([APP_BIN, "--config", path], capture_output=True, timeout=20)
        self.assertEqual(r.returncode, 1)
        self.assertIn(b"no handler named 'nope' is registered", r.stderr)

    def test_reload_naming_unregistered_keeps_old(self):
        srv = self.start_app(self.config(self.ROUTES))
        self.write_config(self.config('[[site.route]]\nprefix = "/"\nhandler = "nope"\n'))
        srv.signal(signal.SIGHUP)
        self.wait_for(lambda: "no handler named 'nope'" in srv.stderr(), timeout=5, msg="error")
        self.assertEqual(self.get(srv.port, "/hello")[2], b"hello\n")


class AsyncOverBothProtocols:
    """The asynchronous API's behaviour, run over HTTP/1.1 and h2c (subclasses)."""

    HTTP2 = False

    def setUp(self):
        super().setUp()
        text = make_config(self.make_root(), workers=1, limits="max_body_bytes = \"64m\"",
                           routes='[[site.route]]\nprefix = "/async/"\nhandler = "async"\n')
        path = self.write_config(h2c(text) if self.HTTP2 else text)
        self.srv = self.start_argv([APP_BIN, "--config", path], name="library_app")
        self.port = self.srv.port
        self.url = f"http://127.0.0.1:{self.port}"
        self.proto = ["--http2-prior-knowledge"] if self.HTTP2 else ["--http1.1"]

    def test_large_post_echoed_byte_exact(self):
        # 20 MiB through the coroutine: read a piece, write it, read the next.
        src = os.path.join(self.tmp, "up.bin")
        data = os.urandom(20 * 1024 * 1024)
        with open(src, "wb") as f:
            f.write(data)
        out = os.path.join(self.tmp, "down.bin")
        r = curl(self.proto + ["--data-binary", "@" + src, "-H", "Content-Type: application/octet-stream",
                               "-o", out, "-w", "%{http_code} %{http_version}", self.url + "/async/echo"])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.split()[0], b"200")
        self.assertEqual(r.stdout.split()[1], b"2" if self.HTTP2 else b"1.1")
        with open(out, "rb") as f:
            self.assertTrue(f.read() == data, "echoed body differs")

    def test_chunked_upload_echoed(self):
        # No Content-Length (chunked to HTTP/1.1; DATA frames without content-length to h2).
        r = subprocess.run(["curl", "-sS", "--max-time", "20"] + self.proto +
                           ["-T", "-", "-X", "POST", self.url + "/async/echo"],
                           input=b"abc" * 50000, capture_output=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, b"abc" * 50000)

    def test_streamed_response(self):
        r = curl(self.proto + ["-o", "-", self.url + "/async/big?mb=8"])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(len(r.stdout), 8 * 1024 * 1024)
        self.assertEqual(r.stdout[:30], b"abcdefghijklmnopqrstuvwxyzabcd")

    def test_disconnect_cancels_sleep(self):
        before = self.stats()
        p = subprocess.Popen(["curl", "-sS"] + self.proto + [self.url + "/async/wait?ms=30000"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.5)
        p.kill()
        p.wait()
        self.wait_for(lambda: self.stats() == before + 1, timeout=5, msg="the handler saw the cancel")
        # An uncancelled wait answers.
        r = curl(self.proto + [self.url + "/async/wait?ms=50"])
        self.assertEqual(r.stdout, b"waited\n")
        self.assertEqual(self.stats(), before + 1)

    def test_coroutines_awaiting_coroutines(self):
        # Three 50 ms sleeps, each in a coroutine two awaits deep: the answer comes after all.
        started = time.monotonic()
        r = curl(self.proto + [self.url + "/async/compose?steps=3&ms=50"])
        self.assertEqual(r.stdout, b"steps=3\n")
        self.assertGreaterEqual(time.monotonic() - started, 0.15)
        # A client that leaves mid-way: the innermost sleep resumes cancelled, and the outer
        # coroutine learns it through the exception the middle one throws.
        before = self.stats()
        p = subprocess.Popen(["curl", "-sS"] + self.proto + [self.url + "/async/compose?steps=100&ms=100"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.5)
        p.kill()
        p.wait()
        self.wait_for(lambda: self.stats() == before + 1, timeout=5, msg="the chain saw the cancel")

    def stats(self):
        r = curl(self.proto + [self.url + "/async/stats"], timeout=5)
        return int(r.stdout.decode().strip().split("=")[1])


class AsyncHttp1Test(AsyncOverBothProtocols, ServerTestCase):
    HTTP2 = False

    def test_slow_client_back_pressure(self):
        # 200 MiB to a client that reads nothing for a while: the coroutine waits on write(), so
        # the server's memory stays far below what it streams.
        c = self.raw(self.port, rcvbuf=65536)
        c.send(build_request("GET", "/async/big?mb=200"))
        base = proc_status_kb(self.srv.pid)
        time.sleep(1.5)
        grown = proc_status_kb(self.srv.pid) - base
        self.assertLess(grown, 32 * 1024, f"server RSS grew by {grown} KiB while the client slept")
        head = c.read_head()
        self.assertEqual(head[1], 200)
        remaining = 200 * 1024 * 1024 - len(c.buf)
        c.buf = bytearray()
        sock = c.sock
        sock.settimeout(20)
        while remaining > 0:
            chunk = sock.recv(1 << 20)
            self.assertTrue(chunk, "connection closed early")
            remaining -= len(chunk)
        self.assertEqual(remaining, 0)
        self.assertLess(proc_status_kb(self.srv.pid) - base, 32 * 1024)

    def test_upgrade_then_raw_bytes_both_ways(self):
        # 101 makes the exchange a tunnel: the coroutine reads and writes the raw connection.
        c = self.raw(self.port)
        c.send(build_request("GET", "/async/upgrade", {"Connection": "Upgrade", "Upgrade": "echo"}))
        head = c.read_head()
        self.assertEqual(head[1], 101)
        for message in (b"hello", b"x" * 100000, b"\x00\xff binary"):
            c.send(message)
            got = bytes(c.buf)
            c.buf = bytearray()
            while len(got) < len(message):
                self.assertTrue(c._fill(), "closed early")
                got += bytes(c.buf)
                c.buf = bytearray()
            self.assertEqual(got, message)
        c.sock.shutdown(socket.SHUT_WR)  # the client is done: the handler finishes, we see EOF
        self.assertEqual(c.read_until_close(), b"")
        status, _, _ = self.get(self.port, "/async/upgrade")  # no Upgrade header
        self.assertEqual(status, 426)

    def test_disconnect_during_body_upload(self):
        # The client leaves in the middle of its body: the handler's read resumes cancelled.
        before = self.stats()
        c = RawClient(self.port)
        c.send(build_request("POST", "/async/callback", {"Content-Length": "1000000"}) + b"x" * 1000)
        time.sleep(0.3)
        c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        c.close()
        self.wait_for(lambda: self.stats() == before + 1, timeout=5, msg="callback on_cancel ran")
        self.assert_serving(self.srv, "/async/stats")


class AsyncH2cTest(AsyncOverBothProtocols, ServerTestCase):
    HTTP2 = True

    def h2_client(self):
        """A raw h2c connection through python3-h2 (flow control in the test's hands)."""
        try:
            import h2.config
            import h2.connection
        except ImportError:
            missing("python3-h2 is not installed (python3-h2)")
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=5)
        self.addCleanup(sock.close)
        conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
        conn.initiate_connection()
        sock.sendall(conn.data_to_send())
        return sock, conn

    def h2_get(self, sock, conn, path):
        stream = conn.get_next_available_stream_id()
        conn.send_headers(stream, [(":method", "GET"), (":path", path), (":scheme", "http"),
                                   (":authority", "localhost")], end_stream=True)
        sock.sendall(conn.data_to_send())
        return stream

    def pump(self, sock, conn, seconds):
        """Reads frames for `seconds` without opening any window: (body bytes, events)."""
        import h2.events
        got, events = 0, []
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            sock.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                data = sock.recv(65536)
            except socket.timeout:
                break
            if not data:
                break
            for e in conn.receive_data(data):
                events.append(e)
                if isinstance(e, h2.events.DataReceived):
                    got += len(e.data)
            sock.sendall(conn.data_to_send())
        return got, events

    def test_slow_stream_back_pressure(self):
        # The client never opens its window: the server can send the stream's first 64 KiB and
        # must hold the rest by suspending the coroutine, not by queueing 200 MiB.
        sock, conn = self.h2_client()
        base = proc_status_kb(self.srv.pid)
        self.h2_get(sock, conn, "/async/big?mb=200")
        got, _ = self.pump(sock, conn, 1.5)
        self.assertLessEqual(got, 65535)
        grown = proc_status_kb(self.srv.pid) - base
        self.assertLess(grown, 16 * 1024, f"server RSS grew by {grown} KiB for a stalled stream")
        self.assert_serving(self.srv, "/async/stats")

    def test_stream_reset_cancels(self):
        # RST_STREAM on one stream: its handler sees the cancel; the connection stays usable.
        import h2.events
        sock, conn = self.h2_client()
        before = self.stats()
        stream = self.h2_get(sock, conn, "/async/wait?ms=30000")
        self.pump(sock, conn, 0.3)
        conn.reset_stream(stream)
        sock.sendall(conn.data_to_send())
        self.wait_for(lambda: self.stats() == before + 1, timeout=5, msg="the reset cancelled it")
        stream = self.h2_get(sock, conn, "/async/wait?ms=10")
        _, events = self.pump(sock, conn, 1.0)
        bodies = [e.data for e in events if isinstance(e, h2.events.DataReceived)]
        self.assertEqual(b"".join(bodies), b"waited\n")

    def test_many_streams_on_one_connection(self):
        urls = []
        for i in range(10):
            urls += [self.url + "/async/big?mb=1", "-o", os.path.join(self.tmp, f"o{i}")]
        r = curl(["--http2-prior-knowledge", "--parallel", "--parallel-immediate"] + urls)
        self.assertEqual(r.returncode, 0, r.stderr)
        for i in range(10):
            self.assertEqual(os.path.getsize(os.path.join(self.tmp, f"o{i}")), 1024 * 1024)


if __name__ == "__main__":
    main()
