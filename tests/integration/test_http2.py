"""HTTP/2 (RFC 9113), h2c with prior knowledge on a listener with `http2 = true`.

Frame-level tests speak HTTP/2 over a raw socket with Debian's python3-hyperframe and
python3-hpack (the attack patterns need frames no well-behaved client library sends); the real
clients are curl --http2-prior-knowledge, nghttp and h2load, against every kind of handler:
static files, `return`, FastCGI (a real php-fpm) and the proxy (a real HTTP/1.1 back end).
"""

import hashlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time

from hpack import Decoder, Encoder
from hyperframe.frame import (ContinuationFrame, DataFrame, Frame, GoAwayFrame, HeadersFrame,
                              PingFrame, PriorityFrame, RstStreamFrame, SettingsFrame,
                              WindowUpdateFrame)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "backends"))
import phpfpm  # noqa: E402
from harness import ServerTestCase, h2c, main, make_config, require_tool  # noqa: E402
from recording_backend import HttpRecorder  # noqa: E402
from test_proxy import Backend, pattern_sha256, route_toml, upstream_toml  # noqa: E402

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
NO_ERROR, PROTOCOL_ERROR, INTERNAL_ERROR, FLOW_CONTROL_ERROR, SETTINGS_TIMEOUT = 0, 1, 2, 3, 4
STREAM_CLOSED, FRAME_SIZE_ERROR, REFUSED_STREAM, CANCEL, ENHANCE_YOUR_CALM = 5, 6, 7, 8, 11
SMALL = b"hello world"  # 11 bytes, the benchmark's file
BIG = bytes(range(256)) * 400  # 102400 bytes: more than the default windows


def h2_config(root, **kwargs):
    """make_config with its listener switched to h2c."""
    return h2c(make_config(root, **kwargs))


class RawH2:
    """A client that writes frames as told and reads what comes back, frame by frame."""

    def __init__(self, port, settings=None, timeout=5.0):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.encoder = Encoder()
        self.decoder = Decoder()
        self.buf = b""
        self.eof = False
        self.frames = []  # everything read so far, in order
        s = SettingsFrame(0)
        s.settings = settings or {}
        self.sock.sendall(PREFACE + s.serialize())

    def close(self):
        self.sock.close()

    def send(self, *frames):
        self.sock.sendall(b"".join(f.serialize() for f in frames))

    def try_send(self, *frames):
        try:
            self.send(*frames)
        except OSError:
            pass  # the server may have closed: what it sent before is still read

    def block(self, headers):
        return self.encoder.encode(headers)

    def headers(self, stream_id, headers, end_stream=True, end_headers=True):
        f = HeadersFrame(stream_id)
        f.data = self.block(headers)
        if end_stream:
            f.flags.add("END_STREAM")
        if end_headers:
            f.flags.add("END_HEADERS")
        return f

    def get(self, stream_id, path, extra=(), method="GET", end_stream=True):
        return self.headers(stream_id, [(":method", method), (":scheme", "http"), (":path", path),
                                        (":authority", "localhost")] + list(extra), end_stream)

    def data(self, stream_id, payload, end_stream=False):
        f = DataFrame(stream_id)
        f.data = payload
        if end_stream:
            f.flags.add("END_STREAM")
        return f

    def read_frame(self, timeout=5.0):
        """The next frame, or None once the server closed (or nothing came within `timeout`)."""
        deadline = time.monotonic() + timeout
        while True:
            if len(self.buf) >= 9:
                frame, length = Frame.parse_frame_header(memoryview(self.buf[:9]))
                if len(self.buf) >= 9 + length:
                    frame.parse_body(memoryview(self.buf[9:9 + length]))
                    self.buf = self.buf[9 + length:]
                    if isinstance(frame, SettingsFrame) and "ACK" not in frame.flags:
                        self.try_send(SettingsFrame(0, flags=["ACK"]))
                    if isinstance(frame, HeadersFrame) or isinstance(frame, ContinuationFrame):
                        frame.decoded = self.decoder.decode(frame.data, raw=False)
                    self.frames.append(frame)
                    return frame
            left = deadline - time.monotonic()
            if left <= 0 or self.eof:
                return None
            self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(65536)
            except socket.timeout:
                return None
            except ConnectionResetError:
                chunk = b""
            if not chunk:
                self.eof = True
                continue
            self.buf += chunk

    def until(self, predicate, timeout=5.0):
        """Reads until a frame satisfies `predicate`; returns it (None on close or timeout)."""
        deadline = time.monotonic() + timeout
        while True:
            f = self.read_frame(max(0.0, deadline - time.monotonic()))
            if f is None or predicate(f):
                return f

    def response(self, stream_id, timeout=5.0, window_updates=True):
        """(headers dict, body, rst error code or None) of one stream."""
        headers, body = {}, b""
        deadline = time.monotonic() + timeout
        while True:
            f = self.read_frame(max(0.0, deadline - time.monotonic()))
            if f is None:
                raise AssertionError(f"stream {stream_id}: no complete response; frames "
                                     f"{[type(x).__name__ for x in self.frames[-10:]]}")
            if f.stream_id != stream_id:
                continue
            if isinstance(f, HeadersFrame):
                headers.update(dict(f.decoded))
            elif isinstance(f, DataFrame):
                body += f.data
                if window_updates and f.flow_controlled_length:
                    self.try_send(WindowUpdateFrame(0, window_increment=f.flow_controlled_length),
                                  WindowUpdateFrame(stream_id, window_increment=f.flow_controlled_length))
            elif isinstance(f, RstStreamFrame):
                return headers, body, f.error_code
            if "END_STREAM" in f.flags:
                return headers, body, None

    def responses(self, stream_ids, timeout=10.0):
        """{stream id: (headers, body, rst)} of several streams read together."""
        out = {sid: [{}, b"", None] for sid in stream_ids}
        open_ids = set(stream_ids)
        deadline = time.monotonic() + timeout
        while open_ids:
            f = self.read_frame(max(0.0, deadline - time.monotonic()))
            if f is None:
                raise AssertionError(f"streams {open_ids}: no complete response")
            if f.stream_id not in open_ids:
                continue
            r = out[f.stream_id]
            if isinstance(f, HeadersFrame):
                r[0].update(dict(f.decoded))
            elif isinstance(f, DataFrame):
                r[1] += f.data
                if f.flow_controlled_length:
                    self.try_send(WindowUpdateFrame(0, window_increment=f.flow_controlled_length),
                                  WindowUpdateFrame(f.stream_id,
                                                    window_increment=f.flow_controlled_length))
            elif isinstance(f, RstStreamFrame):
                r[2] = f.error_code
                open_ids.discard(f.stream_id)
            if "END_STREAM" in f.flags:
                open_ids.discard(f.stream_id)
        return {sid: tuple(v) for sid, v in out.items()}

    def goaway(self, timeout=5.0):
        return self.until(lambda f: isinstance(f, GoAwayFrame), timeout)

    def closed(self, timeout=5.0):
        """True once the server closed the connection (frames before the close are kept)."""
        deadline = time.monotonic() + timeout
        while not self.eof:
            if self.read_frame(max(0.0, deadline - time.monotonic())) is None and not self.eof:
                return False
        return True


