"""Static files: index files and directory redirects, MIME types, validators (ETag, Last-Modified,
304), byte ranges (single, multiple, unsatisfiable, If-Range), large files, change detection,
precompressed siblings, directory listings, custom error pages, route root/alias."""

import calendar
import gzip
import hashlib
import os
import subprocess
import threading
import time
import urllib.parse
import urllib.request

from harness import STATIC_FALLBACK, ServerTestCase, main, make_config, q, sha256

FIXED_MTIME = calendar.timegm((2020, 1, 1, 0, 0, 0))
FIXED_HTTP_DATE = "Wed, 01 Jan 2020 00:00:00 GMT"

CSS = b"body { color: #333; background: white; }\n" * 50
TEXT36 = b"0123456789abcdefghijklmnopqrstuvwxyz"
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\rIHDR" + bytes(range(200))

def brotli_stored(data):
    """A valid brotli stream holding `data` in one uncompressed meta-block (RFC 7932 9.2)."""
    assert 0 < len(data) <= 65536
    header = 0 | (0 << 1) | (0 << 2) | ((len(data) - 1) << 4) | (1 << 20)  # WBITS=16, 4 nibbles
    return header.to_bytes(3, "little") + data + b"\x03"  # + last, empty meta-block


FILES = {
    "index.html": b"<!doctype html><title>home</title>\n",
    "hello.txt": b"hello\n",
    "range.txt": TEXT36,
    "style.css": CSS,
    "style.css.gz": gzip.compress(CSS),
    "style.css.br": brotli_stored(CSS),
    "plain.css": CSS,
    "app.js": b"console.log('hi');\n",
    "img.png": PNG,
    "data.xyz": b"\x00\x01unknown",
    "noext": b"no extension",
    "empty.txt": b"",
    "dir/index.html": b"<p>dir index</p>\n",
    "dir/a.txt": b"dir a\n",
    "nodir/a.txt": b"nodir a\n",
    "my file.txt": b"space\n",
    "caf\u00e9.txt": b"cafe\n",
    "404.html": b"<h1>custom not found</h1>\n",
    "list/plain.txt": b"p\n",
    "list/<b>&x.txt": b"escaped\n",
    "list/sub/inner.txt": b"i\n",
}


def norm_ct(value):
    return ";".join(p.strip() for p in (value or "").lower().split(";"))


def parse_multipart(body, content_type):
    params = dict(p.strip().split("=", 1) for p in content_type.split(";")[1:] if "=" in p)
    boundary = params["boundary"].strip('"').encode()
    segments = body.split(b"--" + boundary)
    parts = []
    closed = False
    for seg in segments[1:]:
        if seg.startswith(b"--"):
            closed = True
            break
        assert seg.startswith(b"\r\n"), f"part does not start with CRLF: {seg[:40]!r}"
        head, sep, data = seg[2:].partition(b"\r\n\r\n")
        assert sep, f"part without header/body separator: {seg[:80]!r}"
        assert data.endswith(b"\r\n"), f"part data not followed by CRLF: {data[-20:]!r}"
        headers = {}
        for line in head.split(b"\r\n"):
            k, _, v = line.decode("latin-1").partition(":")
            headers[k.strip().lower()] = v.strip()
        parts.append((headers, data[:-2]))
    assert closed, "multipart body has no closing delimiter"
    return parts


class StaticTest(ServerTestCase):
    site = ""
    top = ""

    def setUp(self):
        super().setUp()
        self.root = self.make_root(FILES)
        for dirpath, dirnames, filenames in os.walk(self.root):
            for n in filenames:
                os.utime(os.path.join(dirpath, n), (FIXED_MTIME, FIXED_MTIME))
        self.srv = self.start_config(make_config(self.root, site=self.site, top=self.top))
        self.port = self.srv.port


