"""Quick mode's request body limit (--max-body) with a PHP site behind a real php-fpm.

With --fastcgi the default limit is 64m, so a WordPress-sized media upload (2.2 MB, more than
the file's default max_body_bytes of 1m) reaches PHP, whose post_max_size and
upload_max_filesize then decide; --max-body 1m brings the limit back down and the same upload
gets 413 before php-fpm sees anything. The rest of quick mode with --fastcgi is in
test_fastcgi.py.
"""

import json
import os
import subprocess

from harness import PEREGRINE_BIN, main, sha256
from test_fastcgi import FastcgiTestCase, multipart

UPLOAD_BYTES = 2200 * 1024  # 2.2 MB: above 1m, and above php.ini's Debian-default 2M file limit


class QuickModeMaxBodyTest(FastcgiTestCase):

    def upload(self):
        data = os.urandom(UPLOAD_BYTES)
        body, ctype = multipart({"title": "holiday"}, {"photo": ("photo.jpg", data, "image/jpeg")})
        return data, body, ctype

    def test_fastcgi_default_accepts_a_wordpress_upload(self):
        srv = self.start_quick(self.root, extra=["--fastcgi", self.fpm.address])
        data, body, ctype = self.upload()
        status, _, resp = self.http(srv.port, "POST", "/upload.php", body=body,
                                    headers={"Content-Type": ctype}, timeout=30)
        self.assertEqual(status, 200, resp[:2000])
        reply = json.loads(resp)
        self.assertEqual(reply["post"], {"title": "holiday"})
        self.assertEqual(reply["content_length"], str(len(body)))
        photo = reply["files"]["photo"]
        self.assertEqual((photo["name"], photo["error"], photo["size"], photo["sha256"]),
                         ("photo.jpg", 0, len(data), sha256(data)))

    def test_max_body_1m_refuses_it_with_413(self):
        srv = self.start_quick(self.root, extra=["--fastcgi", self.fpm.address, "--max-body", "1m"])
        _, body, ctype = self.upload()
        with self.raw(srv.port, timeout=10) as c:
            c.send(b"POST /upload.php HTTP/1.1\r\nHost: localhost\r\nContent-Type: " + ctype.encode()
                   + b"\r\nContent-Length: %d\r\n\r\n" % len(body))
            r = c.read_final_response()
        self.assertEqual(r.status, 413, r)
        self.assertEqual(self.fpm_saw("/upload.php"), [])
        # A body under the limit still goes through on the same server.
        status, _, resp = self.http(srv.port, "POST", "/upload.php", body=b"a=1",
                                    headers={"Content-Type": "application/x-www-form-urlencoded"})
        self.assertEqual(status, 200, resp[:2000])
        self.assertEqual(json.loads(resp)["post"], {"a": "1"})

    def test_max_body_without_fastcgi_applies_to_static_sites(self):
        root = self.make_root({"index.html": "hi\n"}, name="static")
        srv = self.start_quick(root, extra=["--max-body", "1k"])
        status, _, _ = self.http(srv.port, "POST", "/index.html", body=b"x" * 2048)
        self.assertEqual(status, 413)

    def test_bad_max_body_is_a_command_line_error(self):
        r = subprocess.run([PEREGRINE_BIN, "-t", "--root", self.root, "--fastcgi", self.fpm.address,
                            "--max-body", "lots"], capture_output=True, text=True, timeout=20)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("--max-body: invalid size \"lots\"", r.stderr)


if __name__ == "__main__":
    main()