class Http2TestCase(ServerTestCase):
    limits = ""

    def setUp(self):
        super().setUp()
        self.root = self.make_root({"file": SMALL.decode(), "index.html": "index\n"})
        with open(os.path.join(self.root, "big.bin"), "wb") as f:
            f.write(BIG)
        self.srv = self.start_config(h2_config(self.root, limits=self.limits,
                                               routes=self.routes()))
        self.port = self.srv.port

    def routes(self):
        return ('\n[[site.route]]\nexact = "/moved"\nreturn = 301\nlocation = "/file"\n'
                '\n[[site.route]]\nprefix = "/"\n')

    def client(self, settings=None):
        c = RawH2(self.port, settings)
        self.addCleanup(c.close)
        return c

    def assert_still_serving(self):
        c = self.client()
        c.send(c.get(1, "/file"))
        headers, body, rst = c.response(1)
        self.assertEqual((headers.get(":status"), body, rst), ("200", SMALL, None))


class TestFrames(Http2TestCase):
    limits = 'max_header_bytes = "4k"\nsend_timeout = "1s"\nmax_body_bytes = "8k"\n'

    def test_settings_exchange(self):
        c = self.client({SettingsFrame.INITIAL_WINDOW_SIZE: 70000})
        first = c.read_frame()
        self.assertIsInstance(first, SettingsFrame, "the server's first frame is its SETTINGS")
        self.assertNotIn("ACK", first.flags)
        self.assertEqual(first.settings[SettingsFrame.MAX_CONCURRENT_STREAMS], 128)
        self.assertEqual(first.settings[SettingsFrame.MAX_HEADER_LIST_SIZE], 4096)
        self.assertEqual(first.settings[SettingsFrame.ENABLE_PUSH], 0)
        self.assertEqual(first.settings[0x9], 1, "SETTINGS_NO_RFC7540_PRIORITIES (RFC 9218)")
        ack = c.until(lambda f: isinstance(f, SettingsFrame) and "ACK" in f.flags)
        self.assertIsNotNone(ack, "our SETTINGS are acknowledged")
        c.send(PingFrame(0, opaque_data=b"12345678"))
        pong = c.until(lambda f: isinstance(f, PingFrame))
        self.assertIn("ACK", pong.flags)
        self.assertEqual(pong.opaque_data, b"12345678")

    def test_flow_control_exhaust_then_resume(self):
        c = self.client({SettingsFrame.INITIAL_WINDOW_SIZE: 1000})
        c.send(c.get(1, "/big.bin"))
        received = b""
        while True:
            f = c.read_frame(timeout=0.7)
            if f is None:
                break
            if isinstance(f, DataFrame) and f.stream_id == 1:
                received += f.data
                self.assertNotIn("END_STREAM", f.flags)
        self.assertEqual(len(received), 1000, "exactly the stream's window, then nothing")
        # Open both windows: the rest follows.
        c.send(WindowUpdateFrame(0, window_increment=len(BIG)), WindowUpdateFrame(1, window_increment=len(BIG)))
        headers, body, rst = c.response(1, window_updates=False)
        self.assertIsNone(rst)
        self.assertEqual(received + body, BIG)

    def test_refused_stream_beyond_128(self):
        # A zero window keeps every answered stream open (its DATA cannot leave).
        c = self.client({SettingsFrame.INITIAL_WINDOW_SIZE: 0})
        c.send(*[c.get(2 * i + 1, "/big.bin") for i in range(129)])
        rst = c.until(lambda f: isinstance(f, RstStreamFrame), timeout=3)
        self.assertIsNotNone(rst, "one stream refused")
        self.assertEqual((rst.stream_id, rst.error_code), (2 * 128 + 1, REFUSED_STREAM))
        self.assertFalse(any(isinstance(f, GoAwayFrame) for f in c.frames), "not a connection error")

    def test_rapid_reset(self):
        c = self.client()
        frames = []
        for i in range(300):
            frames += [c.get(2 * i + 1, "/file"), RstStreamFrame(2 * i + 1, error_code=CANCEL)]
        c.send(*frames)
        g = c.goaway()
        self.assertIsNotNone(g, "GOAWAY after too many client resets")
        self.assertEqual(g.error_code, ENHANCE_YOUR_CALM)
        self.assertTrue(c.closed())
        self.wait_for(lambda: "rapid reset" in self.srv.stderr(), msg="the error-log line")
        self.assert_still_serving()

    def test_continuation_flood(self):
        c = self.client()
        f = c.headers(1, [(":method", "GET"), (":scheme", "http"), (":path", "/file"),
                          (":authority", "localhost")], end_stream=True, end_headers=False)
        c.send(f)
        try:
            for i in range(2000):  # never END_HEADERS: 2000 x 1 KB of new literal fields
                cont = ContinuationFrame(1)
                cont.data = c.block([(f"x-flood-{i}", "v" * 1000)])
                c.send(cont)
        except (BrokenPipeError, ConnectionResetError):
            pass  # closed on us mid-flood: what we want
        g = c.goaway()
        self.assertIsNotNone(g, f"GOAWAY; got {c.frames[-5:]}\n{self.srv.stderr()[-2000:]}")
        self.assertIn(g.error_code, (ENHANCE_YOUR_CALM, PROTOCOL_ERROR))
        self.assertTrue(c.closed())
        self.assert_still_serving()

    def test_made_you_reset(self):
        # Each stream provokes a reset from the server (more DATA than its content-length, a
        # forbidden field):
        # past the budget the connection ends with ENHANCE_YOUR_CALM.
        c = self.client({SettingsFrame.INITIAL_WINDOW_SIZE: 0})
        try:
            for i in range(150):
                sid = 2 * i + 1
                if i % 2:
                    c.send(c.get(sid, "/file", method="POST", end_stream=False,
                                 extra=[("content-length", "1")]),
                           c.data(sid, b"too long", end_stream=True))
                else:
                    c.send(c.get(sid, "/file", extra=[("connection", "close")]))
        except (BrokenPipeError, ConnectionResetError):
            pass
        g = c.goaway()
        self.assertIsNotNone(g)
        self.assertEqual(g.error_code, ENHANCE_YOUR_CALM)
        resets = [f for f in c.frames if isinstance(f, RstStreamFrame)]
        self.assertGreaterEqual(len(resets), 100)
        self.wait_for(lambda: "provoked resets" in self.srv.stderr(), msg="the error-log line")
        self.assert_still_serving()

    def test_hpack_bomb(self):
        # One 3 KB field in the dynamic table, then referenced by one byte each: 4 copies decode
        # to 12 KB (over max_header_bytes: 431), 50 copies to 150 KB (the connection ends).
        c = self.client()
        bomb = [("x-bomb", "b" * 3000)]
        c.send(c.get(1, "/file", extra=bomb * 4))
        headers, _, rst = c.response(1)
        self.assertEqual(headers.get(":status"), "431")
        block = c.block([(":method", "GET"), (":scheme", "http"), (":path", "/file"),
                         (":authority", "localhost")] + bomb * 50)
        self.assertLess(len(block), 200, "the bomb is small on the wire")
        f = HeadersFrame(3, flags=["END_STREAM", "END_HEADERS"])
        f.data = block
        c.send(f)
        g = c.goaway()
        self.assertIsNotNone(g)
        self.assertEqual(g.error_code, ENHANCE_YOUR_CALM)
        self.assert_still_serving()

    def test_zero_window_reader_closed_by_send_timeout(self):
        c = self.client({SettingsFrame.INITIAL_WINDOW_SIZE: 0})
        c.send(c.get(1, "/big.bin"))
        start = time.monotonic()
        self.assertTrue(c.closed(timeout=5), "closed once send_timeout (1s) passed")
        self.assertGreater(time.monotonic() - start, 0.8)
        self.assertTrue(any(isinstance(f, HeadersFrame) for f in c.frames))

    def test_malformed_pseudo_headers(self):
        c = self.client()
        base = [(":method", "GET"), (":scheme", "http"), (":path", "/file"),
                (":authority", "localhost")]
        cases = [
            base[:2] + base[3:],  # no :path
            base[1:],  # no :method
            [base[0], base[2], base[3]],  # no :scheme
            base + [(":foo", "bar")],  # unknown pseudo-header
            base[:3] + [("x-a", "1"), (":authority", "localhost")],  # pseudo after regular
            base + [(":path", "/again")],  # repeated
            [(":method", "GET"), (":scheme", "http"), (":path", ""), (":authority", "x")],
            base + [("X-Upper", "1")],  # upper-case name
            base + [(":status", "200")],  # response pseudo-header in a request
        ]
        for i, fields in enumerate(cases):
            sid = 2 * i + 1
            c.send(c.headers(sid, fields))
            _, _, rst = c.response(sid)
            self.assertEqual(rst, PROTOCOL_ERROR, f"case {i}: {fields}")
        c.send(c.get(99, "/file"))
        headers, body, rst = c.response(99)
        self.assertEqual((headers[":status"], body), ("200", SMALL), "the connection goes on")

    def test_connection_specific_headers(self):
        c = self.client()
        for i, field in enumerate([("connection", "keep-alive"), ("keep-alive", "5"),
                                   ("transfer-encoding", "chunked"), ("upgrade", "h2c"),
                                   ("proxy-connection", "x"), ("te", "gzip")]):
            sid = 2 * i + 1
            c.send(c.get(sid, "/file", extra=[field]))
            _, _, rst = c.response(sid)
            self.assertEqual(rst, PROTOCOL_ERROR, field)
        c.send(c.get(51, "/file", extra=[("te", "trailers")]))
        headers, body, rst = c.response(51)
        self.assertEqual((headers[":status"], body, rst), ("200", SMALL, None), "te: trailers is fine")

    def test_connection_specific_http2_settings(self):
        c = self.client()
        c.send(c.get(1, "/file", extra=[("http2-settings", "AAMAAABkAAQAAP__")]))
        _, _, rst = c.response(1)
        self.assertEqual(rst, PROTOCOL_ERROR)
        self.assert_still_serving()

    def test_field_names_are_lower_case_tokens(self):
        c = self.client()
        for i, field in enumerate([("x(y)", "1"), ("a/b", "1"), ("x y", "1"), ("x:y", "1"),
                                   ("x-tab", "v\t"), ("x-cr", "a\rb"), ("x-nul", "a\0b")]):
            sid = 2 * i + 1
            c.send(c.get(sid, "/file", extra=[field]))
            _, _, rst = c.response(sid)
            self.assertEqual(rst, PROTOCOL_ERROR, field)
        self.assert_still_serving()

    def test_pseudo_header_grammar(self):
        """What would become an HTTP/1.1 request line or Host is checked (issue 49): a malformed
        request is a stream error PROTOCOL_ERROR (RFC 9113 8.1.1), and the error log says why."""
        c = self.client()
        cases = [
            [(":method", "GET"), (":path", "/admin /ok")],
            [(":method", "GET"), (":path", "/ok HTTP/1.0")],
            [(":method", "GET"), (":path", "/a\tb")],
            [(":method", "GET"), (":path", "/caf\xe9")],
            [(":method", "GET /x"), (":path", "/file")],
            [(":method", "G\tET"), (":path", "/file")],
            [(":method", "GET"), (":path", "/file"), (":authority", "a.test x")],
            [(":method", "GET"), (":path", "/file"), (":authority", "a.test/x")],
            [(":method", "GET"), (":path", "/file"), (":authority", "u@a.test")],
            [(":method", "GET"), (":path", "/file"), (":authority", "a.test"), ("host", "b.test")],
        ]
        for i, fields in enumerate(cases):
            sid = 2 * i + 1
            f = dict(fields)
            c.send(c.headers(sid, [(":method", f[":method"]), (":scheme", "http"),
                                   (":path", f[":path"]),
                                   (":authority", f.get(":authority", "localhost"))]
                             + [x for x in fields if not x[0].startswith(":")]))
            _, _, rst = c.response(sid)
            self.assertEqual(rst, PROTOCOL_ERROR, fields)
        self.srv.stderr_once_it_has("HTTP/2: client sent a bad request (400)")
        self.assert_still_serving()

    # h2spec's cases that failed before issue 49, one test each (RFC 9113 5.1, 5.1.1, 5.3.1).

    def test_h2spec_5_1_8_data_after_the_clients_reset(self):
        c = self.client()
        c.send(c.get(1, "/file", end_stream=False), RstStreamFrame(1, error_code=CANCEL),
               c.data(1, b"test", end_stream=True))
        rst = c.until(lambda f: isinstance(f, (RstStreamFrame, GoAwayFrame)))
        self.assertIsInstance(rst, RstStreamFrame)
        self.assertEqual((rst.stream_id, rst.error_code), (1, STREAM_CLOSED))
        self.assert_still_serving()

    def test_h2spec_5_1_9_headers_after_the_clients_reset(self):
        c = self.client()
        c.send(c.get(1, "/file", end_stream=False), RstStreamFrame(1, error_code=CANCEL),
               c.get(1, "/file"))
        rst = c.until(lambda f: isinstance(f, (RstStreamFrame, GoAwayFrame)))
        self.assertIsInstance(rst, RstStreamFrame)
        self.assertEqual((rst.stream_id, rst.error_code), (1, STREAM_CLOSED))
        self.assert_still_serving()

    def closed_stream(self):
        c = self.client()
        c.send(c.get(1, "/file"))
        headers, body, rst = c.response(1)
        self.assertEqual((headers[":status"], body, rst), ("200", SMALL, None))
        return c

    def test_h2spec_5_1_11_data_on_a_closed_stream(self):
        c = self.closed_stream()
        c.send(c.data(1, b"test", end_stream=True))
        g = c.goaway()
        self.assertIsNotNone(g)
        self.assertEqual((g.error_code, g.last_stream_id), (STREAM_CLOSED, 1))
        self.assertTrue(c.closed())
        self.srv.stderr_once_it_has("DATA on a closed stream")

    def test_h2spec_5_1_12_headers_on_a_closed_stream(self):
        c = self.closed_stream()
        c.send(c.get(1, "/file"))
        g = c.goaway()
        self.assertIsNotNone(g)
        self.assertEqual(g.error_code, STREAM_CLOSED)
        self.assertTrue(c.closed())
        self.srv.stderr_once_it_has("HEADERS on a closed stream")

    def test_h2spec_5_1_1_2_lower_stream_id(self):
        c = self.client()
        c.send(c.get(5, "/file"), c.get(3, "/file"))
        g = c.goaway()
        self.assertIsNotNone(g)
        self.assertEqual((g.error_code, g.last_stream_id), (PROTOCOL_ERROR, 5))
        self.assertFalse(any(f.stream_id == 3 and isinstance(f, HeadersFrame) for f in c.frames),
                         "stream 3 is not answered")

    def test_frames_in_flight_after_our_reset_are_ignored(self):
        """RFC 9113 5.1: what the client sent before it read our RST_STREAM is dropped, not an
        error (here: a body refused with 413 before the client finished it)."""
        c = self.client()
        c.send(c.get(1, "/file", method="POST", end_stream=False,
                     extra=[("content-length", str(10 ** 9))]))
        headers, _, _ = c.response(1)
        self.assertEqual(headers[":status"], "413")
        c.send(c.data(1, b"late", end_stream=True))
        self.assert_still_serving()

    def test_h2spec_5_3_1_2_priority_depends_on_itself(self):
        c = self.client()
        # On an idle stream there is nothing to reset: the connection ends (RFC 9113 5.4).
        c.send(PriorityFrame(1, depends_on=1, stream_weight=255))
        g = c.goaway()
        self.assertIsNotNone(g)
        self.assertEqual(g.error_code, PROTOCOL_ERROR)
        # On an open stream, a stream error.
        c = self.client()
        c.send(c.get(1, "/file", end_stream=False), PriorityFrame(1, depends_on=1))
        rst = c.until(lambda f: isinstance(f, (RstStreamFrame, GoAwayFrame)))
        self.assertIsInstance(rst, RstStreamFrame)
        self.assertEqual((rst.stream_id, rst.error_code), (1, PROTOCOL_ERROR))

    def test_h2spec_6_3_2_priority_of_four_bytes_on_a_closed_stream(self):
        """Over h2c the answer is out before the PRIORITY arrives: a closed stream still gets its
        stream error FRAME_SIZE_ERROR."""
        c = self.closed_stream()
        c.sock.sendall(b"\x00\x00\x04\x02\x00\x00\x00\x00\x01" + b"\x80\x00\x00\x01")
        rst = c.until(lambda f: isinstance(f, (RstStreamFrame, GoAwayFrame)))
        self.assertIsInstance(rst, RstStreamFrame)
        self.assertEqual((rst.stream_id, rst.error_code), (1, FRAME_SIZE_ERROR))

    def test_content_length_mismatch(self):
        c = self.client()
        post = [("content-length", "10")]
        c.send(c.get(1, "/file", extra=post, method="POST", end_stream=False),
               c.data(1, b"12345", end_stream=True))
        _, _, rst = c.response(1)
        self.assertEqual(rst, PROTOCOL_ERROR, "fewer bytes than announced")
        c.send(c.get(3, "/file", extra=post, method="POST", end_stream=False),
               c.data(3, b"x" * 20, end_stream=True))
        headers, _, rst = c.response(3)
        self.assertEqual(rst, PROTOCOL_ERROR, "more bytes than announced")
        self.assert_still_serving()

    def test_body_over_max_body_bytes(self):
        c = self.client()
        c.send(c.get(1, "/file", [("content-length", "9000")], "POST", end_stream=False))
        headers, _, _ = c.response(1)
        self.assertEqual(headers[":status"], "413", "a declared length over the limit")
        c.send(c.get(3, "/file", [], "POST", end_stream=False),
               *[c.data(3, b"x" * 4000) for _ in range(3)])
        headers, _, _ = c.response(3)
        self.assertEqual(headers[":status"], "413", "an unknown length that grows over it")
        self.assert_still_serving()

    def test_oversized_header_list(self):
        c = self.client()
        c.send(c.get(1, "/file", extra=[("x-big", "a" * 3000), ("x-big2", "b" * 3000)]))
        headers, body, rst = c.response(1)
        self.assertEqual(headers.get(":status"), "431")
        c.send(c.get(3, "/file", extra=[("x-fine", "a" * 1000)]))
        headers, body, rst = c.response(3)
        self.assertEqual((headers[":status"], body), ("200", SMALL))


