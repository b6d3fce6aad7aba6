#!/usr/bin/env python3
"""On-the-fly compression (docs/compression.md): gzip, brotli and zstd for static files (cached
variants), FastCGI (php-fpm) and proxied bodies, negotiation, what bypasses it, server-sent
events. The memory of a thousand concurrent compressed streams is
test_compression_thousand_streams.py, which CTest runs alone.

Decoders are real peers: python's zlib for gzip, curl (built with brotli and zstd) for every
coding, and libzstd's own streaming decoder (through ctypes: Debian's python has no zstd module,
and the zstd command is not on a minimal machine).
"""

import os
import random
import shutil
import socket
import subprocess
import sys
import ctypes
import time
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (RawClient, ServerTestCase, check_answered_beside_a_stream, h2c,  # noqa: E402
                     main, make_config, q, serve_each_connection, STATIC_FALLBACK)
from hyperframe.frame import DataFrame, HeadersFrame, SettingsFrame, WindowUpdateFrame  # noqa: E402
import phpfpm  # noqa: E402
import test_http2  # noqa: E402
import test_proxy  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                "bench"))
from peregrine_bench.pages import wordpress_like_page  # noqa: E402

PHP_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "php")
CODINGS = ("gzip", "br", "zstd")


class _ZstdBuffer(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("size", ctypes.c_size_t), ("pos", ctypes.c_size_t)]


def zstd_decompress(data):
    """Every frame in `data`, decoded by libzstd's streaming decoder (frames of unknown size
    included, as a streamed response makes them)."""
    lib = ctypes.CDLL("libzstd.so.1")
    lib.ZSTD_createDCtx.restype = ctypes.c_void_p
    lib.ZSTD_decompressStream.restype = ctypes.c_size_t
    lib.ZSTD_decompressStream.argtypes = [ctypes.c_void_p, ctypes.POINTER(_ZstdBuffer),
                                          ctypes.POINTER(_ZstdBuffer)]
    lib.ZSTD_isError.argtypes = [ctypes.c_size_t]
    lib.ZSTD_freeDCtx.argtypes = [ctypes.c_void_p]
    dctx = lib.ZSTD_createDCtx()
    source = ctypes.create_string_buffer(bytes(data), len(data))
    chunk = ctypes.create_string_buffer(1 << 16)
    inp = _ZstdBuffer(ctypes.cast(source, ctypes.c_void_p), len(data), 0)
    out = bytearray()
    try:
        while True:
            outb = _ZstdBuffer(ctypes.cast(chunk, ctypes.c_void_p), len(chunk), 0)
            ret = lib.ZSTD_decompressStream(dctx, ctypes.byref(outb), ctypes.byref(inp))
            if lib.ZSTD_isError(ret):
                raise AssertionError(f"zstd: corrupt data (error {ret})")
            out += chunk.raw[:outb.pos]
            if inp.pos == inp.size and outb.pos < outb.size:
                if ret != 0:
                    raise AssertionError("zstd: the data ends inside a frame")
                return bytes(out)
    finally:
        lib.ZSTD_freeDCtx(dctx)


def decode(coding, data):
    if coding == "gzip":
        return zlib.decompress(data, 16 + zlib.MAX_WBITS)
    if coding == "zstd":
        return zstd_decompress(data)
    if coding == "br":
        # No brotli module in Debian's python: curl decodes brotli (and is the real client).
        raise AssertionError("use curl for brotli")
    return data


def curl(port, path, accept, extra=()):
    """(headers text, decoded body) as curl, which decodes gzip, br and zstd, receives them."""
    out = subprocess.run(["curl", "-s", "-S", "--compressed", "-D", "-", "-o", "/dev/stdout",
                          "-H", f"Accept-Encoding: {accept}", *extra,
                          f"http://127.0.0.1:{port}{path}"], capture_output=True, check=True,
                         timeout=30).stdout
    head, _, body = out.partition(b"\r\n\r\n")
    return head.decode("latin-1").lower(), body