class IndexAndTypesTest(StaticTest):
    def test_root_index(self):
        status, headers, body = self.get(self.port, "/")
        self.assertEqual(status, 200)
        self.assertEqual(body, FILES["index.html"])
        self.assertEqual(norm_ct(headers["Content-Type"]), "text/html;charset=utf-8")

    def test_directory_index(self):
        status, _, body = self.get(self.port, "/dir/")
        self.assertEqual((status, body), (200, FILES["dir/index.html"]))

    def test_directory_without_slash_redirects(self):
        for path, target in (("/dir", "/dir/"), ("/nodir", "/nodir/"), ("/list/sub", "/list/sub/")):
            status, headers, _ = self.get(self.port, path)
            self.assertEqual(status, 301, f"GET {path}")
            loc = headers.get("Location")
            self.assertIsNotNone(loc, f"GET {path}: 301 without Location")
            self.assertEqual(urllib.parse.urlsplit(loc).path, target, f"GET {path}: Location {loc!r}")

    def test_file_with_trailing_slash_is_404(self):
        status, _, _ = self.get(self.port, "/hello.txt/")
        self.assertEqual(status, 404)

    def test_missing_file_404(self):
        status, _, _ = self.get(self.port, "/does-not-exist.txt")
        self.assertEqual(status, 404)
        status, _, _ = self.get(self.port, "/nodir/missing/deeper.txt")
        self.assertEqual(status, 404)

    def test_mime_types(self):
        cases = {
            "/index.html": lambda ct: ct == "text/html;charset=utf-8",
            "/style.css": lambda ct: ct.startswith("text/css"),
            "/app.js": lambda ct: ct.split(";")[0] in ("text/javascript", "application/javascript"),
            "/img.png": lambda ct: ct == "image/png",
            "/hello.txt": lambda ct: ct.startswith("text/plain"),
            "/data.xyz": lambda ct: ct == "application/octet-stream",
            "/noext": lambda ct: ct == "application/octet-stream",
        }
        for path, ok in cases.items():
            status, headers, body = self.get(self.port, path)
            self.assertEqual(status, 200, path)
            ct = norm_ct(headers.get("Content-Type"))
            self.assertTrue(ok(ct), f"GET {path}: Content-Type {headers.get('Content-Type')!r}")

    def test_exact_bytes_and_length(self):
        for rel in ("hello.txt", "img.png", "style.css", "data.xyz"):
            status, headers, body = self.get(self.port, "/" + rel)
            self.assertEqual(body, FILES[rel], rel)
            self.assertEqual(headers["Content-Length"], str(len(FILES[rel])), rel)

    def test_empty_file(self):
        status, headers, body = self.get(self.port, "/empty.txt")
        self.assertEqual((status, body, headers["Content-Length"]), (200, b"", "0"))

    def test_percent_encoded_names(self):
        self.assertEqual(self.get(self.port, "/my%20file.txt")[:3:2], (200, b"space\n"))
        self.assertEqual(self.get(self.port, "/caf%C3%A9.txt")[:3:2], (200, b"cafe\n"))
        self.assertEqual(self.get(self.port, "/%68ello.txt")[:3:2], (200, b"hello\n"))

    def test_head_on_file(self):
        c = self.raw(self.port)
        r = c.request("HEAD", "/style.css")
        self.assertEqual(r.status, 200)
        self.assertEqual(r.header("content-length"), str(len(CSS)))
        self.assertEqual(c.request("GET", "/hello.txt").body, b"hello\n")