class TestRepeatedHeads(Http2TestCase):
    """A head like the one before it on the connection goes out as the same header block
    (src/server/http2_connection.cc): every response must still carry its own fields."""

    def test_each_response_keeps_its_own_fields(self):
        c = self.client()
        plan = ["/file", "/file", "/file", "/index.html", "/file", "/index.html", "/index.html",
                "/missing", "/file", "/big.bin", "/file", "/file"]
        seen = {}  # path -> the first response's fields but the date
        etag = None
        sid = 1
        for round_no in range(2):
            if round_no == 1:  # the date changes under the same heads
                time.sleep(1.05 - time.time() % 1)
            for path in plan:
                c.send(c.get(sid, path))
                headers, body, rst = c.response(sid)
                self.assertIsNone(rst, path)
                self.assertRegex(headers.pop("date"), r" \d\d:\d\d:\d\d GMT$")
                if path == "/missing":
                    self.assertEqual(headers[":status"], "404")
                else:
                    self.assertEqual(headers[":status"], "200", path)
                    self.assertEqual(int(headers["content-length"]), len(body), path)
                    expected = {"/file": SMALL, "/index.html": b"index\n", "/big.bin": BIG}
                    self.assertEqual(body, expected[path])
                self.assertEqual(headers, seen.setdefault(path, headers), (sid, path))
                if path == "/file":
                    etag = headers["etag"]
                sid += 2
            # A conditional request between the same heads: 304, without a length.
            c.send(c.get(sid, "/file", extra=[("if-none-match", etag)]))
            headers, body, rst = c.response(sid)
            self.assertEqual((headers[":status"], body, rst), ("304", b"", None))
            self.assertNotIn("content-length", headers)
            self.assertEqual(headers["etag"], etag)
            sid += 2
        self.assertNotEqual(seen["/file"]["etag"], seen["/index.html"]["etag"])
        self.assertNotEqual(seen["/file"]["content-type"], seen["/index.html"]["content-type"])