class CompressionCase(ServerTestCase):
    def check_all_codings(self, port, path, expected, framing, types_note=""):
        """Every coding decodes to `expected`; `framing` is "length" or "chunked"."""
        for coding in CODINGS:
            with RawClient(port) as c:
                resp = c.request("GET", path, {"Accept-Encoding": coding})
            self.assertEqual(resp.status, 200, resp.body[:300])
            self.assertEqual(resp.header("content-encoding"), coding, resp.headers)
            self.assertIn("accept-encoding", (resp.header("vary") or "").lower())
            if framing == "any":  # buffered or streamed, as the bytes happened to arrive
                if resp.header("content-length") is not None:
                    self.assertEqual(int(resp.header("content-length")), len(resp.body))
                else:
                    self.assertEqual(resp.header("transfer-encoding"), "chunked")
            elif framing == "length":
                self.assertEqual(int(resp.header("content-length")), len(resp.body))
                self.assertIsNone(resp.header("transfer-encoding"))
            else:
                self.assertEqual(resp.header("transfer-encoding"), "chunked")
                self.assertIsNone(resp.header("content-length"))
            self.assertLess(len(resp.body), len(expected))
            if coding != "br":
                self.assertEqual(decode(coding, resp.body), expected, coding)
            head, body = curl(port, path, coding)
            self.assertIn(f"content-encoding: {coding}", head)
            self.assertEqual(body, expected, f"{coding} via curl{types_note}")


