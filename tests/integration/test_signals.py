"""Signals: SIGTERM and SIGINT stop at once with status 0; SIGQUIT stops gracefully (in-flight
requests finish, new connections are refused, idle keep-alive connections do not hold the stop up,
shutdown_timeout bounds the wait)."""

import hashlib
import os
import signal
import socket
import time

from harness import RawClient, ServerTestCase, build_request, main, make_config

BIG_SIZE = 32 * 1024 * 1024


class SignalsTest(ServerTestCase):
    def start(self, limits="", workers=2, big=False):
        files = {"hello.txt": b"hello\n"}
        if big:
            self.big = os.urandom(BIG_SIZE)
            files["big.bin"] = self.big
        root = self.make_root(files)
        self.srv = self.start_config(make_config(root, limits=limits, workers=workers))
        return self.srv

    def slow_download(self):
        """Start a GET of big.bin that reads only the first 64 KB; returns (client, bytes read)."""
        c = self.raw(self.srv.port, rcvbuf=16384, timeout=10)
        c.send(build_request("GET", "/big.bin"))
        _, status, _, headers, _ = c.read_head()
        self.assertEqual(status, 200)
        self.assertEqual(dict((k.lower(), v) for k, v in headers)["content-length"], str(BIG_SIZE))
        while len(c.buf) < 65536:
            self.assertTrue(c._fill(), "connection closed during the download")
        return c

    def new_connection_refused(self):
        """True when a new connection cannot get a response: refused, reset or closed."""
        try:
            s = socket.create_connection(("127.0.0.1", self.srv.port), timeout=2)
        except ConnectionRefusedError:
            return True
        try:
            s.sendall(build_request("GET", "/hello.txt"))
            data = s.recv(65536)
            return not data.startswith(b"HTTP/1.1 200")
        except (ConnectionResetError, BrokenPipeError):
            return True
        except (socket.timeout, TimeoutError):
            return False  # accepted into a backlog nobody serves: a hang, not a refusal
        finally:
            s.close()

    def test_sigterm(self):
        self.start()
        self.assertEqual(self.get(self.srv.port, "/hello.txt")[0], 200)
        t0 = time.monotonic()
        self.stop_ok(self.srv, signal.SIGTERM, timeout=5)
        self.assertLess(time.monotonic() - t0, 3)

    def test_sigint(self):
        self.start()
        self.assertEqual(self.get(self.srv.port, "/hello.txt")[0], 200)
        self.stop_ok(self.srv, signal.SIGINT, timeout=5)

    def test_sigterm_does_not_wait_for_inflight(self):
        self.start(limits='shutdown_timeout = "30s"', big=True)
        c = self.slow_download()
        idle = self.raw(self.srv.port)
        self.assertEqual(idle.request("GET", "/hello.txt").status, 200)
        t0 = time.monotonic()
        self.stop_ok(self.srv, signal.SIGTERM, timeout=10)
        self.assertLess(time.monotonic() - t0, 3, "SIGTERM must stop now, not drain requests")

    def test_sigquit_graceful_inflight_completes(self):
        self.start(limits='shutdown_timeout = "20s"', big=True)
        c = self.slow_download()
        self.srv.signal(signal.SIGQUIT)
        time.sleep(0.5)
        self.assertTrue(self.srv.running(), "SIGQUIT: server exited with a request in flight")
        self.assertTrue(self.new_connection_refused(), "SIGQUIT: new connections must be refused")
        # Now read the rest quickly: the whole file must arrive intact.
        c.timeout = 10
        while len(c.buf) < BIG_SIZE:
            if not c._fill():
                break
        self.assertEqual(len(c.buf), BIG_SIZE, "in-flight response cut short by SIGQUIT")
        self.assertEqual(hashlib.sha256(c.buf).hexdigest(), hashlib.sha256(self.big).hexdigest())
        c.buf = bytearray()
        self.assertTrue(c.wait_closed(5), "connection kept open after the in-flight response during shutdown")
        t0 = time.monotonic()
        code = self.srv.wait(5)
        self.assertEqual(code, 0, f"SIGQUIT exit status {code} (None: still running 5s after the "
                                  f"last request finished)\n{self.srv.stderr()[-2000:]}")
        self.assertLess(time.monotonic() - t0, 5)

    def test_sigquit_idle_keepalive_does_not_block(self):
        self.start(limits='shutdown_timeout = "20s"\nkeepalive_timeout = "60s"')
        idle = [self.raw(self.srv.port) for _ in range(3)]
        for c in idle:
            self.assertEqual(c.request("GET", "/hello.txt").status, 200)
        t0 = time.monotonic()
        self.srv.signal(signal.SIGQUIT)
        code = self.srv.wait(5)
        self.assertEqual(code, 0, "SIGQUIT with idle keep-alive connections: not stopped within 5s "
                                  "(idle connections should be closed at once)")
        self.assertLess(time.monotonic() - t0, 5)
        for c in idle:
            self.assertTrue(c.wait_closed(1))

    def test_sigquit_shutdown_timeout_bounds_wait(self):
        self.start(limits='shutdown_timeout = "1s"\nsend_timeout = "60s"', big=True)
        self.slow_download()  # never finishes reading
        t0 = time.monotonic()
        self.srv.signal(signal.SIGQUIT)
        code = self.srv.wait(6)
        elapsed = time.monotonic() - t0
        self.assertEqual(code, 0, f"SIGQUIT with a stuck client and shutdown_timeout=1s: status {code} "
                                  f"(None: still running after 6s)")
        self.assertGreaterEqual(elapsed, 0.8, "SIGQUIT did not wait for the in-flight request at all")

    def test_sigquit_when_idle(self):
        self.start()
        self.assertEqual(self.get(self.srv.port, "/hello.txt")[0], 200)
        self.stop_ok(self.srv, signal.SIGQUIT, timeout=5)

    def test_sigterm_single_worker_with_pending_partial_request(self):
        self.start(workers=1)
        c = self.raw(self.srv.port)
        c.send(b"GET /hello.txt HTTP/1.1\r\nHost: x\r\n")  # incomplete head
        self.stop_ok(self.srv, signal.SIGTERM, timeout=5)
        self.assertTrue(c.wait_closed(1))


if __name__ == "__main__":
    main()