class TestTimeouts(Http2TestCase):
    limits = 'keepalive_timeout = "1s"\nheader_timeout = "1s"\n'

    def test_idle_connection_closed(self):
        c = self.client()
        c.send(c.get(1, "/file"))
        headers, body, _ = c.response(1)
        self.assertEqual(body, SMALL)
        start = time.monotonic()
        g = c.goaway(timeout=4)
        self.assertIsNotNone(g, "GOAWAY once idle for keepalive_timeout")
        self.assertEqual(g.error_code, NO_ERROR)
        self.assertTrue(c.closed())
        self.assertGreater(time.monotonic() - start, 0.5)

    def test_settings_ack_timeout(self):
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=5)
        self.addCleanup(sock.close)
        sock.sendall(PREFACE + SettingsFrame(0).serialize())  # and never an ACK
        data = b""
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
        frames = []
        while len(data) >= 9:
            f, length = Frame.parse_frame_header(memoryview(data[:9]))
            f.parse_body(memoryview(data[9:9 + length]))
            frames.append(f)
            data = data[9 + length:]
        goaways = [f for f in frames if isinstance(f, GoAwayFrame)]
        self.assertEqual([g.error_code for g in goaways], [SETTINGS_TIMEOUT])


class TestRequestsPerConnection(Http2TestCase):
    limits = "max_requests_per_connection = 3\n"

    def test_goaway_after_the_limit(self):
        c = self.client()
        for stream in (1, 3):
            c.send(c.get(stream, "/file"))
            headers, body, rst = c.response(stream)
            self.assertEqual((headers.get(":status"), body, rst), ("200", SMALL, None))
        c.send(c.get(5, "/file"), c.get(7, "/file"))
        g = c.goaway()
        self.assertIsNotNone(g, "GOAWAY once the third stream began")
        self.assertEqual((g.error_code, g.last_stream_id), (NO_ERROR, 5))
        headers, body, rst = c.response(5)
        self.assertEqual((headers.get(":status"), body, rst), ("200", SMALL, None))
        self.assertTrue(c.closed())
        # Stream 7 came after the GOAWAY's last stream: never answered.
        self.assertFalse([f for f in c.frames if isinstance(f, HeadersFrame) and f.stream_id == 7])
        self.assert_still_serving()


