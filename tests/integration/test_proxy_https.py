"""https back ends for the proxy (issue 13, item 4), against real TLS servers.

Back ends: nginx with `ssl` on an ephemeral port and a certificate from a test CA made here with
the openssl CLI (its access log shows the connection, the request number on it and whether the
TLS session was resumed), and tests/integration/backends/http_backend.py with --tls-cert for the
cases nginx cannot script (echoing a POST body, closing pooled connections).
"""

import hashlib
import os
import re
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (HERE, ServerTestCase, main, make_config, q, require_tool,  # noqa: E402
                     RawClient)
from nginx_peer import NginxPeer  # noqa: E402

BACKEND = os.path.join(HERE, "backends", "http_backend.py")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)


def make_ca(directory, name):
    """A CA (NAME-ca.pem, NAME-ca.key) and a server certificate it signed for localhost and
    127.0.0.1 (NAME-server.pem, NAME-server.key)."""
    os.makedirs(directory, exist_ok=True)
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
    openssl("req", "-x509", *ec, "-keyout", f"{name}-ca.key", "-out", f"{name}-ca.pem", "-days",
            "2", "-subj", f"/CN=Peregrine test CA {name}", cwd=directory)
    openssl("req", *ec, "-keyout", f"{name}-server.key", "-out", f"{name}-server.csr", "-subj",
            "/CN=localhost", cwd=directory)
    with open(os.path.join(directory, f"{name}-ext.cnf"), "w") as f:
        f.write("subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\n")
    openssl("x509", "-req", "-in", f"{name}-server.csr", "-CA", f"{name}-ca.pem", "-CAkey",
            f"{name}-ca.key", "-CAcreateserial", "-out", f"{name}-server.pem", "-days", "2",
            "-extfile", f"{name}-ext.cnf", cwd=directory)
    return {"ca": os.path.join(directory, f"{name}-ca.pem"),
            "server": os.path.join(directory, f"{name}-server.pem"),
            "key": os.path.join(directory, f"{name}-server.key")}


class Nginx(NginxPeer):
    """nginx serving `docroot` over TLS on 127.0.0.1:PORT; its access log says which connection
    served each request, its number there and whether the TLS session was resumed."""

    def __init__(self, test, docroot, cert, key, extra=""):
        self.port = free_port()
        super().__init__(os.path.join(test.tmp, f"nginx-{self.port}"), f"""
  ssl_session_cache shared:s:1m;
  server {{
    listen 127.0.0.1:{self.port} ssl;
    ssl_certificate {cert};
    ssl_certificate_key {key};
    root {docroot};
  }}""", [self.port], http_extra=extra)
        test.addCleanup(self.stop)


class TlsBackend:
    """http_backend.py speaking TLS."""

    def __init__(self, test, certs, extra=()):
        self.log = open(os.path.join(test.tmp, "tls-backend.log"), "ab")
        self.proc = subprocess.Popen(
            [sys.executable, BACKEND, "--id", "T", "--tls-cert", certs["server"], "--tls-key",
             certs["key"], *extra], stdout=subprocess.PIPE, stderr=self.log,
            stdin=subprocess.DEVNULL)
        test.addCleanup(self.stop)
        line = self.proc.stdout.readline().decode()
        m = re.match(r"listening on 127\.0\.0\.1:(\d+)", line)
        if not m:
            raise RuntimeError(f"TLS back end did not start: {line!r}")
        self.port = int(m.group(1))

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc.stdout.close()
        self.log.close()