class ValidatorsTest(StaticTest):
    def test_etag_and_last_modified(self):
        status, headers, _ = self.get(self.port, "/hello.txt")
        etag = headers.get("ETag")
        self.assertIsNotNone(etag, "no ETag")
        self.assertRegex(etag, r'^(W/)?"[^"]+"$')
        self.assertEqual(headers.get("Last-Modified"), FIXED_HTTP_DATE)
        # Stable across requests; different files get different tags.
        self.assertEqual(self.get(self.port, "/hello.txt")[1]["ETag"], etag)
        self.assertNotEqual(self.get(self.port, "/range.txt")[1]["ETag"], etag)

    def test_if_none_match(self):
        etag = self.get(self.port, "/hello.txt")[1]["ETag"]
        c = self.raw(self.port)
        r = c.request("GET", "/hello.txt", {"If-None-Match": etag})
        self.assertEqual(r.status, 304, r)
        self.assertEqual(r.header("etag"), etag)
        # No body after a 304: the next response parses right away.
        self.assertEqual(c.request("GET", "/hello.txt").body, b"hello\n")
        self.assertEqual(self.get(self.port, "/hello.txt", {"If-None-Match": '"other"'})[0], 200)
        self.assertEqual(self.get(self.port, "/hello.txt", {"If-None-Match": f'"x", {etag}, "y"'})[0], 304)
        self.assertEqual(self.get(self.port, "/hello.txt", {"If-None-Match": "*"})[0], 304)
        weak = etag if etag.startswith("W/") else "W/" + etag
        self.assertEqual(self.get(self.port, "/hello.txt", {"If-None-Match": weak})[0], 304,
                         "If-None-Match uses the weak comparison (RFC 9110 13.1.2)")

    def test_if_modified_since(self):
        self.assertEqual(self.get(self.port, "/hello.txt", {"If-Modified-Since": FIXED_HTTP_DATE})[0], 304)
        self.assertEqual(self.get(self.port, "/hello.txt",
                                  {"If-Modified-Since": "Thu, 02 Jan 2020 00:00:00 GMT"})[0], 304)
        status, _, body = self.get(self.port, "/hello.txt", {"If-Modified-Since": "Tue, 31 Dec 2019 23:59:59 GMT"})
        self.assertEqual((status, body), (200, b"hello\n"))
        # An unparseable date is ignored.
        self.assertEqual(self.get(self.port, "/hello.txt", {"If-Modified-Since": "yesterday"})[0], 200)

    def test_if_none_match_wins_over_if_modified_since(self):
        status, _, _ = self.get(self.port, "/hello.txt",
                                {"If-None-Match": '"different"', "If-Modified-Since": FIXED_HTTP_DATE})
        self.assertEqual(status, 200, "If-None-Match present: If-Modified-Since must be ignored")


class RangeTest(StaticTest):
    def test_single_ranges(self):
        size = len(TEXT36)
        cases = [("bytes=0-9", 0, 9), ("bytes=10-", 10, size - 1), ("bytes=-5", size - 5, size - 1),
                 ("bytes=30-9999", 30, size - 1), ("bytes=35-35", 35, 35)]
        for spec, first, last in cases:
            status, headers, body = self.get(self.port, "/range.txt", {"Range": spec})
            self.assertEqual(status, 206, spec)
            self.assertEqual(body, TEXT36[first:last + 1], spec)
            self.assertEqual(headers["Content-Range"], f"bytes {first}-{last}/{size}", spec)
            self.assertEqual(headers["Content-Length"], str(last - first + 1), spec)

    def test_multiple_ranges(self):
        status, headers, body = self.get(self.port, "/range.txt", {"Range": "bytes=0-4,10-14,-3"})
        self.assertEqual(status, 206)
        ct = headers["Content-Type"]
        self.assertTrue(ct.lower().startswith("multipart/byteranges"), ct)
        self.assertIn("boundary=", ct)
        self.assertEqual(headers["Content-Length"], str(len(body)))
        parts = parse_multipart(body, ct)
        self.assertEqual([p[1] for p in parts], [TEXT36[0:5], TEXT36[10:15], TEXT36[33:36]])
        self.assertEqual([p[0].get("content-range") for p in parts],
                         ["bytes 0-4/36", "bytes 10-14/36", "bytes 33-35/36"])
        for h, _ in parts:
            self.assertTrue(h.get("content-type", "").startswith("text/plain"), h)

    def test_unsatisfiable(self):
        for spec in ("bytes=36-", "bytes=1000-2000"):
            status, headers, _ = self.get(self.port, "/range.txt", {"Range": spec})
            self.assertEqual(status, 416, spec)
            self.assertEqual(headers.get("Content-Range"), "bytes */36", spec)

    def test_if_range(self):
        status, headers, _ = self.get(self.port, "/range.txt")
        etag, lm = headers["ETag"], headers["Last-Modified"]
        status, headers, body = self.get(self.port, "/range.txt", {"Range": "bytes=0-3", "If-Range": etag})
        self.assertEqual((status, body), (206, b"0123"), "If-Range with the current ETag")
        status, headers, body = self.get(self.port, "/range.txt", {"Range": "bytes=0-3", "If-Range": '"stale"'})
        self.assertEqual((status, body), (200, TEXT36), "If-Range with a stale ETag: full 200")
        status, headers, body = self.get(self.port, "/range.txt", {"Range": "bytes=0-3", "If-Range": lm})
        self.assertEqual((status, body), (206, b"0123"), "If-Range with the Last-Modified date")
        status, headers, body = self.get(self.port, "/range.txt",
                                         {"Range": "bytes=0-3", "If-Range": "Tue, 31 Dec 2019 00:00:00 GMT"})
        self.assertEqual((status, body), (200, TEXT36), "If-Range with an old date: full 200")

    def test_range_with_curl(self):
        out = subprocess.run(["curl", "-s", "-r", "5-9", f"http://127.0.0.1:{self.port}/range.txt",
                              "-w", "\n%{http_code}"], capture_output=True, timeout=20)
        body, _, code = out.stdout.rpartition(b"\n")
        self.assertEqual((code, body), (b"206", TEXT36[5:10]))