class TestGracefulStop(Http2TestCase):
    def test_goaway_then_streams_finish(self):
        c = self.client({SettingsFrame.INITIAL_WINDOW_SIZE: 0})
        c.send(c.get(1, "/big.bin"))
        c.until(lambda f: isinstance(f, HeadersFrame))
        self.srv.signal(signal.SIGQUIT)
        g = c.goaway()
        self.assertIsNotNone(g)
        self.assertEqual((g.error_code, g.last_stream_id), (NO_ERROR, 1))
        # A new stream after the GOAWAY is not served; the one in flight completes.
        c.send(WindowUpdateFrame(0, window_increment=len(BIG)), WindowUpdateFrame(1, window_increment=len(BIG)))
        headers, body, rst = c.response(1, window_updates=False)
        self.assertEqual(body, BIG)
        self.assertTrue(c.closed())
        self.assertEqual(self.srv.wait(5), 0)


class TestClients(Http2TestCase):
    # h2load sends 2,000 requests per connection and does not reconnect after the GOAWAY that
    # the default limit (1,000) brings.
    limits = "max_requests_per_connection = 1000000\n"

    def setUp(self):
        require_tool("curl", "curl")
        super().setUp()

    def curl(self, *args):
        out = subprocess.run(["curl", "-sS", "--http2-prior-knowledge", "-o", "-", "-D",
                              os.path.join(self.tmp, "head.txt")] + list(args),
                             capture_output=True, timeout=30)
        self.assertEqual(out.returncode, 0, out.stderr)
        with open(os.path.join(self.tmp, "head.txt"), "rb") as f:
            head = f.read().decode()
        self.assertTrue(head.startswith("HTTP/2 "), head)
        status = int(head.split()[1])
        headers = {}
        for line in head.split("\r\n")[1:]:
            if ":" in line:
                k, v = line.split(":", 1)
                headers[k.strip().lower()] = v.strip()
        return status, headers, out.stdout

    def url(self, path):
        return f"http://127.0.0.1:{self.port}{path}"

    def test_curl_static(self):
        status, headers, body = self.curl(self.url("/file"))
        self.assertEqual((status, body), (200, SMALL))
        self.assertEqual(headers["content-length"], "11")
        self.assertIn("date", headers)
        etag = headers["etag"]
        status, headers, body = self.curl("-H", "Range: bytes=2-5", self.url("/big.bin"))
        self.assertEqual((status, body), (206, BIG[2:6]))
        self.assertEqual(headers["content-range"], f"bytes 2-5/{len(BIG)}")
        status, _, body = self.curl("-H", f"If-None-Match: {etag}", self.url("/file"))
        self.assertEqual((status, body), (304, b""))
        status, headers, body = self.curl("-I", self.url("/big.bin"))
        self.assertEqual((status, body[:0]), (200, b""))
        self.assertEqual(headers["content-length"], str(len(BIG)))
        status, _, body = self.curl(self.url("/big.bin"))
        self.assertEqual(body, BIG)
        status, _, body = self.curl(self.url("/missing"))
        self.assertEqual(status, 404)
        self.assertIn(b"404", body)

    def test_curl_return(self):
        status, headers, _ = self.curl(self.url("/moved"))
        self.assertEqual(status, 301)
        self.assertTrue(headers["location"].endswith("/file"), headers)

    def test_preface_in_pieces(self):
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=5)
        self.addCleanup(sock.close)
        sock.sendall(PREFACE[:5])
        time.sleep(0.2)
        sock.sendall(PREFACE[5:20])
        time.sleep(0.2)
        c = RawH2.__new__(RawH2)
        c.sock, c.encoder, c.decoder, c.buf, c.eof, c.frames = sock, Encoder(), Decoder(), b"", False, []
        sock.sendall(PREFACE[20:] + SettingsFrame(0).serialize())
        c.send(c.get(1, "/file"))
        headers, body, _ = c.response(1)
        self.assertEqual((headers[":status"], body), ("200", SMALL))

    def test_http1_still_served_on_the_same_listener(self):
        status, _, body = self.get(self.port, "/file")
        self.assertEqual((status, body), (200, SMALL))

    def test_nghttp(self):
        require_tool("nghttp", "nghttp2-client")
        out = subprocess.run(["nghttp", "-v", "-a", self.url("/index.html"), self.url("/big.bin"),
                              self.url("/file")],
                             capture_output=True, timeout=30)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(out.stdout.count(b":status: 200"), 3, out.stdout[-2000:])

    def test_h2load(self):
        require_tool("h2load", "nghttp2-client")
        out = subprocess.run(["h2load", "-n", "200000", "-c", "100", "-m", "10", "-t", "1",
                              self.url("/file")], capture_output=True, timeout=120)
        text = out.stdout.decode()
        self.assertIn("200000 succeeded, 0 failed, 0 errored, 0 timeout", text, text)
        self.assertIn("status codes: 200000 2xx", text, text)


