"""bench/websocket.py's answer checking (the benchmark's figures are not tested, its honesty is):
frames as a client must send them, every kind of wrong answer refused, the legal other forms of
a right one (fragments, pings) accepted; then a short run against the python3-websockets echo
and chat servers, which must check every message it counts.

Run: /usr/bin/python3 tests/integration/test_bench_websocket.py [-v]
"""

import contextlib
import io
import os
import random
import socket
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "bench"))
import websocket as wsb  # noqa: E402

import harness  # noqa: E402


def unmask(frame):
    """(opcode, payload) of one masked client frame, read independently of websocket.py."""
    n = frame[1] & 0x7F
    pos = 2
    if n == 126:
        n, pos = int.from_bytes(frame[2:4], "big"), 4
    elif n == 127:
        n, pos = int.from_bytes(frame[2:10], "big"), 10
    key, body = frame[pos:pos + 4], frame[pos + 4:]
    assert len(body) == n, (len(body), n)
    return frame[0] & 0x0F, bytes(b ^ key[i % 4] for i, b in enumerate(body))


class Frames(unittest.TestCase):
    def test_client_frames_are_masked_and_unmask_to_the_payload(self):
        rng = random.Random(1)
        for n in (0, 1, 64, 125, 126, 65535, 65536, 70000):
            payload = bytes(rng.randrange(256) for _ in range(n))
            frame = wsb.client_frame(payload, 1, rng)
            self.assertEqual(frame[0], 0x81)
            self.assertTrue(frame[1] & 0x80, "mask bit")
            self.assertEqual(unmask(frame), (1, payload))
            if n >= 8:
                self.assertNotEqual(frame[-n:], payload)

    def test_server_frames_parse_whole_and_not_before(self):
        for n in (0, 64, 125, 126, 70000):
            f = wsb.server_frame(b"x" * n)
            self.assertEqual(wsb.parse_frame(f, 0), (True, 1, b"x" * n, len(f)))
            self.assertIsNone(wsb.parse_frame(f[:-1] if n else f[:1], 0))

    def test_a_masked_or_rsv_server_frame_is_an_error(self):
        with self.assertRaises(wsb.FrameError):
            wsb.parse_frame(wsb.client_frame(b"abc"), 0)
        with self.assertRaises(wsb.FrameError):
            wsb.parse_frame(bytes([0xC1, 3]) + b"abc", 0)

    def test_payloads_name_connection_and_number(self):
        a = wsb.payload_for("c1", 5, 64)
        self.assertEqual(len(a), 64)
        self.assertTrue(a.startswith(b"c1 #5 "))
        self.assertNotEqual(a, wsb.payload_for("c2", 5, 64))
        self.assertNotEqual(a, wsb.payload_for("c1", 6, 64))
        a.decode("ascii")  # text messages must be UTF-8


class Checking(unittest.TestCase):
    """Conn.feed over a socketpair: the peer end plays the server."""

    def setUp(self):
        self.ours, self.peer = socket.socketpair()
        self.conn = wsb.Conn(self.ours, "c7", b"")
        self.payloads = [wsb.payload_for("c7", k, 64) for k in range(10)]
        self.conn.expected_payload = lambda k: self.payloads[k]
        self.conn.expected_frame = lambda k: wsb.server_frame(self.payloads[k])

    def tearDown(self):
        self.ours.close()
        self.peer.close()

    def feed(self, data, chunk=7):
        n = 0
        for i in range(0, len(data), chunk):
            n += self.conn.feed(memoryview(data[i:i + chunk]))
        return n

    def test_right_answers_in_any_split_are_counted(self):
        data = b"".join(wsb.server_frame(p) for p in self.payloads)
        self.assertEqual(self.feed(data, 7), 10)
        self.assertEqual(self.conn.received, 10)
        self.assertEqual(self.conn.buf, b"")

    def test_fragments_and_pings_are_accepted_and_pings_answered(self):
        p = self.payloads[0]
        data = (bytes([0x01, 20]) + p[:20] + bytes([0x89, 2]) + b"hi"
                + bytes([0x80, 44]) + p[20:] + wsb.server_frame(self.payloads[1]))
        self.assertEqual(self.feed(data, 5), 2)
        self.assertEqual(unmask(self.peer.recv(100)), (10, b"hi"))

    def assert_refused(self, data, words):
        with self.assertRaises(wsb.VerifyError) as cm:
            self.feed(data)
        for w in words:
            self.assertIn(w, str(cm.exception))

    def test_a_changed_byte_is_refused(self):
        bad = bytearray(self.payloads[1])
        bad[30] ^= 1
        self.assert_refused(wsb.server_frame(self.payloads[0]) + wsb.server_frame(bytes(bad)),
                            ["c7", "message 1 is wrong"])

    def test_a_missing_message_is_refused(self):
        self.assert_refused(wsb.server_frame(self.payloads[0]) + wsb.server_frame(self.payloads[2]),
                            ["message 1 is wrong", "#2"])

    def test_a_repeated_message_is_refused(self):
        self.assert_refused(wsb.server_frame(self.payloads[0]) * 2, ["message 1 is wrong"])

    def test_binary_for_text_is_refused(self):
        self.assert_refused(wsb.server_frame(self.payloads[0], 2), ["opcode 2"])

    def test_a_close_is_refused(self):
        self.assert_refused(bytes([0x88, 4]) + (1011).to_bytes(2, "big") + b"no", ["close", "1011"])

    def test_a_bad_continuation_is_refused(self):
        self.assert_refused(bytes([0x80, 1]) + b"x", ["continuation"])

    def test_a_closed_connection_is_refused(self):
        self.peer.close()
        with self.assertRaises(wsb.VerifyError) as cm:
            self.conn.read()
        self.assertIn("closed the connection after 0 messages", str(cm.exception))


class AgainstPython(unittest.TestCase):
    def test_echo_and_broadcast_runs_check_what_they_count(self):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            rc = wsb.main(["--servers", "python", "--connections", "20", "--messages", "400",
                           "--in-flight", "4", "--clients", "50", "--publishes", "5",
                           "--warmup", "0"])
        text = out.getvalue()
        self.assertEqual(rc, 0, text)
        self.assertIn("400 checked", text)  # 20 connections x 20 messages
        self.assertIn("250 checked", text)  # 50 clients x 5 messages
        self.assertIn("publisher gets its own", text)  # the python chat server includes it


if __name__ == "__main__":
    harness.main()