class RangeEdgeTest(StaticTest):
    def test_edge_ranges(self):
        size = len(TEXT36)
        status, headers, body = self.get(self.port, "/range.txt", {"Range": "bytes=0-0"})
        self.assertEqual((status, body, headers.get("Content-Range")), (206, b"0", f"bytes 0-0/{size}"))
        status, headers, body = self.get(self.port, "/range.txt", {"Range": "bytes=-100"})
        self.assertEqual((status, body, headers.get("Content-Range")), (206, TEXT36, f"bytes 0-35/{size}"),
                         "a suffix longer than the file selects the whole file")
        status, headers, _ = self.get(self.port, "/range.txt", {"Range": "bytes=-0"})
        self.assertEqual((status, headers.get("Content-Range")), (416, f"bytes */{size}"), "bytes=-0")

    def test_invalid_range_ignored(self):
        for spec in ("bytes=5-2", "bytes=abc", "items=0-5", "bytes=0-5,"):
            status, headers, body = self.get(self.port, "/range.txt", {"Range": spec})
            if spec == "bytes=0-5,":
                # A trailing empty list element is allowed by the grammar (RFC 9110 5.6.1).
                self.assertIn(status, (200, 206), spec)
                continue
            self.assertEqual((status, body), (200, TEXT36), f"an invalid Range ({spec}) is ignored")

    def test_range_on_empty_file(self):
        status, headers, _ = self.get(self.port, "/empty.txt", {"Range": "bytes=0-10"})
        self.assertEqual(status, 416)
        self.assertEqual(headers.get("Content-Range"), "bytes */0")

    def test_head_with_range(self):
        c = self.raw(self.port)
        r = c.request("HEAD", "/range.txt", {"Range": "bytes=0-9"})
        # RFC 9110 14.2 defines range handling for GET only, so a HEAD may ignore Range (200 with
        # the full length) or mirror the GET (206); either way, no body.
        self.assertIn((r.status, r.header("content-length"), r.body), ((200, "36", b""), (206, "10", b"")))
        self.assertEqual(c.request("GET", "/hello.txt").body, b"hello\n", "bytes after a HEAD 206")

    def test_if_none_match_with_range(self):
        etag = self.get(self.port, "/range.txt")[1]["ETag"]
        status, _, body = self.get(self.port, "/range.txt", {"Range": "bytes=0-3", "If-None-Match": etag})
        self.assertEqual((status, body), (304, b""))

    def test_keepalive_after_error_statuses(self):
        c = self.raw(self.port)
        etag = c.request("GET", "/hello.txt").header("etag")
        for headers, path, status in (({}, "/nope", 404), ({"If-None-Match": etag}, "/hello.txt", 304),
                                      ({"Range": "bytes=900-"}, "/range.txt", 416), ({}, "/nodir/", 403),
                                      ({}, "/dir", 301)):
            r = c.request("GET", path, headers)
            self.assertEqual(r.status, status, path)
            self.assertNotIn("close", r.connection_tokens(), f"GET {path} ({status}) closed the connection")
        self.assertEqual(c.request("GET", "/hello.txt").body, b"hello\n")

    def test_date_header_advances(self):
        d1 = self.get(self.port, "/hello.txt")[1]["Date"]
        time.sleep(1.1)
        d2 = self.get(self.port, "/hello.txt")[1]["Date"]
        self.assertNotEqual(d1, d2, "the cached Date header did not advance")