class TestAccessLog(ServerTestCase):
    def test_protocol_in_access_log(self):
        require_tool("curl", "curl")
        root = self.make_root({"file": "x"})
        log = os.path.join(self.tmp, "access.log")
        srv = self.start_config(h2_config(root, access_log=log))
        subprocess.run(["curl", "-s", "--http2-prior-knowledge", "-o", "/dev/null",
                        f"http://127.0.0.1:{srv.port}/file"], check=True, timeout=10)
        self.wait_for(lambda: os.path.exists(log) and "HTTP/2.0" in open(log).read(), timeout=4,
                      msg="an access-log line with HTTP/2.0")
        self.assertIn('"GET /file HTTP/2.0" 200 1 ', open(log).read())


class TestDateAndServer(ServerTestCase):
    # HTTP/2 takes the date and server fields from the worker's values, not its HTTP/1 lines.
    def test_date_and_the_configured_server(self):
        require_tool("curl", "curl")
        root = self.make_root({"file": "x"})
        date = re.compile(r"^(Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d\d [A-Z][a-z]{2} \d{4} "
                          r"\d\d:\d\d:\d\d GMT$")
        for name, top, server in (("named.toml", 'server_header = "edge/1.0"', "edge/1.0"),
                                  ("none.toml", 'server_header = ""', None)):
            srv = self.start_config(h2_config(root, top=top), name=name)
            out = subprocess.run(["curl", "-sS", "--http2-prior-knowledge", "-D", "-", "-o",
                                  "/dev/null", f"http://127.0.0.1:{srv.port}/file"],
                                 capture_output=True, text=True, timeout=10)
            self.assertEqual(out.returncode, 0, out.stderr)
            lines = [line.rstrip() for line in out.stdout.splitlines()]
            self.assertEqual(lines[0], "HTTP/2 200")
            fields = [line.split(": ", 1) for line in lines[1:] if line]
            self.assertEqual([f[0] for f in fields if f[0] in ("date", "server")],
                             ["date", "server"] if server else ["date"], fields)
            self.assertRegex(dict(fields)["date"], date)
            self.assertEqual(dict(fields).get("server"), server)