class HttpsProxyTestCase(ServerTestCase):
    def setUp(self):
        super().setUp()
        require_tool("openssl", "openssl")
        self.certs = make_ca(os.path.join(self.tmp, "pki"), "good")
        self.docroot = self.make_root({
            "page.html": "x" * 663,
            "big.bin": bytes(range(256)) * (5 * 4096),  # 5 MiB
        }, name="backend-root")

    def nginx(self, extra=""):
        return Nginx(self, self.docroot, self.certs["server"], self.certs["key"], extra)

    def proxy(self, url, route_keys="", top="", workers=1):
        routes = f'[[site.route]]\nprefix = "/"\nproxy = {q(url)}\n{route_keys}\n'
        root = self.make_root(name="www")
        return self.start_config(make_config(root, routes=routes, top=top, workers=workers))

    def ca_key(self, certs=None):
        return f"tls_ca = {q((certs or self.certs)['ca'])}"


class TestHttpsProxy(HttpsProxyTestCase):
    def test_get_through_https_verified_by_ip(self):
        ng = self.nginx()
        srv = self.proxy(f"https://127.0.0.1:{ng.port}", self.ca_key())
        status, _, body = self.get(srv.port, "/page.html")
        self.assertEqual((status, body), (200, b"x" * 663), srv.stderr()[-2000:])

    def test_get_through_https_verified_by_name(self):
        ng = self.nginx()
        srv = self.proxy(f"https://localhost:{ng.port}", self.ca_key())
        status, _, body = self.get(srv.port, "/page.html")
        self.assertEqual((status, len(body)), (200, 663), srv.stderr()[-2000:])

    def test_post_with_body_through_https(self):
        backend = TlsBackend(self, self.certs)
        srv = self.proxy(f"https://127.0.0.1:{backend.port}", self.ca_key())
        body = os.urandom(300_000)
        status, _, answer = self.http(srv.port, "POST", "/upload", body=body,
                                      headers={"Content-Type": "application/octet-stream"})
        self.assertEqual(status, 200, srv.stderr()[-2000:])
        self.assertIn(hashlib.sha256(body).hexdigest().encode(), answer)
        self.assertIn(b'"length": 300000', answer.replace(b'"length":300000', b'"length": 300000'))

    def test_wrong_ca_is_a_502_with_the_reason_logged(self):
        other = make_ca(os.path.join(self.tmp, "pki"), "other")
        ng = self.nginx()
        srv = self.proxy(f"https://127.0.0.1:{ng.port}", self.ca_key(other))
        status, _, _ = self.get(srv.port, "/page.html")
        self.assertEqual(status, 502)
        self.wait_for(lambda: "TLS handshake failed" in srv.stderr(), 3, msg="the failure log")
        line = [l for l in srv.stderr().splitlines() if "TLS handshake failed" in l][0]
        self.assertIn(f"proxy upstream 127.0.0.1:{ng.port}", line)
        self.assertIn("certificate verify failed", line)
        self.assertIn("unable to get local issuer certificate", line)
        self.assertEqual(ng.lines("/page.html"), [], "no request reached nginx")

    def test_system_store_does_not_trust_a_private_ca(self):
        ng = self.nginx()
        srv = self.proxy(f"https://127.0.0.1:{ng.port}")
        status, _, _ = self.get(srv.port, "/page.html")
        self.assertEqual(status, 502)
        self.wait_for(lambda: "certificate verify failed" in srv.stderr(), 3, msg="the log")

    def test_host_name_mismatch_is_a_502(self):
        ng = self.nginx()
        srv = self.proxy(f"https://127.0.0.1:{ng.port}",
                         self.ca_key() + '\ntls_server_name = "api.example.com"')
        status, _, _ = self.get(srv.port, "/page.html")
        self.assertEqual(status, 502)
        self.wait_for(lambda: "hostname mismatch" in srv.stderr(), 3, msg="the mismatch log")

    def test_other_verified_name(self):
        ng = self.nginx()
        srv = self.proxy(f"https://127.0.0.1:{ng.port}",
                         self.ca_key() + '\ntls_server_name = "localhost"')
        status, _, _ = self.get(srv.port, "/page.html")
        self.assertEqual(status, 200, srv.stderr()[-2000:])

    def test_verification_off_answers_and_warns_at_start(self):
        other = make_ca(os.path.join(self.tmp, "pki"), "other")
        ng = Nginx(self, self.docroot, other["server"], other["key"])
        srv = self.proxy(f"https://127.0.0.1:{ng.port}", "tls_verify = false")
        self.assertIn("does not verify the server's certificate", srv.stderr())
        status, _, body = self.get(srv.port, "/page.html")
        self.assertEqual((status, len(body)), (200, 663))

    def test_connections_are_pooled_and_sessions_resumed(self):
        ng = self.nginx()
        srv = self.proxy(f"https://127.0.0.1:{ng.port}", self.ca_key())
        for i in range(50):
            status, _, body = self.get(srv.port, f"/page.html?pool={i}")
            self.assertEqual((status, len(body)), (200, 663))
        lines = self.wait_for(lambda: (l := ng.lines("pool=")) and len(l) >= 50 and l, 3,
                              msg="nginx's access log")
        self.assertEqual(len({l[0] for l in lines}), 1, f"one TLS connection for all: {lines}")
        self.assertEqual(max(int(l[1]) for l in lines), 50)

    def test_new_connections_resume_the_session(self):
        # nginx closes after each request: every request needs a new connection.
        ng = self.nginx(extra="keepalive_timeout 0;")
        srv = self.proxy(f"https://127.0.0.1:{ng.port}", self.ca_key())
        for i in range(5):
            status, _, _ = self.get(srv.port, f"/page.html?resume={i}")
            self.assertEqual(status, 200, srv.stderr()[-2000:])
        lines = self.wait_for(lambda: (l := ng.lines("resume=")) and len(l) >= 5 and l, 3,
                              msg="nginx's access log")
        self.assertEqual(len({l[0] for l in lines}), 5, f"a connection each: {lines}")
        self.assertEqual(lines[0][2], ".", f"the first is a full handshake: {lines}")
        self.assertEqual([l[2] for l in lines[1:]], ["r"] * 4, f"the rest resume: {lines}")

    def test_pooled_connection_closed_by_the_back_end_is_retried(self):
        backend = TlsBackend(self, self.certs, extra=["--close-after", "1"])
        srv = self.proxy(f"https://127.0.0.1:{backend.port}", self.ca_key())
        for i in range(20):
            status, _, body = self.get(srv.port, f"/x?i={i}")
            self.assertEqual((status, body), (200, b"T"), srv.stderr()[-2000:])

    def test_idle_timeout_of_the_back_end_then_a_request(self):
        ng = self.nginx(extra="keepalive_timeout 1s;")
        srv = self.proxy(f"https://127.0.0.1:{ng.port}", self.ca_key())
        self.assertEqual(self.get(srv.port, "/page.html")[0], 200)
        time.sleep(1.5)  # nginx closed the pooled connection meanwhile
        self.assertEqual(self.get(srv.port, "/page.html")[0], 200)
        self.assertNotIn("proxy upstream", srv.stderr())

    def test_large_response_is_byte_exact(self):
        ng = self.nginx()
        srv = self.proxy(f"https://127.0.0.1:{ng.port}", self.ca_key())
        status, _, body = self.get(srv.port, "/big.bin")
        self.assertEqual(status, 200)
        with open(os.path.join(self.docroot, "big.bin"), "rb") as f:
            expected = f.read()
        self.assertEqual(len(body), len(expected))
        self.assertEqual(hashlib.sha256(body).digest(), hashlib.sha256(expected).digest())

    def test_slow_client_gets_every_byte(self):
        ng = self.nginx()
        srv = self.proxy(f"https://127.0.0.1:{ng.port}", self.ca_key())
        with RawClient(srv.port, rcvbuf=4096, timeout=20) as c:
            c.send(b"GET /big.bin HTTP/1.1\r\nHost: localhost\r\n\r\n")
            time.sleep(0.5)  # the proxy spools what the client does not take
            response = c.read_response(timeout=20)
        with open(os.path.join(self.docroot, "big.bin"), "rb") as f:
            self.assertEqual(hashlib.sha256(response.body).digest(),
                             hashlib.sha256(f.read()).digest())
        self.assertEqual(self.get(srv.port, "/page.html")[0], 200)

    def test_declared_group_over_https_with_its_name_verified(self):
        ng = self.nginx()
        top = (f'[[upstream]]\nname = "localhost"\nservers = ["127.0.0.1:{ng.port}"]\n'
               f'tls = true\n{self.ca_key()}\n')
        srv = self.proxy("https://localhost", top=top)
        status, _, body = self.get(srv.port, "/page.html")
        self.assertEqual((status, len(body)), (200, 663), srv.stderr()[-2000:])

    def test_health_checks_speak_tls_and_take_out_an_unverifiable_server(self):
        other = make_ca(os.path.join(self.tmp, "pki"), "other")
        good = self.nginx()
        bad = Nginx(self, self.docroot, other["server"], other["key"])
        top = (f'[[upstream]]\nname = "localhost"\n'
               f'servers = ["127.0.0.1:{good.port}", "127.0.0.1:{bad.port}"]\n'
               f'tls = true\n{self.ca_key()}\nmax_fails = 0\n'
               f'[upstream.health_check]\npath = "/page.html"\ninterval = "200ms"\n'
               f'fall = 2\nrise = 1\n')
        srv = self.proxy("https://localhost", top=top)
        self.wait_for(lambda: "failed its health check" in srv.stderr(), 5,
                      msg="the unverifiable server taken out")
        log = srv.stderr()
        self.assertIn(f"health check of 127.0.0.1:{bad.port} failed 2 time(s) in a row "
                      f"(last: TLS handshake failed", log)
        self.assertIn("certificate verify failed", log)
        self.assertNotIn(f"health check of 127.0.0.1:{good.port}", log)
        probes = self.wait_for(lambda: len(good.lines("/page.html")) >= 2 and
                               good.lines("/page.html"), 3, msg="probes at the good server")
        self.assertTrue(probes, "the good server was probed over TLS")
        for _ in range(10):
            status, _, body = self.get(srv.port, "/page.html?after")
            self.assertEqual((status, len(body)), (200, 663))

    def test_handshake_timeout_and_failure_are_connect_failures_retried_for_a_post(self):
        # A server that accepts TCP (the kernel's backlog) but never speaks TLS, and one whose
        # certificate does not verify: a POST still goes to the good one, since nothing was sent.
        silent = socket.socket()
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        self.addCleanup(silent.close)
        other = make_ca(os.path.join(self.tmp, "pki"), "other")
        bad = Nginx(self, self.docroot, other["server"], other["key"])
        good = TlsBackend(self, self.certs)
        top = (f'[[upstream]]\nname = "localhost"\n'
               f'servers = ["127.0.0.1:{silent.getsockname()[1]}", "127.0.0.1:{bad.port}", '
               f'"127.0.0.1:{good.port}"]\n'
               f'tls = true\n{self.ca_key()}\nconnect_timeout = "300ms"\nmax_fails = 0\n')
        srv = self.proxy("https://localhost", top=top)
        body = b"p" * 1000
        for _ in range(3):  # round robin: each server comes first once
            status, _, answer = self.http(srv.port, "POST", "/upload", body=body)
            self.assertEqual(status, 200, srv.stderr()[-3000:])
            self.assertIn(hashlib.sha256(body).hexdigest().encode(), answer)
        timed_out = (f"proxy upstream 127.0.0.1:{silent.getsockname()[1]} (group \"localhost\"): "
                     f"TLS handshake timed out for \"POST /upload\"")
        failed = f"proxy upstream 127.0.0.1:{bad.port} (group \"localhost\"): TLS handshake failed"
        log = srv.stderr_once_it_has(timed_out, failed)
        self.assertIn(timed_out, log)
        self.assertIn(failed, log)


if __name__ == "__main__":
    main()