class SiteStaticOptionsTest(ServerTestCase):
    def test_etag_off_and_index_list(self):
        root = self.make_root({"home.htm": b"home\n", "index.html": b"index\n", "sub/index.html": b"sub\n"})
        srv = self.start_config(make_config(root, site='etag = false\nindex = ["home.htm", "index.html"]'))
        status, headers, body = self.get(srv.port, "/")
        self.assertEqual((status, body), (200, b"home\n"), "first index name that exists wins")
        self.assertIsNone(headers.get("ETag"), "etag = false still sends an ETag")
        self.assertIsNotNone(headers.get("Last-Modified"))
        self.assertEqual(self.get(srv.port, "/sub/")[::2], (200, b"sub\n"))

    def test_server_header(self):
        root = self.make_root({"hello.txt": b"hello\n"})
        srv = self.start_config(make_config(root, top='server_header = "edge/1.0"'))
        self.assertEqual(self.get(srv.port, "/hello.txt")[1]["Server"], "edge/1.0")
        srv2 = self.start_config(make_config(root, top='server_header = ""'), name="none.toml")
        self.assertIsNone(self.get(srv2.port, "/hello.txt")[1]["Server"])


class LargeFileTest(ServerTestCase):
    def setUp(self):
        super().setUp()
        self.data = os.urandom(5 * 1024 * 1024 + 123)
        self.root = self.make_root({"big.bin": self.data})
        self.srv = self.start_config(make_config(self.root, workers=2))

    def test_large_file_http_client(self):
        status, headers, body = self.get(self.srv.port, "/big.bin")
        self.assertEqual(status, 200)
        self.assertEqual(headers["Content-Length"], str(len(self.data)))
        self.assertEqual(sha256(body), sha256(self.data))

    def test_large_file_curl_and_range(self):
        out = os.path.join(self.tmp, "dl.bin")
        r = subprocess.run(["curl", "-sS", "-o", out, "-w", "%{http_code}",
                            f"http://127.0.0.1:{self.srv.port}/big.bin"], capture_output=True, timeout=60)
        self.assertEqual(r.stdout, b"200", r.stderr)
        with open(out, "rb") as f:
            self.assertEqual(sha256(f.read()), sha256(self.data))
        status, headers, body = self.get(self.srv.port, "/big.bin", {"Range": "bytes=3000000-3000999"})
        self.assertEqual(status, 206)
        self.assertEqual(body, self.data[3000000:3001000])

    def test_parallel_large_downloads(self):
        results = {}

        def fetch(i):
            with urllib.request.urlopen(f"http://127.0.0.1:{self.srv.port}/big.bin", timeout=30) as resp:
                results[i] = hashlib.sha256(resp.read()).hexdigest()

        threads = [threading.Thread(target=fetch, args=(i,)) for i in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        self.assertEqual(results, {i: sha256(self.data) for i in range(6)})

    def test_head_large_file(self):
        c = self.raw(self.srv.port)
        r = c.request("HEAD", "/big.bin")
        self.assertEqual((r.status, r.header("content-length")), (200, str(len(self.data))))
        self.assertFalse(c.wait_closed(0.3))
        self.assertEqual(c.buf, b"", "HEAD response followed by body bytes")


class ChangeDetectionTest(ServerTestCase):
    def test_changed_file_noticed(self):
        root = self.make_root({"change.txt": b"version one\n"})
        path = os.path.join(root, "change.txt")
        os.utime(path, (FIXED_MTIME, FIXED_MTIME))
        srv = self.start_config(make_config(root))
        status, headers, body = self.get(srv.port, "/change.txt")
        self.assertEqual(body, b"version one\n")
        etag1 = headers["ETag"]
        with open(path, "wb") as f:
            f.write(b"version two, a longer one\n")
        time.sleep(1.2)
        status, headers, body = self.get(srv.port, "/change.txt")
        self.assertEqual((status, body), (200, b"version two, a longer one\n"))
        self.assertEqual(headers["Content-Length"], str(len(body)))
        self.assertNotEqual(headers["ETag"], etag1)
        # Same size, new content.
        etag2 = headers["ETag"]
        with open(path, "wb") as f:
            f.write(b"VERSION TWO, A LONGER ONE\n")
        os.utime(path, (FIXED_MTIME + 3600, FIXED_MTIME + 3600))
        time.sleep(1.2)
        status, headers, body = self.get(srv.port, "/change.txt")
        self.assertEqual(body, b"VERSION TWO, A LONGER ONE\n")
        self.assertNotEqual(headers["ETag"], etag2)
        # The old ETag no longer yields 304.
        self.assertEqual(self.get(srv.port, "/change.txt", {"If-None-Match": etag1})[0], 200)

    def test_deleted_and_created_files(self):
        root = self.make_root({"gone.txt": b"here\n"})
        srv = self.start_config(make_config(root))
        self.assertEqual(self.get(srv.port, "/gone.txt")[0], 200)
        self.assertEqual(self.get(srv.port, "/new.txt")[0], 404)
        os.unlink(os.path.join(root, "gone.txt"))
        with open(os.path.join(root, "new.txt"), "wb") as f:
            f.write(b"new\n")
        time.sleep(1.2)
        self.assertEqual(self.get(srv.port, "/gone.txt")[0], 404)
        self.assertEqual(self.get(srv.port, "/new.txt")[::2], (200, b"new\n"))


class PrecompressedTest(StaticTest):
    def test_gzip_sibling(self):
        status, headers, body = self.get(self.port, "/style.css", {"Accept-Encoding": "gzip"})
        self.assertEqual(status, 200)
        self.assertEqual(headers.get("Content-Encoding"), "gzip")
        self.assertEqual(gzip.decompress(body), CSS)
        self.assertEqual(body, FILES["style.css.gz"])
        self.assertTrue(headers["Content-Type"].lower().startswith("text/css"), headers["Content-Type"])
        self.assertIn("accept-encoding", headers.get("Vary", "").lower())

    def test_brotli_sibling(self):
        status, headers, body = self.get(self.port, "/style.css", {"Accept-Encoding": "br"})
        self.assertEqual(status, 200)
        self.assertEqual(headers.get("Content-Encoding"), "br")
        self.assertEqual(body, FILES["style.css.br"])
        self.assertIn("accept-encoding", headers.get("Vary", "").lower())

    def test_both_accepted(self):
        status, headers, body = self.get(self.port, "/style.css", {"Accept-Encoding": "gzip, deflate, br"})
        enc = headers.get("Content-Encoding")
        self.assertIn(enc, ("gzip", "br"))
        self.assertEqual(body, FILES["style.css." + ("gz" if enc == "gzip" else "br")])

    def test_identity(self):
        for ae in (None, "identity", "deflate", "gzip;q=0, br;q=0"):
            headers_in = {"Accept-Encoding": ae} if ae else {}
            status, headers, body = self.get(self.port, "/style.css", headers_in)
            self.assertEqual((status, body), (200, CSS), f"Accept-Encoding {ae!r}")
            self.assertIsNone(headers.get("Content-Encoding"), f"Accept-Encoding {ae!r}")
            self.assertIn("accept-encoding", headers.get("Vary", "").lower(),
                          f"Accept-Encoding {ae!r}: Vary must be sent when a compressed sibling exists")

    def test_no_sibling(self):
        status, headers, body = self.get(self.port, "/plain.css", {"Accept-Encoding": "gzip, br"})
        self.assertEqual((status, body), (200, CSS))
        self.assertIsNone(headers.get("Content-Encoding"))

    def test_curl_compressed(self):
        for ae in ("gzip", "br"):
            r = subprocess.run(["curl", "-s", "--compressed", "-H", f"Accept-Encoding: {ae}", "-D", "-",
                                f"http://127.0.0.1:{self.port}/style.css"], capture_output=True, timeout=20)
            head, _, body = r.stdout.partition(b"\r\n\r\n")
            self.assertIn(f"content-encoding: {ae}".encode(), head.lower(), head)
            self.assertEqual(body, CSS, f"curl --compressed with Accept-Encoding: {ae}")


class PrecompressedOffTest(StaticTest):
    site = "precompressed = false"

    def test_off(self):
        status, headers, body = self.get(self.port, "/style.css", {"Accept-Encoding": "gzip, br"})
        self.assertEqual((status, body), (200, CSS))
        self.assertIsNone(headers.get("Content-Encoding"))


class DirectoryListingOffTest(StaticTest):
    def test_listing_off_by_default(self):
        status, _, body = self.get(self.port, "/nodir/")
        self.assertEqual(status, 403)
        self.assertNotIn(b"a.txt", body)


class DirectoryListingOnTest(StaticTest):
    site = "directory_listing = true"

    def test_listing(self):
        status, headers, body = self.get(self.port, "/list/")
        self.assertEqual(status, 200)
        self.assertTrue(headers["Content-Type"].lower().startswith("text/html"), headers["Content-Type"])
        text = body.decode("utf-8")
        self.assertIn("plain.txt", text)
        self.assertIn("sub", text)
        self.assertIn("&lt;b&gt;&amp;x.txt", text, "file names must be HTML-escaped")
        self.assertNotIn("<b>&x.txt", text, "raw file name with markup in the listing")

    def test_index_still_wins(self):
        status, _, body = self.get(self.port, "/dir/")
        self.assertEqual((status, body), (200, FILES["dir/index.html"]))


class ErrorPagesTest(StaticTest):
    site = 'error_pages = { "404" = "/404.html" }'

    def test_custom_404(self):
        status, headers, body = self.get(self.port, "/missing/page")
        self.assertEqual(status, 404)
        self.assertEqual(body, FILES["404.html"])
        self.assertTrue(headers["Content-Type"].lower().startswith("text/html"))
        # Existing files are untouched.
        self.assertEqual(self.get(self.port, "/hello.txt")[::2], (200, b"hello\n"))


class MimeOverrideTest(StaticTest):
    top = '[mime_types]\nxyz = "application/x-peregrine-test"\ncss = "text/x-custom-css"'

    def test_override(self):
        self.assertEqual(self.get(self.port, "/data.xyz")[1]["Content-Type"], "application/x-peregrine-test")
        self.assertEqual(self.get(self.port, "/plain.css")[1]["Content-Type"], "text/x-custom-css")
        self.assertTrue(self.get(self.port, "/hello.txt")[1]["Content-Type"].startswith("text/plain"))


class RouteRootAliasTest(ServerTestCase):
    def test_alias_and_root_routes(self):
        root = self.make_root({"hello.txt": b"main\n"})
        other = self.make_root({"a.txt": b"other a\n", "assets/b.txt": b"other assets b\n",
                                "home.html": b"home\n", "docs/x.txt": b"x\n"}, name="other")
        routes = f"""
[[site.route]]
prefix = "/static/"
alias = {q(other)}

[[site.route]]
prefix = "/assets/"
root = {q(other)}

[[site.route]]
prefix = "/docs/"
root = {q(other)}
directory_listing = true
index = ["home.html"]
""" + STATIC_FALLBACK
        srv = self.start_config(make_config(root, routes=routes))
        self.assertEqual(self.get(srv.port, "/static/a.txt")[::2], (200, b"other a\n"))
        self.assertEqual(self.get(srv.port, "/assets/b.txt")[::2], (200, b"other assets b\n"))
        self.assertEqual(self.get(srv.port, "/static/assets/b.txt")[::2], (200, b"other assets b\n"))
        self.assertEqual(self.get(srv.port, "/hello.txt")[::2], (200, b"main\n"))
        self.assertEqual(self.get(srv.port, "/a.txt")[0], 404)
        status, _, body = self.get(srv.port, "/docs/")
        self.assertEqual(status, 200)
        self.assertIn(b"x.txt", body)


if __name__ == "__main__":
    main()