class TestProxyRequestChecks(ServerTestCase):
    """Issue 49: what the proxy forwards upstream is one HTTP/1.1 request, with the routed method,
    target and authority. A recording back end keeps every byte it receives."""

    def setUp(self):
        super().setUp()
        self.backend = HttpRecorder("rec")
        self.addCleanup(self.backend.close)
        root = self.make_root({"x": "x"})
        self.srv = self.start_config(h2_config(
            root, top=upstream_toml("app", [self.backend.address]),
            routes=route_toml("/", proxy="http://app")))

    def send(self, sid, c, method="GET", path="/ok", authority="a.test", extra=()):
        fields = [(":method", method), (":scheme", "http"), (":path", path)]
        if authority is not None:
            fields.append((":authority", authority))
        c.send(c.headers(sid, fields + list(extra)))
        return c.response(sid)

    def test_bad_pseudo_headers_never_reach_the_back_end(self):
        cases = [
            dict(path="/admin /ok"), dict(path="/ok HTTP/1.0"), dict(path="/a\tb"),
            dict(path="/a\x7f"), dict(path="/a\x01b"), dict(path="/\xc3\xa9"),
            dict(method="GET /admin"), dict(method="GET\t/x"), dict(method="G ET"),
            dict(authority="a.test x"), dict(authority="a.test/x"), dict(authority="a.test\tx"),
            dict(authority="u@a.test"), dict(authority=""),
            dict(authority="a.test", extra=[("host", "b.test")]),
            dict(authority=None, extra=[("host", "b.test/x")]),
            dict(authority=None, extra=[("host", "b.test"), ("host", "c.test")]),
            dict(extra=[("x-v", "a\rb")]), dict(extra=[("x-v", "a\nX-Injected: 1")]),
            dict(extra=[("x-v", "a\0b")]), dict(extra=[("x y", "1")]),
            dict(extra=[("x-v", "a\x7fb")]), dict(extra=[("x-v", "a\x0cb")]),
            dict(extra=[("upgrade", "h2c")]), dict(extra=[("http2-settings", "AAMAAABk")]),
            dict(extra=[("connection", "upgrade")]),
        ]
        c = RawH2(self.srv.port)
        self.addCleanup(c.close)
        for i, case in enumerate(cases):
            headers, _, rst = self.send(2 * i + 1, c, **case)
            self.assertEqual(rst, PROTOCOL_ERROR, f"{case}: {headers}")
        seen, garbage, leftover = self.backend.take()
        self.assertEqual((seen, garbage), ([], []), "nothing reached the back end")
        self.assertFalse(any(leftover), leftover)
        # Each refusal has its line, whichever layer refused (the session's checks or finish()).
        self.wait_for(lambda: self.srv.stderr().count("HTTP/2: client sent a") >= len(cases),
                      msg="a log line per refused request")
        self.assertIn("malformed request (stream reset, PROTOCOL_ERROR): a connection-specific field",
                      self.srv.stderr())
        # The connection still works, and a good request arrives whole.
        headers, body, rst = self.send(101, c, path="/ok?q=1")
        self.assertEqual((headers.get(":status"), body, rst), ("200", b"ok", None))
        seen, garbage, _ = self.backend.take()
        self.assertEqual(garbage, [])
        self.assertEqual([(s.method, s.target, s.authority) for s in seen],
                         [("GET", "/ok?q=1", "a.test")])

    def test_the_routed_authority_is_the_one_host(self):
        """RFC 9113 8.3.1: with :authority and a host naming the same authority (any case), the
        back end sees one Host, :authority's."""
        c = RawH2(self.srv.port)
        self.addCleanup(c.close)
        for sid, extra in ((1, [("host", "A.TEST")]), (3, [])):
            headers, body, rst = self.send(sid, c, authority="a.test", extra=extra)
            self.assertEqual((headers.get(":status"), rst), ("200", None))
        headers, body, rst = self.send(5, c, authority=None, extra=[("host", "b.test:8080")])
        self.assertEqual((headers.get(":status"), rst), ("200", None))
        seen, garbage, _ = self.backend.take()
        self.assertEqual(garbage, [])
        self.assertEqual([s.header_all("host") for s in seen],
                         [["a.test"], ["a.test"], ["b.test:8080"]])


class TestFastcgi(ServerTestCase):
    def setUp(self):
        super().setUp()
        require_tool("curl", "curl")
        self.root, self.fpm, top = phpfpm.start_for(self)
        routes = ("\n[[site.route]]\nregex = '[^/]\\.php(/|$)'\nfastcgi = \"php\"\n"
                  '\n[[site.route]]\nprefix = "/"\n')
        self.srv = self.start_config(h2_config(self.root, top=top, routes=routes,
                                               limits='max_body_bytes = "8m"'))

    def curl(self, *args):
        out = subprocess.run(["curl", "-sS", "--http2-prior-knowledge", "-w", "\n%{http_version} %{http_code}"]
                             + list(args), capture_output=True, timeout=60)
        self.assertEqual(out.returncode, 0, out.stderr)
        body, _, tail = out.stdout.rpartition(b"\n")
        self.assertTrue(tail.startswith(b"2 "), tail)
        return int(tail.split()[1]), body

    def test_php_env_over_h2(self):
        status, body = self.curl("-H", "Cookie: a=1", "-H", "Cookie: b=2",
                                 f"http://127.0.0.1:{self.srv.port}/env.php?x=1")
        self.assertEqual(status, 200, body)
        env = json.loads(body)
        self.assertEqual(env["server"]["SERVER_PROTOCOL"], "HTTP/2.0")
        self.assertEqual(env["server"]["HTTP_HOST"], f"127.0.0.1:{self.srv.port}")
        self.assertEqual(env["server"]["QUERY_STRING"], "x=1")
        self.assertEqual(env["cookie"], {"a": "1", "b": "2"})

    def test_php_post_2mb(self):
        payload = os.urandom(2 * 1024 * 1024)
        path = os.path.join(self.tmp, "upload.bin")
        with open(path, "wb") as f:
            f.write(payload)
        status, body = self.curl("--data-binary", f"@{path}", "-H",
                                 "Content-Type: application/octet-stream",
                                 f"http://127.0.0.1:{self.srv.port}/env.php")
        self.assertEqual(status, 200, body[:500])
        env = json.loads(body)
        self.assertEqual(env["body_length"], len(payload))
        self.assertEqual(env["body_sha256"], hashlib.sha256(payload).hexdigest())

    def test_h2load_php(self):
        require_tool("h2load", "nghttp2-client")
        out = subprocess.run(["h2load", "-n", "2000", "-c", "4", "-m", "10",
                              f"http://127.0.0.1:{self.srv.port}/hello.php"],
                             capture_output=True, timeout=60)
        text = out.stdout.decode()
        self.assertIn("2000 succeeded, 0 failed, 0 errored, 0 timeout", text, text)
        self.assertIn("status codes: 2000 2xx", text, text)

    def test_php_big_response_and_nghttp(self):
        require_tool("nghttp", "nghttp2-client")
        status, body = self.curl(f"http://127.0.0.1:{self.srv.port}/big.php?size=1000000")
        self.assertEqual((status, len(body)), (200, 1000000))
        out = subprocess.run(["nghttp", "-v", f"http://127.0.0.1:{self.srv.port}/hello.php"],
                             capture_output=True, timeout=30)
        self.assertIn(b":status: 200", out.stdout)
        self.assertIn(b"Hello, world!", out.stdout)


