"""Quick mode with a PHP site behind a real php-fpm: the connection cap of --fastcgi (found in
the running php-fpm's own configuration, or --fastcgi-conns) and the request body limit
(--max-body).

--fastcgi ADDR caps its connections at the pm.max_children of the php-fpm pool listening on
ADDR, so that connections can be kept between requests (a php-fpm child serves one connection
at a time) and further requests queue in the server instead of in php-fpm's backlog.

With --fastcgi the default limit is 64m, so a WordPress-sized media upload (2.2 MB, more than
the file's default max_body_bytes of 1m) reaches PHP, whose post_max_size and
upload_max_filesize then decide; --max-body 1m brings the limit back down and the same upload
gets 413 before php-fpm sees anything. The rest of quick mode with --fastcgi is in
test_fastcgi.py.
"""

import concurrent.futures
import json
import os
import socket
import subprocess

import phpfpm

from harness import PEREGRINE_BIN, main, sha256
from test_fastcgi import FastcgiTestCase, multipart

UPLOAD_BYTES = 2200 * 1024  # 2.2 MB: above 1m, and above php.ini's Debian-default 2M file limit


class QuickModeFastcgiPoolTest(FastcgiTestCase):

    def restart_fpm_on_tcp(self, children):
        """php-fpm on a TCP port, so that /proc/net/tcp shows every connection made to it (a
        closed one stays as TIME_WAIT).

        The port must appear nowhere in /proc/net/tcp yet: tests run in parallel, and a client
        of another test's server that listened on the same port a moment ago leaves TIME_WAIT
        lines whose remote port is it, which would be counted as connections to php-fpm."""
        self.fpm.stop()
        for _ in range(100):
            probe = socket.socket()
            probe.bind(("127.0.0.1", 0))
            self.fpm_port = probe.getsockname()[1]
            probe.close()
            if not self.connections_to_fpm():
                break
        else:
            self.fail("no free port that /proc/net/tcp does not mention")
        self.fpm = phpfpm.PhpFpm(os.path.join(self.tmp, "fpm2"), children=children,
                                 tcp_port=self.fpm_port)
        self.fpm.start()
        return self.fpm.address

    def connections_to_fpm(self):
        """The client ports of every connection to php-fpm's port, open or in TIME_WAIT, each
        with its sockets' lines of /proc/net/tcp (local, remote, state) for a failure to show."""
        ports = {}
        with open("/proc/net/tcp") as f:
            for line in f.readlines()[1:]:
                local, remote, state = line.split()[1:4]
                if state == "0A":  # php-fpm's listener
                    continue
                lport, rport = int(local.split(":")[1], 16), int(remote.split(":")[1], 16)
                if self.fpm_port in (lport, rport):
                    ports.setdefault(rport if lport == self.fpm_port else lport, []).append(
                        (local, remote, state))
        return ports

    def load(self, port, requests=60, clients=12):
        def one(_):
            return self.http(port, "GET", "/sleep.php?ms=20", timeout=20)[0]
        with concurrent.futures.ThreadPoolExecutor(clients) as pool:
            return list(pool.map(one, range(requests)))

    def test_the_cap_is_the_pools_max_children_and_connections_are_kept(self):
        address = self.restart_fpm_on_tcp(children=3)
        srv = self.start_quick(self.root, extra=["--fastcgi", address])
        self.assertIn(f"--fastcgi {address}: at most 3 connections, the pm.max_children of "
                      f"php-fpm pool [www] in {self.fpm.config_path}", srv.stderr())
        self.assertEqual(self.load(srv.port), [200] * 60)
        # 60 requests from 12 clients over at most 3 connections, kept between requests.
        used = self.connections_to_fpm()
        self.assertGreaterEqual(len(used), 1)
        self.assertLessEqual(len(used), 3, f"{used}\n{srv.stderr()[-2000:]}")

    def test_fastcgi_conns_sets_the_cap(self):
        address = self.restart_fpm_on_tcp(children=4)
        srv = self.start_quick(self.root, extra=["--fastcgi", address, "--fastcgi-conns", "2"])
        self.assertNotIn("at most", srv.stderr())
        self.assertEqual(self.load(srv.port, requests=30, clients=8), [200] * 30)
        used = self.connections_to_fpm()
        self.assertLessEqual(len(used), 2, f"{used}\n{srv.stderr()[-2000:]}")

    def test_without_a_php_fpm_to_ask_the_default_cap_is_used_and_said(self):
        missing = "unix:" + os.path.join(self.tmp, "none.sock")
        srv = self.start_quick(self.root, extra=["--fastcgi", missing])
        self.assertIn(f"--fastcgi {missing}: at most 5 connections (no running php-fpm pool "
                      "listens there", srv.stderr())
        self.assertEqual(self.http(srv.port, "GET", "/hello.php")[0], 502)


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
