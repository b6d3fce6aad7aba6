"""HTTP/2 behaviour that came with our own session (src/http2/session/, issue 13), beside
test_http2.py: every connection error sends its GOAWAY before the close, and a per-address
connection limit answered at a stream's head (the GOAWAY is submitted while the session is still
reading the block)."""

from hyperframe.frame import DataFrame, GoAwayFrame

from harness import main
from test_http2 import NO_ERROR, PROTOCOL_ERROR, SMALL, Http2TestCase


class TestConnectionErrors(Http2TestCase):
    def test_protocol_error_gets_goaway_and_log_line(self):
        c = self.client()
        bad = DataFrame(1)  # DATA on stream 1, never opened: an idle stream (RFC 9113 5.1)
        bad.data = b"x"
        c.send(bad)
        g = c.goaway()
        self.assertIsNotNone(g, "a GOAWAY before the close")
        self.assertEqual(g.error_code, PROTOCOL_ERROR)
        self.wait_for(lambda: "HTTP/2: closing a connection: DATA on an idle stream"
                      in self.srv.stderr(), msg="the error-log line")
        self.assertTrue(c.closed(timeout=10), "the connection ends")
        self.assert_still_serving()

    def test_requests_before_the_error_are_answered(self):
        c = self.client()
        c.send(c.get(1, "/file"))
        headers, body, rst = c.response(1)
        self.assertEqual((headers.get(":status"), body, rst), ("200", SMALL, None))
        c.send(c.headers(2, [(":method", "GET"), (":scheme", "http"), (":path", "/file"),
                             (":authority", "localhost")]))  # an even stream id
        g = c.goaway()
        self.assertIsNotNone(g)
        self.assertEqual((g.error_code, g.last_stream_id), (PROTOCOL_ERROR, 1))


class TestConnectionLimitOverHttp2(Http2TestCase):
    # Http2TestCase's server, with a limit of one connection per address on the site.
    def start_config(self, text, *args, **kwargs):
        text = text.replace("[limits]\n", '[[limit]]\nname = "perip"\nconnections = 1\n\n[limits]\n', 1)
        text = text.replace("[[site]]\n", '[[site]]\nlimit = ["perip"]\n', 1)
        return super().start_config(text, *args, **kwargs)

    def test_second_connection_gets_503_and_goaway(self):
        first = self.client()
        first.send(first.get(1, "/file"))
        headers, body, rst = first.response(1)
        self.assertEqual((headers.get(":status"), body, rst), ("200", SMALL, None))
        second = self.client()
        second.send(second.get(1, "/file"))
        headers, body, rst = second.response(1)
        self.assertEqual(headers.get(":status"), "503")
        # The GOAWAY may come before the 503's body: look among the frames read so far too.
        g = next((f for f in second.frames if isinstance(f, GoAwayFrame)), None) or second.goaway()
        self.assertIsNotNone(g, "the refused connection is told to go")
        self.assertEqual((g.error_code, g.last_stream_id), (NO_ERROR, 1))
        self.assertTrue(second.closed(timeout=10))
        # The first connection still serves.
        first.send(first.get(3, "/file"))
        headers, body, rst = first.response(3)
        self.assertEqual((headers.get(":status"), body, rst), ("200", SMALL, None))


if __name__ == "__main__":
    main()
