"""examples/stream: a coroutine handler that sleeps on a timer between the pieces it streams;
the client's disconnect ends it."""

import os
import socket
import time

from harness import PEREGRINE_BIN, RawClient, ServerTestCase, build_request, main

STREAM_BIN = os.path.join(os.path.dirname(PEREGRINE_BIN), "stream")


class StreamTest(ServerTestCase):
    def setUp(self):
        super().setUp()
        self.assertTrue(os.path.exists(STREAM_BIN), f"{STREAM_BIN} does not exist")
        self.srv = self.start_argv([STREAM_BIN, "--listen", "127.0.0.1:0", "--workers", "1"],
                                   name="stream")
        self.port = self.srv.port

    def test_countdown_is_paced(self):
        c = self.raw(self.port, timeout=10)
        started = time.monotonic()
        r = c.request("GET", "/countdown?from=3&ms=200")
        took = time.monotonic() - started
        self.assertEqual(r.status, 200)
        self.assertEqual(r.header("transfer-encoding"), "chunked")
        self.assertEqual(r.body, b"3\n2\n1\nliftoff\n")
        self.assertGreaterEqual(took, 0.55)  # three sleeps of 200 ms
        self.assertLess(took, 5)

    def test_pieces_arrive_before_the_end(self):
        with RawClient(self.port, timeout=5) as c:
            c.send(build_request("GET", "/countdown?from=5&ms=300"))
            head = c.read_head()
            self.assertEqual(head[1], 200)
            started = time.monotonic()
            while b"4\n" not in c.buf:
                self.assertTrue(c._fill(), "closed early")
            self.assertLess(time.monotonic() - started, 2)  # not held until the whole countdown

    def test_disconnect_then_more_requests(self):
        for _ in range(5):
            s = socket.create_connection(("127.0.0.1", self.port))
            s.sendall(build_request("GET", "/countdown?from=100&ms=50"))
            s.recv(100)
            s.close()
        time.sleep(0.3)
        status, _, body = self.get(self.port, "/countdown?from=1&ms=1")
        self.assertEqual((status, body), (200, b"1\nliftoff\n"))

    def test_http10_is_close_delimited(self):
        with RawClient(self.port) as c:
            c.send(b"GET /countdown?from=2&ms=10 HTTP/1.0\r\n\r\n")
            data = c.read_until_close()
            self.assertTrue(data.startswith(b"HTTP/1.1 200"), data[:40])
            self.assertTrue(data.endswith(b"\r\n\r\n2\n1\nliftoff\n"), data)


if __name__ == "__main__":
    main()
