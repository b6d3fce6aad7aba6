"""examples/sse: server-sent events from a repeating timer; the client's disconnect cancels the
timer (the handler's on_cancel runs), which /stats shows."""

import json
import os
import subprocess
import time

from harness import PEREGRINE_BIN, RawClient, ServerTestCase, build_request, main

SSE_BIN = os.path.join(os.path.dirname(PEREGRINE_BIN), "sse")


class SseTest(ServerTestCase):
    def setUp(self):
        super().setUp()
        self.assertTrue(os.path.exists(SSE_BIN), f"{SSE_BIN} does not exist")
        self.srv = self.start_argv([SSE_BIN, "--listen", "127.0.0.1:0", "--workers", "1",
                                    "--interval-ms", "100"], name="sse")
        self.port = self.srv.port

    def stats(self):
        return json.loads(self.get(self.port, "/stats")[2])

    def read_events(self, c, count):
        """The next `count` events of a chunked text/event-stream response on `c`."""
        events = []
        text = getattr(c, "events_text", b"")
        while len(events) < count:
            while b"\n\n" not in text:
                size = int(c._read_line(), 16)
                self.assertGreater(size, 0, "the stream ended")
                text += c._read_exact(size)
                self.assertEqual(c._read_line(), b"")
            idx = text.find(b"\n\n")
            block = text[:idx]
            text = text[idx + 2:]
            if block.startswith(b":"):
                continue  # a comment
            fields = dict(line.split(b": ", 1) for line in block.split(b"\n"))
            events.append((int(fields[b"id"]), json.loads(fields[b"data"])))
        c.events_text = text
        return events

    def test_events_then_disconnect_stops_them(self):
        c = RawClient(self.port)
        c.send(build_request("GET", "/events"))
        head = c.read_head()
        self.assertEqual(head[1], 200)
        headers = dict((k.lower(), v) for k, v in head[3])
        self.assertEqual(headers["content-type"], "text/event-stream")
        started = time.monotonic()
        events = self.read_events(c, 3)
        self.assertGreaterEqual(time.monotonic() - started, 0.15)
        self.assertEqual([e[0] for e in events], [1, 2, 3])
        self.assertEqual(events[2][1], {"n": 3, "worker": 0})
        self.assertEqual(self.stats(), {"open": 1, "closed": 0})
        c.close()
        self.wait_for(lambda: self.stats() == {"open": 0, "closed": 1}, timeout=3,
                      msg="the disconnect cancelled the stream")

    def test_curl_client(self):
        r = subprocess.run(["curl", "-sS", "-N", "--max-time", "0.5", f"http://127.0.0.1:{self.port}/events"],
                           capture_output=True, timeout=10)
        self.assertEqual(r.returncode, 28, r.stderr)  # curl's own timeout ended it
        self.assertIn(b"id: 1\ndata: {\"n\": 1, \"worker\": 0}\n\n", r.stdout)
        self.wait_for(lambda: self.stats()["open"] == 0, timeout=3, msg="stream closed")

    def test_many_streams(self):
        clients = []
        for _ in range(20):
            c = RawClient(self.port)
            c.send(build_request("GET", "/events"))
            clients.append(c)
        for c in clients:
            c.read_head()
        self.wait_for(lambda: self.stats()["open"] == 20, timeout=3, msg="20 open")
        for c in clients[:10]:
            c.close()
        self.wait_for(lambda: self.stats() == {"open": 10, "closed": 10}, timeout=3, msg="10 closed")
        for c in clients[10:]:
            self.assertEqual(len(self.read_events(c, 2)), 2)
            c.close()
        self.wait_for(lambda: self.stats() == {"open": 0, "closed": 20}, timeout=3, msg="all closed")


if __name__ == "__main__":
    main()