class TestProxy(ServerTestCase):
    def setUp(self):
        super().setUp()
        require_tool("curl", "curl")
        self.backend = Backend(self.tmp, "b1").start()
        self.addCleanup(self.backend.kill)
        root = self.make_root({"x": "x"})
        self.srv = self.start_config(h2_config(
            root, top=upstream_toml("app", [self.backend.address]),
            routes=route_toml("/", proxy="http://app"), limits='max_body_bytes = "8m"'))

    def curl(self, *args):
        out = subprocess.run(["curl", "-sS", "--http2-prior-knowledge", "-w", "\n%{http_code}"]
                             + list(args), capture_output=True, timeout=60)
        self.assertEqual(out.returncode, 0, out.stderr)
        body, _, tail = out.stdout.rpartition(b"\n")
        return int(tail), body

    def test_echo(self):
        status, body = self.curl(f"http://127.0.0.1:{self.srv.port}/a/echo?q=1")
        self.assertEqual(status, 200, body)
        echo = json.loads(body)
        self.assertEqual(echo["version"], "HTTP/1.1", "HTTP/1.1 upstream whatever the client speaks")
        self.assertEqual(echo["target"], "/a/echo?q=1")
        names = [h[0].lower() for h in echo["headers"]]
        self.assertIn("host", names)

    def test_upload_2mb(self):
        payload = os.urandom(2 * 1024 * 1024)
        path = os.path.join(self.tmp, "upload.bin")
        with open(path, "wb") as f:
            f.write(payload)
        status, body = self.curl("--data-binary", f"@{path}",
                                 f"http://127.0.0.1:{self.srv.port}/upload")
        self.assertEqual(status, 200, body)
        answer = json.loads(body)
        self.assertEqual((answer["length"], answer["sha256"]),
                         (len(payload), hashlib.sha256(payload).hexdigest()))

    def test_download_streamed(self):
        size = 3 * 1024 * 1024 + 17
        for chunked in ("0", "1"):
            status, body = self.curl(
                f"http://127.0.0.1:{self.srv.port}/download?bytes={size}&chunked={chunked}")
            self.assertEqual((status, len(body)), (200, size))
            self.assertEqual(hashlib.sha256(body).hexdigest(), pattern_sha256(size))

    def test_request_body_window_follows_the_back_end(self):
        # A back end that accepts and never reads: the client may send only what the windows
        # allow, and the server opens them only as the upstream socket takes bytes.
        sink = socket.socket()
        self.addCleanup(sink.close)
        sink.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sink.bind(("127.0.0.1", 0))
        sink.listen(8)
        root = self.make_root({"y": "y"}, name="www2")
        srv = self.start_config(h2_config(
            root, top=upstream_toml("stuck", [f"127.0.0.1:{sink.getsockname()[1]}"],
                                    read_timeout="30s", send_timeout="30s"),
            routes=route_toml("/", proxy="http://stuck"), limits='max_body_bytes = "64m"'))
        c = RawH2(srv.port)
        self.addCleanup(c.close)
        total = 32 * 1024 * 1024
        c.send(c.get(1, "/upload", [("content-length", str(total))], "POST", end_stream=False))
        conn_window = stream_window = 65535
        sent = 0
        idle_since = time.monotonic()
        while time.monotonic() - idle_since < 1.5 and sent < total:
            n = min(conn_window, stream_window, 16384, total - sent)
            if n > 0:
                c.send(c.data(1, b"z" * n))
                sent += n
                conn_window -= n
                stream_window -= n
                idle_since = time.monotonic()
                continue
            f = c.read_frame(timeout=0.2)
            if isinstance(f, WindowUpdateFrame):
                if f.stream_id == 0:
                    conn_window += f.window_increment
                else:
                    stream_window += f.window_increment
            if isinstance(f, (RstStreamFrame, GoAwayFrame)):
                self.fail(f"unexpected {f}")
        print(f"body bytes the windows allowed: {sent}", file=sys.stderr)
        self.assertLess(sent, 8 * 1024 * 1024,
                        "the server stops opening the window once the back end stops reading")
        self.assertGreater(sent, 65535, "and opened it while the back end took bytes")

    def test_an_upload_stalled_after_the_answer_is_read_times_out(self):
        # As over HTTP/1.1 (test_proxy.py, TestBodies): the back end streams its answer while the
        # body comes in (/duplex); the client reads all of it, then sends no more body.
        root = self.make_root({"y": "y"}, name="www2")
        srv = self.start_config(h2_config(
            root, top=upstream_toml("app", [self.backend.address]),
            routes=route_toml("/", proxy="http://app"),
            limits='body_timeout = "1s"\nsend_timeout = "30s"'))
        c = RawH2(srv.port)
        self.addCleanup(c.close)
        size = 1000
        t0 = time.monotonic()
        c.send(c.get(1, f"/duplex?bytes={size}", [("content-length", "100000")], "POST",
                     end_stream=False), c.data(1, b"x" * 10))
        got = 0
        while got < size:
            f = c.until(lambda f: isinstance(f, (DataFrame, RstStreamFrame, GoAwayFrame)))
            self.assertIsInstance(f, DataFrame, f"the answer's bytes; frames {c.frames[-5:]}")
            if f.stream_id == 1:
                got += len(f.data)
        self.assertTrue(c.closed(timeout=3.5), "a stalled upload outlived body_timeout")
        self.assertGreater(time.monotonic() - t0, 0.8, "closed before body_timeout")
        self.assertTrue(any(isinstance(f, GoAwayFrame) for f in c.frames), "a GOAWAY first")

    def test_small_windows_streamed_download(self):
        # Windows of 16 KB: the streamed body waits for each WINDOW_UPDATE (DATA deferred and
        # resumed, the exchange told kFull and then on_writable) and arrives whole.
        c = RawH2(self.srv.port, {SettingsFrame.INITIAL_WINDOW_SIZE: 16384})
        self.addCleanup(c.close)
        size = 1024 * 1024 + 3
        c.send(c.get(1, f"/download?bytes={size}&chunked=1"),
               c.get(3, f"/download?bytes={size}"))
        for sid, (headers, body, rst) in c.responses([1, 3], timeout=30).items():
            self.assertEqual((headers[":status"], rst, len(body)), ("200", None, size))
            self.assertEqual(hashlib.sha256(body).hexdigest(), pattern_sha256(size))

    def test_h2load_proxy(self):
        require_tool("h2load", "nghttp2-client")
        out = subprocess.run(["h2load", "-n", "2000", "-c", "4", "-m", "10",
                              f"http://127.0.0.1:{self.srv.port}/x"],
                             capture_output=True, timeout=60)
        text = out.stdout.decode()
        self.assertIn("2000 succeeded, 0 failed, 0 errored, 0 timeout", text, text)

    def test_nghttp_parallel(self):
        require_tool("nghttp", "nghttp2-client")
        urls = [f"http://127.0.0.1:{self.srv.port}/download?bytes=200000&n={i}" for i in range(8)]
        out = subprocess.run(["nghttp", "-n", "-s"] + urls, capture_output=True, timeout=30)
        self.assertEqual(out.returncode, 0, out.stderr)


if __name__ == "__main__":
    main()