class TestStatic(CompressionCase):
    def setUp(self):
        super().setUp()
        self.page = wordpress_like_page()
        self.root = self.make_root({"index.html": self.page, "tiny.txt": "small",
                                    "logo.png": self.page, "app.js": self.page[:20000]})

    def start(self, site='compress = true\ncache_valid = "0s"'):
        return self.start_config(make_config(self.root, site=site))

    def test_every_coding_round_trips_with_a_content_length(self):
        srv = self.start()
        self.check_all_codings(srv.port, "/index.html", self.page, "length")
        self.check_all_codings(srv.port, "/app.js", self.page[:20000], "length")
        # Served again from the cache: the same bytes.
        with RawClient(srv.port) as c:
            a = c.request("GET", "/", {"Accept-Encoding": "br"})
            b = c.request("GET", "/", {"Accept-Encoding": "br"})
        self.assertEqual(a.body, b.body)
        self.assertNotEqual(a.header("etag"), None)

    def test_not_compressed_and_no_vary_for_small_or_unlisted_files(self):
        srv = self.start()
        with RawClient(srv.port) as c:
            for path in ("/tiny.txt", "/logo.png"):
                resp = c.request("GET", path, {"Accept-Encoding": "gzip, br, zstd"})
                self.assertIsNone(resp.header("content-encoding"), path)
                self.assertIsNone(resp.header("vary"), path)
            plain = c.request("GET", "/index.html")
        self.assertEqual(plain.body, self.page)
        self.assertEqual(plain.header("vary"), "Accept-Encoding")

    def test_q_values_and_identity(self):
        srv = self.start()
        cases = [("gzip, deflate, br, zstd", "br"), ("gzip;q=1, br;q=0.5", "gzip"),
                 ("br;q=0, *", "zstd"), ("*;q=0.1, gzip;q=0", "br"), ("identity;q=0, gzip;q=0.2", "gzip"),
                 ("identity, gzip;q=0.5", None), ("*;q=0", None), ("deflate", None), ("", None),
                 ("br;q=0, zstd;q=0, gzip;q=0", None), ("x-gzip", "gzip"), ("ZSTD;Q=0.9", "zstd")]
        with RawClient(srv.port) as c:
            for accept, expected in cases:
                resp = c.request("GET", "/index.html", {"Accept-Encoding": accept})
                self.assertEqual(resp.status, 200)
                self.assertEqual(resp.header("content-encoding"), expected, accept)
                self.assertEqual(resp.header("vary"), "Accept-Encoding", accept)
                if expected is None:
                    self.assertEqual(resp.body, self.page, accept)

    def test_range_and_conditional_requests(self):
        srv = self.start()
        with RawClient(srv.port) as c:
            rng = c.request("GET", "/index.html", {"Accept-Encoding": "gzip", "Range": "bytes=100-199"})
            self.assertEqual(rng.status, 206)
            self.assertIsNone(rng.header("content-encoding"))
            self.assertEqual(rng.body, self.page[100:200])
            full = c.request("GET", "/index.html", {"Accept-Encoding": "gzip"})
            etag = full.header("etag")
            self.assertTrue(etag.endswith('-gzip"'), etag)
            nm = c.request("GET", "/index.html", {"Accept-Encoding": "gzip", "If-None-Match": etag})
            self.assertEqual(nm.status, 304)
            self.assertEqual(nm.header("etag"), etag)
            self.assertEqual(nm.header("vary"), "Accept-Encoding")
            # The identity's ETag is another representation's: full body, compressed.
            plain_etag = c.request("GET", "/index.html").header("etag")
            self.assertNotEqual(plain_etag, etag)
            other = c.request("GET", "/index.html", {"Accept-Encoding": "gzip", "If-None-Match": plain_etag})
            self.assertEqual(other.status, 200)
            self.assertEqual(decode("gzip", other.body), self.page)
            # ...and the identity's validator answers 304 to an identity client.
            self.assertEqual(c.request("GET", "/index.html", {"If-None-Match": plain_etag}).status, 304)
            # If-Modified-Since with the file's date is a 304 for the variant too.
            ims = c.request("GET", "/index.html", {"Accept-Encoding": "br",
                                                   "If-Modified-Since": full.header("last-modified")})
            self.assertEqual(ims.status, 304)
            head = c.request("HEAD", "/index.html", {"Accept-Encoding": "gzip"})
            self.assertEqual(head.status, 200)
            self.assertEqual(head.header("vary"), "Accept-Encoding")

    def test_a_changed_file_invalidates_its_cached_variant(self):
        srv = self.start()
        with RawClient(srv.port) as c:
            first = c.request("GET", "/index.html", {"Accept-Encoding": "gzip"})
            self.assertEqual(decode("gzip", first.body), self.page)
            changed = wordpress_like_page(40 * 1024) + b"<!-- edited -->"
            with open(os.path.join(self.root, "index.html"), "wb") as f:
                f.write(changed)
            time.sleep(0.05)
            second = c.request("GET", "/index.html", {"Accept-Encoding": "gzip"})
            self.assertEqual(decode("gzip", second.body), changed)
            self.assertNotEqual(first.header("etag"), second.header("etag"))

    def test_precompressed_sibling_wins(self):
        with open(os.path.join(self.root, "index.html.gz"), "wb") as f:
            f.write(zlib.compress(b"from the sibling", 9)[:0] or self._gzip(b"from the sibling"))
        srv = self.start()
        with RawClient(srv.port) as c:
            resp = c.request("GET", "/index.html", {"Accept-Encoding": "gzip"})
            self.assertEqual(decode("gzip", resp.body), b"from the sibling")
            br = c.request("GET", "/index.html", {"Accept-Encoding": "zstd"})
            self.assertEqual(decode("zstd", br.body), self.page)

    @staticmethod
    def _gzip(data):
        c = zlib.compressobj(6, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
        return c.compress(data) + c.flush()

    def test_off_by_default_and_per_route(self):
        routes = ('\n[[site.route]]\nprefix = "/raw/"\ncompress = false\n' + STATIC_FALLBACK)
        os.makedirs(os.path.join(self.root, "raw"))
        shutil.copy(os.path.join(self.root, "index.html"), os.path.join(self.root, "raw", "p.html"))
        srv = self.start_config(make_config(self.root, site="compress = true", routes=routes))
        with RawClient(srv.port) as c:
            raw = c.request("GET", "/raw/p.html", {"Accept-Encoding": "gzip"})
            self.assertIsNone(raw.header("content-encoding"))
            self.assertIsNone(raw.header("vary"))
            self.assertEqual(c.request("GET", "/index.html", {"Accept-Encoding": "gzip"})
                             .header("content-encoding"), "gzip")
        plain = self.start_config(make_config(self.root), name="plain.toml")
        with RawClient(plain.port) as c:
            resp = c.request("GET", "/index.html", {"Accept-Encoding": "gzip"})
            self.assertIsNone(resp.header("content-encoding"))
            self.assertIsNone(resp.header("vary"))

    def test_quick_mode_flag(self):
        srv = self.start_quick(self.root, extra=["--compress"])
        self.check_all_codings(srv.port, "/index.html", self.page, "length")

    def test_return_route_bodies_are_compressed_in_one_go(self):
        body = wordpress_like_page(3000).decode()
        routes = (f'\n[[site.route]]\nexact = "/r"\nreturn = 200\ncontent_type = "text/html"\n'
                  f'body = {q(body)}\n' + STATIC_FALLBACK)
        srv = self.start_config(make_config(self.root, site="compress = true", routes=routes))
        self.check_all_codings(srv.port, "/r", body.encode(), "length")


class TestFastcgi(CompressionCase):
    def setUp(self):
        super().setUp()
        if not phpfpm.available():
            self.fail(f"{phpfpm.PHP_FPM_BIN} is missing: run scripts/install-deps.sh test")
        self.root = os.path.join(self.tmp, "www")
        shutil.copytree(PHP_DIR, self.root)
        self.page = wordpress_like_page()
        with open(os.path.join(self.root, "page.html"), "wb") as f:
            f.write(self.page)
        with open(os.path.join(self.root, "wp.php"), "w") as f:
            f.write("<?php readfile(__DIR__ . '/page.html');\n")
        with open(os.path.join(self.root, "sse.php"), "w") as f:
            f.write("""<?php
header('Content-Type: text/event-stream');
header('Cache-Control: no-cache');
header('X-Accel-Buffering: no');
while (ob_get_level() > 0) { ob_end_flush(); }
for ($i = 0; $i < 6; $i++) {
    echo "id: $i\\ndata: " . sprintf('%.6f', microtime(true)) . " " . str_repeat('x', 40) . "\\n\\n";
    flush();
    usleep(150000);
}
""")
        self.fpm = phpfpm.PhpFpm(os.path.join(self.tmp, "fpm"), children=4)
        self.addCleanup(self.fpm.stop)
        self.fpm.start()

    def start(self, compress="true"):
        routes = (f'\n[[site.route]]\nextension = "php"\nfastcgi = {q(self.fpm.address)}\n'
                  f'compress = {compress}\n' + STATIC_FALLBACK)
        return self.start_config(make_config(self.root, routes=routes))

    def expected_big(self, size):
        lines = []
        total = 0
        i = 0
        while total < size:
            line = b"%08d " % i + bytes([97 + i % 26]) * 54 + b"\n"
            lines.append(line)
            total += len(line)
            i += 1
        return b"".join(lines)[:size]

    def test_php_page_every_coding_buffered_and_streamed(self):
        srv = self.start('{ types = ["text/*", "application/octet-stream"] }')
        # readfile() of a 54 KB page fits fastcgi_buffer: one response with a Content-Length.
        self.check_all_codings(srv.port, "/wp.php", self.page, "length")
        # Larger than the buffer: streamed, compressed piece by piece, chunked.
        big = self.expected_big(700_000)
        self.check_all_codings(srv.port, "/big.php?size=700000", big, "chunked")

    def test_static_files_of_a_php_route_get_cached_variants(self):
        # WordPress's CSS and JS reach the PHP route's own static handler (try_files).
        routes = (f'\n[[site.route]]\nprefix = "/"\nfastcgi = {q(self.fpm.address)}\n'
                  f'try_files = ["$uri", "/index.php?$args"]\ncompress = true\n')
        srv = self.start_config(make_config(self.root, routes=routes))
        self.check_all_codings(srv.port, "/page.html", self.page, "length")
        with RawClient(srv.port) as c:
            resp = c.request("GET", "/page.html", {"Accept-Encoding": "gzip"})
        self.assertTrue(resp.header("etag").endswith('-gzip"'), resp.headers)

    def test_http10_client_gets_a_close_delimited_compressed_body(self):
        srv = self.start('{ types = ["application/octet-stream"] }')
        with RawClient(srv.port) as c:
            resp = c.request("GET", "/big.php?size=300000", {"Accept-Encoding": "gzip"},
                             version="HTTP/1.0")
        self.assertEqual(resp.header("content-encoding"), "gzip")
        self.assertEqual(decode("gzip", resp.body), self.expected_big(300_000))

    def test_server_sent_events_arrive_within_50_ms(self):
        srv = self.start()
        sock = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
        try:
            sock.sendall(b"GET /sse.php HTTP/1.1\r\nHost: localhost\r\nAccept-Encoding: gzip\r\n\r\n")
            buf = b""
            while b"\r\n\r\n" not in buf:
                buf += sock.recv(65536)
            head, _, rest = buf.partition(b"\r\n\r\n")
            self.assertIn(b"Content-Encoding: gzip", head)
            self.assertIn(b"Transfer-Encoding: chunked", head)
            inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
            pending = rest
            text = b""
            delays = []
            events = 0
            while events < 6:
                # De-chunk whatever has arrived, inflate it, and time each complete event.
                while True:
                    line_end = pending.find(b"\r\n")
                    if line_end < 0:
                        break
                    size = int(pending[:line_end], 16)
                    if len(pending) < line_end + 2 + size + 2:
                        break
                    text += inflater.decompress(pending[line_end + 2:line_end + 2 + size])
                    pending = pending[line_end + 2 + size + 2:]
                    if size == 0:
                        break
                while b"\n\n" in text:
                    event, _, text = text.partition(b"\n\n")
                    sent_at = float(event.split(b"data: ")[1].split(b" ")[0])
                    delays.append(time.time() - sent_at)
                    events += 1
                if events < 6:
                    data = sock.recv(65536)
                    self.assertTrue(data, "connection closed before all events")
                    pending += data
        finally:
            sock.close()
        self.assertEqual(len(delays), 6)
        self.assertLess(max(delays), 0.050, delays)

    def test_php_faster_than_the_compressor_does_not_hold_the_worker(self):
        # One worker; php-fpm writes 400 MB of hex text faster than gzip takes it in. The
        # FastCGI reader also stops at a read that comes back short, which through php-fpm's
        # unix socket kept it fair before the turns came (this passed on the binary before them;
        # the proxy's test did not): it guards both rules.
        with open(os.path.join(self.root, "flood.php"), "w") as f:
            f.write("<?php header('Content-Type: text/plain');\n"
                    "$s = bin2hex(random_bytes(500000));\n"
                    "for ($i = 0; $i < 400; $i++) echo $s;\n")
        srv = self.start()
        check_answered_beside_a_stream(self, srv.port, "/flood.php", "/hello.php",
                                            b"Hello, world!\n")
        self.stop_ok(srv)

    def test_small_php_output_and_unlisted_types_untouched(self):
        srv = self.start()
        with RawClient(srv.port) as c:
            hello = c.request("GET", "/hello.php", {"Accept-Encoding": "gzip"})
            self.assertIsNone(hello.header("content-encoding"))
            big = c.request("GET", "/big.php?size=100000", {"Accept-Encoding": "gzip"})
            self.assertIsNone(big.header("content-encoding"))  # application/octet-stream
            self.assertEqual(big.body, self.expected_big(100_000))


def slow_http1_body(port, path, coding):
    """The de-chunked body of a GET read 16 KB at a time through a 16 KB receive buffer."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)
    sock.settimeout(10)
    sock.connect(("127.0.0.1", port))
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: localhost\r\nAccept-Encoding: {coding}\r\n"
                 f"Connection: close\r\n\r\n".encode())
    data = b""
    with sock:
        while True:
            piece = sock.recv(16384)
            if not piece:
                break
            data += piece
            time.sleep(0.0005)
    head, _, rest = data.partition(b"\r\n\r\n")
    assert b"Content-Encoding: " + coding.encode() in head, head
    assert b"Transfer-Encoding: chunked" in head, head
    body, at = bytearray(), 0
    while True:
        line_end = rest.index(b"\r\n", at)
        size = int(rest[at:line_end], 16)
        if size == 0:
            return bytes(body)
        body += rest[line_end + 2:line_end + 2 + size]
        at = line_end + 2 + size + 2


class TextBackend:
    """An HTTP/1.1 back end in this process that answers every request with `text` (with a
    Content-Length), one thread per connection."""

    def __init__(self, text):
        self.text = text
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self.listener.getsockname()[1]}"
        self.close = serve_each_connection(self.listener, self.serve)

    def serve(self, conn):
        with conn:
            try:
                while True:
                    request = b""
                    while b"\r\n\r\n" not in request:
                        data = conn.recv(65536)
                        if not data:
                            return
                        request += data
                    self.answer(conn, request)
            except OSError:
                return

    def answer(self, conn, request):
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                     b"Content-Length: %d\r\n\r\n" % len(self.text) + self.text)


class EndlessBackend(TextBackend):
    """Answers GET /small with "small", and anything else with `text` over and over, without
    end, as fast as the socket takes it (a body delimited by the connection's close)."""

    def answer(self, conn, request):
        if request.startswith(b"GET /small "):
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                         b"Content-Length: 5\r\n\r\nsmall")
            return
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n")
        while True:
            conn.sendall(self.text)  # until the proxy closes: OSError


def random_text(seed, size):
    """Words of random letters: text that gzip shrinks about 2.5:1, slowly (tens of MB/s)."""
    rng = random.Random(seed)
    words = [bytes(rng.choice(b"etaoinshrdlucmfwyp") for _ in range(rng.randint(2, 9)))
             for _ in range(3000)]
    return b" ".join(rng.choices(words, k=size // 5))[:size]


class ProxiedCompressionCase(CompressionCase):
    """A proxy route with compression on, to test_proxy's back end (also
    test_compression_thousand_streams.py's)."""

    def setUp(self):
        super().setUp()
        self.backend = test_proxy.Backend(self.tmp, "A").start()
        self.addCleanup(self.backend.kill)
        self.root = self.make_root({"x.txt": "x"})

    def start(self, max_conns=64, workers=1, env=None, **group):
        top = test_proxy.upstream_toml("app", [{"address": self.backend.address,
                                                "max_conns": max_conns}], **group)
        routes = ('\n[[site.route]]\nprefix = "/"\nproxy = "http://app"\n'
                  'compress = { types = ["application/octet-stream", "application/json"] }\n')
        return self.start_config(make_config(self.root, top=top, routes=routes, workers=workers),
                                 env=env)


class TestProxy(ProxiedCompressionCase):
    def test_proxied_bodies_chunked_and_with_length(self):
        srv = self.start()
        pattern = test_proxy.PATTERN
        for size in (5000, 300_000):
            expected = (pattern * (size // len(pattern) + 1))[:size]
            for chunked in ("0", "1"):
                # A small body is buffered (respond: Content-Length) when it arrives with its
                # head, else streamed; a large one always streams (chunked).
                framing = "any" if size <= 64 * 1024 else "chunked"
                self.check_all_codings(srv.port, f"/download?bytes={size}&chunked={chunked}",
                                       expected, framing)

    def test_range_requests_pass_through_uncompressed(self):
        srv = self.start()
        with RawClient(srv.port) as c:
            resp = c.request("GET", "/download?bytes=5000", {"Accept-Encoding": "gzip",
                                                             "Range": "bytes=0-10"})
        self.assertIsNone(resp.header("content-encoding"))
        self.assertEqual(resp.header("vary"), "Accept-Encoding")

    def test_a_back_end_faster_than_the_compressor_does_not_hold_the_worker(self):
        # One worker, and a back end that sends text without end, faster than gzip takes it in.
        backend = EndlessBackend(random_text(11, 1_000_000))
        self.addCleanup(backend.close)
        top = test_proxy.upstream_toml("endless", [backend.address])
        routes = ('\n[[site.route]]\nprefix = "/"\nproxy = "http://endless"\n'
                  'compress = { types = ["text/plain"] }\n')
        srv = self.start_config(make_config(self.root, top=top, routes=routes, workers=1))
        check_answered_beside_a_stream(self, srv.port, "/endless", "/small", b"small")
        self.stop_ok(srv)

    def test_slow_readers_get_whole_streams_over_http2_and_http1(self):
        # 12 MB of text that compresses about 2.5:1, read slowly: over HTTP/2 by a client that
        # opens the stream's window a frame at a time, over HTTP/1.1 by a socket with a small
        # receive buffer. The client's queue backs up, so the decorator's input window pauses
        # the back end (CompressingDownstream::hold_if_queued) and the client's drain resumes
        # it, many times per stream. Every byte must still arrive, in order.
        text = random_text(7, 12_000_000)
        backend = TextBackend(text)
        self.addCleanup(backend.close)
        top = test_proxy.upstream_toml("text", [backend.address])
        routes = ('\n[[site.route]]\nprefix = "/"\nproxy = "http://text"\n'
                  'proxy_temp_file_max = "0"\ncompress = { types = ["text/plain"] }\n')
        srv = self.start_config(h2c(make_config(self.root, top=top, routes=routes)))
        # HTTP/2 first: the worker's first compressed stream is an HTTP/2 one, whose spare
        # stream (a thread_local) then outlives the encoder pool at exit. Destroying it freed
        # into the destroyed pool and block cache: "corrupted double-linked list" on SIGTERM.
        for coding in ("gzip", "zstd"):  # the codings python decodes
            c = test_http2.RawH2(srv.port, {SettingsFrame.INITIAL_WINDOW_SIZE: 16384},
                                 timeout=30)
            try:
                c.send(c.get(1, "/text", [("accept-encoding", coding)]))
                headers, body = {}, b""
                while True:
                    f = c.read_frame(timeout=10)
                    self.assertIsNotNone(f, f"HTTP/2 {coding}: stalled after {len(body)} bytes")
                    if isinstance(f, HeadersFrame):
                        headers.update(dict(f.decoded))
                    elif isinstance(f, DataFrame) and f.flow_controlled_length:
                        body += f.data
                        time.sleep(0.001)  # a slow reader: its window reopens a frame at a time
                        c.send(WindowUpdateFrame(0, window_increment=f.flow_controlled_length),
                               WindowUpdateFrame(1, window_increment=f.flow_controlled_length))
                    if "END_STREAM" in f.flags:
                        break
            finally:
                c.close()
            self.assertEqual(headers.get("content-encoding"), coding)
            self.assertTrue(decode(coding, body) == text, f"HTTP/2 {coding}")
            body = slow_http1_body(srv.port, "/text", coding)
            self.assertTrue(decode(coding, body) == text, f"HTTP/1.1 {coding}")


if __name__ == "__main__":
    main()
