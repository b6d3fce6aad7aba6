"""AJP13 routes against a real Tomcat 10 (Debian's tomcat10) serving tests/integration/ajp_webapp.

One Tomcat per test class (the JVM takes seconds to start): what the servlet sees, bodies both
ways, error and redirect paths, the secret, packet-size limits, sticky sessions across two Tomcats,
and a Tomcat killed mid-response.
"""

import base64
import http.client
import os
import shutil
import socket
import ssl
import struct
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import tomcat  # noqa: E402
from harness import (PEREGRINE_BIN, ServerTestCase, check_answered_beside_a_stream,  # noqa: E402
                     make_config, q, serve_each_connection)

SECRET = "s3cret-for-tests"
JSPS = ["/info.jsp", "/echo.jsp", "/stream.jsp?size=1", "/slow.jsp", "/redirect.jsp",
        "/cookie.jsp", "/route.jsp", "/small.jsp", "/header.jsp?size=1", "/error.jsp",
        "/flood.jsp?mb=0"]


def require_tomcat():
    if not tomcat.available():
        harness.require_tool("catalina.sh", "tomcat10",
                             path=os.path.join(tomcat.CATALINA_HOME, "bin", "catalina.sh"))


def parse_info(body):
    info = {}
    for line in body.decode("utf-8", "replace").splitlines():
        name, _, value = line.partition("=")
        info.setdefault(name, value)
    return info


def pattern(n, start=0):
    """The bytes stream.jsp writes: (offset % 251)."""
    block = bytes(range(251))
    out = bytearray()
    offset = start
    while len(out) < n:
        k = offset % 251
        out += block[k:]
        offset += 251 - k
    return bytes(out[:n])


class TomcatCase(ServerTestCase):
    """Starts the class's Tomcats once; each test starts its own Peregrine."""

    tomcats = {}  # name -> Tomcat, per class
    TOMCATS = {"node1": {}}

    @classmethod
    def setUpClass(cls):
        require_tomcat()
        cls.base = tempfile.mkdtemp(prefix="peregrine-tomcat-")
        cls.tomcats = {}
        try:
            for name, options in cls.TOMCATS.items():
                t = tomcat.Tomcat(os.path.join(cls.base, name), secret=options.get("secret", SECRET),
                                  route=name, packet_size=options.get("packet_size", 8192),
                                  threads=50, heap="128m")
                cls.tomcats[name] = t
                t.start()
            for t in cls.tomcats.values():
                t.warm_up(JSPS)
        except Exception:
            cls.tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        for t in cls.tomcats.values():
            t.stop()
        shutil.rmtree(cls.base, True)

    def ajp_route(self, target, prefix="/", **keys):
        lines = ["[[site.route]]", f"prefix = {q(prefix)}", f"ajp = {q(target)}"]
        keys.setdefault("ajp_secret", SECRET)
        for key, value in keys.items():
            if value is None:
                continue
            if isinstance(value, bool):
                lines.append(f"{key} = {'true' if value else 'false'}")
            elif isinstance(value, int):
                lines.append(f"{key} = {value}")
            else:
                lines.append(f"{key} = {q(value)}")
        return "\n".join(lines) + "\n"

    def start_ajp(self, node="node1", upstreams="", limits='max_body_bytes = "64m"', workers=1,
                  target=None, top="", **keys):
        root = self.make_root({"index.html": "static"})
        if target is None:
            target = f"ajp://127.0.0.1:{self.tomcats[node].ajp_port}"
        config = make_config(root, top=top, limits=limits, routes=self.ajp_route(target, **keys),
                             workers=workers) + upstreams
        return self.start_config(config)

    def conn(self, port, timeout=30):
        return http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)

    def echo(self, port, body, chunked=False, piece=70_000, timeout=30):
        """POSTs body to /echo.jsp and returns (status, the bytes echoed), reading the answer while
        the body goes out. echo.jsp writes as it reads, so a client that sends everything first
        needs the whole body to fit in the socket buffers on the way: a deadlock by design once
        the kernel runs short of TCP memory (as when another test holds a gigabyte of it)."""
        c = self.conn(port, timeout)
        c.putrequest("POST", "/echo.jsp")
        c.putheader("Content-Type", "application/octet-stream")
        c.putheader(*(("Transfer-Encoding", "chunked") if chunked
                      else ("Content-Length", str(len(body)))))
        c.endheaders()
        # The socket itself, not c.send: http.client drops the connection's socket once it reads
        # "Connection: close" (sent here when the answer starts before the body is read), and
        # c.send would then open a new connection for the rest of the body.
        sock = c.sock
        failures = []

        def send():
            try:
                for i in range(0, len(body), piece):
                    part = body[i:i + piece]
                    sock.sendall(b"%x\r\n%s\r\n" % (len(part), part) if chunked else part)
                if chunked:
                    sock.sendall(b"0\r\n\r\n")
            except OSError as e:
                failures.append(e)

        sender = threading.Thread(target=send)
        sender.start()
        try:
            r = c.getresponse()
            got = r.read()
        finally:
            sender.join()
            c.close()
        if failures:
            raise failures[0]
        return r.status, got

    def request(self, port, method, path, body=None, headers=None, timeout=30):
        c = self.conn(port, timeout)
        try:
            c.request(method, path, body=body, headers=headers or {})
            r = c.getresponse()
            return r.status, r.headers, r.read()
        finally:
            c.close()


class TestAjpBasics(TomcatCase):
    def test_servlet_sees_the_request(self):
        srv = self.start_ajp()
        c = self.conn(srv.port)
        c.request("GET", "/info.jsp?a=1&b=two%20words", headers={
            "X-Custom": "value one", "Accept-Language": "fr", "User-Agent": "ajp-test"})
        local_port = c.sock.getsockname()[1]
        r = c.getresponse()
        body = r.read()
        c.close()
        self.assertEqual(r.status, 200, body)
        info = parse_info(body)
        self.assertEqual(info["method"], "GET")
        self.assertEqual(info["uri"], "/info.jsp")
        self.assertEqual(info["query"], "a=1&b=two%20words")
        self.assertEqual(info["remote_addr"], "127.0.0.1")
        self.assertEqual(info["remote_port"], str(local_port), "AJP_REMOTE_PORT is the client's")
        self.assertEqual(info["secure"], "false")
        self.assertEqual(info["scheme"], "http")
        self.assertEqual(info["server_port"], str(srv.port))
        self.assertEqual(info["header.x-custom"], "value one")
        self.assertEqual(info["header.accept-language"], "fr")
        self.assertEqual(info["header.user-agent"], "ajp-test")
        self.assertEqual(info["header.host"], f"127.0.0.1:{srv.port}")
        # No authentication on the route: nothing claims a remote user.
        self.assertEqual(info["remote_user"], "null")

    def test_servlet_sees_the_basic_auth_user(self):
        htpasswd = os.path.join(self.tmp, "users")
        with open(htpasswd, "w") as f:
            f.write("alice:" + subprocess.run(["openssl", "passwd", "-6", "-salt", "saltsalt", "wonder"],
                                              capture_output=True, text=True, check=True).stdout)
        route = self.ajp_route(f"ajp://127.0.0.1:{self.tomcats['node1'].ajp_port}").replace(
            "ajp = ", f'auth = {{ htpasswd = {q(htpasswd)}, realm = "staff" }}\najp = ', 1)
        srv = self.start_config(make_config(self.make_root({"index.html": "static"}), routes=route))
        status, headers, _ = self.request(srv.port, "GET", "/info.jsp")
        self.assertEqual(status, 401)
        self.assertIn('realm="staff"', headers["WWW-Authenticate"])
        token = base64.b64encode(b"alice:wonder").decode()
        status, _, body = self.request(srv.port, "GET", "/info.jsp",
                                       headers={"Authorization": "Basic " + token})
        self.assertEqual(status, 200, body)
        info = parse_info(body)
        self.assertEqual((info["remote_user"], info["auth_type"]), ("alice", "Basic"))
        # The client's own claim of a user never becomes one.
        status, _, body = self.request(srv.port, "GET", "/info.jsp",
                                       headers={"Authorization": "Basic " + token, "Remote-User": "root"})
        self.assertEqual(parse_info(body)["remote_user"], "alice")

    def test_client_headers_never_become_attributes(self):
        srv = self.start_ajp()
        status, _, body = self.request(srv.port, "GET", "/info.jsp", headers={
            "AJP_REMOTE_PORT": "1", "jakarta.servlet.request.ssl_session_id": "forged",
            "X-Forwarded-For": "10.9.9.9"})
        self.assertEqual(status, 200)
        info = parse_info(body)
        self.assertNotEqual(info["remote_port"], "1")
        self.assertEqual(info["remote_addr"], "127.0.0.1")
        self.assertFalse([k for k in info if k.startswith("attribute.") and "ssl" in k], info)
        self.assertEqual(info["tls.cipher_suite"], "null")  # a plain client: no SSL attributes
        self.assertEqual(info["tls.session_id"], "null")

    def test_secure_over_tls(self):
        root = self.make_root({"index.html": "x"})
        srv = self.start_argv([PEREGRINE_BIN, "--listen", "127.0.0.1:0", "--workers", "1",
                               "--access-log", "off", "--tls-self-signed", "--ajp",
                               f"ajp://127.0.0.1:{self.tomcats['node1'].ajp_port}",
                               "--ajp-secret-file", self.secret_file()])
        # TLS 1.3, then 1.2 with a 128-bit cipher: different facts, each what this client got.
        for version, ciphers in ((ssl.TLSVersion.TLSv1_3, None),
                                 (ssl.TLSVersion.TLSv1_2, "ECDHE+AESGCM+AES128")):
            context = ssl.create_default_context()
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
            context.minimum_version = context.maximum_version = version
            if ciphers:
                context.set_ciphers(ciphers)
                # No ticket: the server names a stateful session in its ServerHello.
                context.options |= ssl.OP_NO_TICKET
            c = http.client.HTTPSConnection("127.0.0.1", srv.port, timeout=30, context=context)
            c.request("GET", "/info.jsp?tls=1")
            r = c.getresponse()
            info = parse_info(r.read())
            cipher, protocol, bits = c.sock.cipher()
            session = c.sock.session
            c.close()
            self.assertEqual(r.status, 200)
            self.assertEqual(info["secure"], "true")
            self.assertEqual(info["scheme"], "https")
            self.assertEqual(info["query"], "tls=1")
            # mod_jk's SSL attributes: what this client negotiated, as the servlet sees it.
            self.assertEqual(info["tls.cipher_suite"], cipher)
            self.assertEqual(info["tls.key_size"], str(bits))
            self.assertEqual(info["tls.protocol"], protocol)
            self.assertRegex(info["tls.session_id"], r"^[0-9A-F]{2,64}$")
            if ciphers:  # TLS 1.2 names the session in the ServerHello; 1.3 keeps it private
                self.assertEqual((protocol, bits), ("TLSv1.2", 128))
                self.assertEqual(info["tls.session_id"], session.id.hex().upper())
            self.assertEqual(info["tls.client_certificates"], "null")  # none was asked for
        del root

    def test_client_certificate_reaches_the_servlet(self):
        # As mod_jk passes it (AJP attribute SSL_CERT): the certificate the site verified
        # (tls.verify_client, docs/tls.md) becomes jakarta.servlet.request.X509Certificate.
        from test_tls import TestCA
        from test_tls_client_cert import client_cert
        ca = TestCA(self.tmp)
        chain, key = ca.leaf("localhost", ["localhost", "127.0.0.1"])
        alice = client_cert(ca, "alice")
        root = self.make_root({"index.html": "x"})
        target = f"ajp://127.0.0.1:{self.tomcats['node1'].ajp_port}"
        config = make_config(root, routes=self.ajp_route(target), site=(
            f"tls = {{ certificate = {q(chain)}, key = {q(key)}, verify_client = \"optional\", "
            f"client_ca = {q(ca.ca_pem)} }}\n"))
        srv = self.start_config(config.replace(
            'listen = ["127.0.0.1:0"]', 'listen = [{ address = "127.0.0.1:0", tls = true }]', 1))
        for cert, subject in ((alice, "CN=alice,O=Peregrine Tests"), (None, "null")):
            context = ssl.create_default_context(cafile=ca.ca_pem)
            if cert:
                context.load_cert_chain(*cert)
            c = http.client.HTTPSConnection("localhost", srv.port, timeout=30, context=context)
            c.request("GET", "/info.jsp")
            r = c.getresponse()
            info = parse_info(r.read())
            c.close()
            self.assertEqual(r.status, 200)
            self.assertEqual(info["tls.client_certificates"], "1" if cert else "null")
            self.assertEqual(info["tls.client_subject"], subject)
        # HTTP/2 takes the same path.
        out = subprocess.run(["curl", "-sS", "--http2", "--cacert", ca.ca_pem, "--cert", alice[0],
                              "--key", alice[1], f"https://localhost:{srv.port}/info.jsp"],
                             capture_output=True, timeout=60)
        info = parse_info(out.stdout)
        self.assertEqual((info["protocol"], info["tls.client_subject"]),
                         ("HTTP/2.0", "CN=alice,O=Peregrine Tests"), out.stderr)

    def test_ssl_attributes_over_http2(self):
        srv = self.start_argv([PEREGRINE_BIN, "--listen", "127.0.0.1:0", "--workers", "1",
                               "--access-log", "off", "--tls-self-signed", "--ajp",
                               f"ajp://127.0.0.1:{self.tomcats['node1'].ajp_port}",
                               "--ajp-secret-file", self.secret_file()])
        out = subprocess.run(["curl", "-sSkv", "--http2", f"https://127.0.0.1:{srv.port}/info.jsp"],
                             capture_output=True, timeout=60)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn(b"ALPN: server accepted h2", out.stderr)
        # curl: "SSL connection using TLSv1.3 / TLS_AES_256_GCM_SHA384"
        line = [l for l in out.stderr.decode().splitlines() if "SSL connection using" in l][0]
        protocol, cipher = [part.strip() for part in line.split("using", 1)[1].split("/")]
        info = parse_info(out.stdout)
        self.assertEqual(info["protocol"], "HTTP/2.0")
        self.assertEqual(info["tls.cipher_suite"], cipher)
        self.assertEqual(info["tls.protocol"], protocol)
        self.assertIn(info["tls.key_size"], ("128", "256"))
        self.assertRegex(info["tls.session_id"], r"^[0-9A-F]{2,64}$")

    def secret_file(self):
        path = os.path.join(self.tmp, "ajp.secret")
        with open(path, "w") as f:
            f.write(SECRET + "\n")
        return path

    def test_quick_mode_prefix(self):
        srv = self.start_quick(self.make_root({"index.html": "static page"}), extra=[
            "--ajp", f"/app/=ajp://127.0.0.1:{self.tomcats['node1'].ajp_port}",
            "--ajp-secret-file", self.secret_file()])
        status, _, body = self.request(srv.port, "GET", "/")
        self.assertEqual((status, body), (200, b"static page"))
        # The prefix is kept: Tomcat's ROOT context has no /app/, so its 404 comes back.
        status, _, body = self.request(srv.port, "GET", "/app/info.jsp")
        self.assertEqual(status, 404)
        self.assertIn(b"Tomcat", body)

    def test_quick_mode_needs_a_secret_file(self):
        r = subprocess.run([PEREGRINE_BIN, "--test", "--ajp", "ajp://127.0.0.1:8009"],
                           capture_output=True, text=True, timeout=10)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("--ajp needs --ajp-secret-file", r.stderr)

    def test_io_uring_sends_requests_to_tomcat_with_its_wait(self):
        # On io_uring an AJP request of up to 4 KiB goes to Tomcat through the ring, in the system
        # call that waits, as a FastCGI request does (docs/io_uring.md, "Sending through the
        # ring"): no send(2) per request, while Tomcat's answers are still read with recv(2).
        # Bodies below and above that size still go through whole, in order.
        target = f"ajp://127.0.0.1:{self.tomcats['node1'].ajp_port}"
        path = self.write_config(make_config(self.make_root({"index.html": "static"}),
                                             routes=self.ajp_route(target)))
        srv = self.start_argv([PEREGRINE_BIN, "-c", path, "--event-backend", "io_uring"])
        conn = self.conn(srv.port)

        def get():
            conn.request("GET", "/small.jsp")
            response = conn.getresponse()
            self.assertEqual(response.status, 200)
            self.assertIn(b"The quick brown fox", response.read())

        self.assert_sends_go_with_the_wait(srv.pid, get)
        conn.close()
        for size in (0, 1000, 5000, 200_000):
            body = os.urandom(size)
            status, got = self.echo(srv.port, body)
            self.assertEqual((status, len(got)), (200, size), f"size {size}")
            self.assertTrue(got == body, f"size {size}: bytes differ")

    def test_post_echo_sizes(self):
        srv = self.start_ajp()
        chunk = 8192 - 6
        for size in (0, 1, chunk - 1, chunk, chunk + 1, 3 * chunk + 5, 200_000, 5_000_000):
            body = os.urandom(size)
            status, got = self.echo(srv.port, body)
            self.assertEqual(status, 200, f"size {size}")
            self.assertEqual(len(got), size, f"size {size}")
            self.assertTrue(got == body, f"size {size}: bytes differ")

    def test_post_echo_50_mb(self):
        # curl reads the echo while it sends (http.client would send all 50 MB first, and an
        # echo that answers as it reads then fills every buffer on the way: a deadlock by design).
        curl = harness.require_tool("curl", "curl")
        srv = self.start_ajp()
        path = os.path.join(self.tmp, "body")
        with open(path, "wb") as f:
            f.write(os.urandom(50 * 1024 * 1024))
        for chunked in (False, True):
            out = os.path.join(self.tmp, "out")
            argv = [curl, "-sS", "-o", out, "-w", "%{http_code}", "--data-binary", "@" + path,
                    "-H", "Content-Type: application/octet-stream"]
            if chunked:
                argv += ["-H", "Transfer-Encoding: chunked"]
            r = subprocess.run(argv + [f"http://127.0.0.1:{srv.port}/echo.jsp"],
                               capture_output=True, text=True, timeout=180)
            self.assertEqual(r.stdout, "200", r.stderr)
            self.assertEqual(harness.sha256(open(out, "rb").read()),
                             harness.sha256(open(path, "rb").read()), f"chunked={chunked}")

    def test_chunked_request_bodies(self):
        srv = self.start_ajp()
        for size in (0, 10, 100_000, 3_000_000):
            body = os.urandom(size)
            status, got = self.echo(srv.port, body, chunked=True)
            self.assertEqual(status, 200, f"size {size}")
            self.assertTrue(got == body, f"chunked size {size}: {len(got)} bytes back")

    def test_transfer_encoding_wins_over_content_length(self):
        # CVE-2022-26377: a request with both must never reach Tomcat with the Content-Length.
        srv = self.start_ajp()
        with harness.RawClient(srv.port, timeout=30) as c:
            c.send(b"POST /info.jsp HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n"
                   b"Transfer-Encoding: chunked\r\nContent-Type: text/plain\r\n\r\n"
                   b"5\r\nhello\r\n0\r\n\r\n")
            r = c.read_response()
        if r.status == 200:
            info = parse_info(r.body)
            self.assertNotEqual(info.get("header.content-length"), "4")
            self.assertEqual(info["content_length"], "-1")
        else:
            self.assertEqual(r.status, 400)  # or the front refuses the ambiguity outright

    def test_chunked_response(self):
        srv = self.start_ajp()
        size = 3_000_001
        status, headers, body = self.request(srv.port, "GET", f"/stream.jsp?size={size}&piece=7000")
        self.assertEqual(status, 200)
        self.assertEqual(len(body), size)
        self.assertTrue(body == pattern(size), "streamed bytes differ")
        # Small and flushed: it streams too.
        c = self.conn(srv.port)
        c.request("GET", "/stream.jsp?size=30&piece=10&pause=50")
        r = c.getresponse()
        self.assertEqual(r.getheader("Transfer-Encoding"), "chunked")
        self.assertEqual(r.read(), pattern(30))
        c.close()

    def test_tomcat_faster_than_the_compressor_does_not_hold_the_worker(self):
        # One worker; Tomcat writes 400 MB of hex text faster than gzip takes it in. The AJP
        # reader read until the socket was empty, which Tomcat never let it be.
        srv = self.start_ajp(compress=True)
        status, _, small = self.request(srv.port, "GET", "/small.jsp")
        self.assertEqual(status, 200)
        check_answered_beside_a_stream(self, srv.port, "/flood.jsp?mb=400", "/small.jsp", small)
        self.stop_ok(srv)

    def test_head_and_small_page(self):
        srv = self.start_ajp()
        status, headers, body = self.request(srv.port, "GET", "/small.jsp")
        self.assertEqual(status, 200)
        self.assertEqual(headers["Content-Length"], str(len(body)))
        self.assertIn(b"quick brown fox", body)
        length = headers["Content-Length"]
        status, headers, body = self.request(srv.port, "HEAD", "/small.jsp")
        self.assertEqual(status, 200)
        self.assertEqual(body, b"")
        self.assertEqual(headers["Content-Length"], length)  # the length of the GET's body
        self.assertEqual(self.request(srv.port, "GET", "/small.jsp")[0], 200)

    def test_slow_page_and_keepalive(self):
        srv = self.start_ajp()
        c = self.conn(srv.port)
        for _ in range(20):
            c.request("GET", "/slow.jsp")
            r = c.getresponse()
            self.assertEqual(r.status, 200)
            self.assertIn(b"slow page", r.read())
        c.close()

    def test_exception_is_500(self):
        srv = self.start_ajp()
        status, _, body = self.request(srv.port, "GET", "/error.jsp")
        self.assertEqual(status, 500)
        self.assertIn(b"test exception from error.jsp", body)
        # The connection stays usable.
        self.assertEqual(self.request(srv.port, "GET", "/slow.jsp")[0], 200)

    def test_redirect_location_names_the_front(self):
        srv = self.start_ajp()
        status, headers, _ = self.request(srv.port, "GET", "/redirect.jsp",
                                          headers={"Host": "www.example.test:8443"})
        self.assertEqual(status, 302)
        location = headers["Location"]
        # Tomcat builds it from what AJP carried (Host, scheme), never from its own connector.
        self.assertNotIn(str(self.tomcats["node1"].ajp_port), location)
        self.assertIn(location, ("info.jsp?from=redirect",
                                 "http://www.example.test:8443/info.jsp?from=redirect"))

    def test_cookies_both_ways(self):
        srv = self.start_ajp()
        status, headers, body = self.request(srv.port, "GET", "/cookie.jsp?session=1",
                                             headers={"Cookie": "a=1; b=two"})
        self.assertEqual(status, 200)
        cookies = headers.get_all("Set-Cookie")
        self.assertTrue(any(c.startswith("flavour=oatmeal") for c in cookies), cookies)
        self.assertTrue(any(c.startswith("size=large") for c in cookies), cookies)
        self.assertTrue(any(c.startswith("JSESSIONID=") and ".node1" in c for c in cookies))
        info = parse_info(body)
        self.assertEqual(info["cookie.a"], "1")
        self.assertEqual(info["cookie.b"], "two")

    def test_method_without_a_code(self):
        # PATCH has no AJP method code: it goes as the req_method attribute, and the JSP refuses it.
        srv = self.start_ajp()
        status, _, body = self.request(srv.port, "PATCH", "/info.jsp", body=b"x")
        self.assertEqual(status, 405)
        self.assertIn(b"JSPs only permit", body)

    def test_wrong_secret_is_502_with_a_log_line(self):
        srv = self.start_ajp(ajp_secret="not-the-secret")
        status, _, _ = self.request(srv.port, "GET", "/info.jsp")
        self.assertEqual(status, 502)
        self.wait_for(lambda: "ajp_secret does not match" in srv.stderr(), msg="the log line")
        status, _, _ = self.request(srv.port, "GET", "/info.jsp")
        self.assertEqual(status, 502)

    def test_missing_secret_is_a_config_error(self):
        root = self.make_root({})
        config = make_config(root, routes=self.ajp_route("ajp://127.0.0.1:9", ajp_secret=None))
        path = self.write_config(config)
        r = subprocess.run([PEREGRINE_BIN, "--test", "-c", path], capture_output=True, text=True,
                           timeout=10)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("ajp route has no secret", r.stderr)
        self.assertIn("ajp_secret_required = false", r.stderr)

    def test_no_secret_sent_to_a_connector_that_requires_one(self):
        srv = self.start_ajp(ajp_secret=None, ajp_secret_required=False)
        status, _, _ = self.request(srv.port, "GET", "/info.jsp")
        self.assertEqual(status, 502)
        self.wait_for(lambda: "set ajp_secret" in srv.stderr(), msg="the log line")

    def test_request_head_larger_than_the_packet(self):
        srv = self.start_ajp()
        status, _, _ = self.request(srv.port, "GET", "/info.jsp", headers={"X-Big": "y" * 9000})
        self.assertEqual(status, 431)
        self.wait_for(lambda: "ajp_packet_size" in srv.stderr(), msg="the log line")
        self.assertEqual(self.request(srv.port, "GET", "/slow.jsp")[0], 200)

    def test_http_connector_is_not_ajp(self):
        srv = self.start_ajp(target=f"ajp://127.0.0.1:{self.tomcats['node1'].http_port}")
        status, _, _ = self.request(srv.port, "GET", "/info.jsp")
        self.assertEqual(status, 502)
        self.wait_for(lambda: "answered HTTP, not AJP" in srv.stderr(), msg="the log line")

    def test_cping_before_reusing_an_idle_connection(self):
        srv = self.start_ajp(ajp_cping_after="100ms", top='log_level = "debug"')
        for _ in range(3):
            self.assertEqual(self.request(srv.port, "GET", "/slow.jsp")[0], 200)
            time.sleep(0.3)  # the pooled connection idles past ajp_cping_after: CPING first
            data = os.urandom(100_000)
            status, got = self.echo(srv.port, data)
            self.assertEqual(status, 200)
            self.assertTrue(got == data)
        log = srv.stderr_once_it_counts("CPONG", 3)
        self.assertNotIn("[error]", log)
        self.assertEqual(log.count("CPONG"), 3, log)

    def test_many_concurrent_requests(self):
        srv = self.start_ajp(workers=2)
        errors = []

        def client():
            try:
                c = self.conn(srv.port)
                for i in range(25):
                    c.request("GET", "/small.jsp" if i % 2 else "/slow.jsp")
                    r = c.getresponse()
                    r.read()
                    if r.status != 200:
                        errors.append(r.status)
                c.close()
            except Exception as e:  # noqa: BLE001
                errors.append(repr(e))

        threads = [threading.Thread(target=client) for _ in range(20)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])


class TestAjpTwoTomcats(TomcatCase):
    """node1 (packetSize 8192) and node2 (packetSize 16384): sticky routes, packet sizes, faults."""

    TOMCATS = {"node1": {}, "node2": {"packet_size": 16384}}

    def group(self, **keys):
        lines = ["[[upstream]]", 'name = "tomcats"']
        for key, value in keys.items():
            lines.append(f"{key} = {value}")
        for name, t in self.tomcats.items():
            lines += ["[[upstream.server]]", f'address = "127.0.0.1:{t.ajp_port}"',
                      f'route = "{name}"']
        return "\n" + "\n".join(lines) + "\n"

    def node_of(self, port, path, headers=None):
        status, headers_out, body = self.request(port, "GET", path, headers=headers)
        self.assertEqual(status, 200, body)
        info = parse_info(body)
        return info["node"], info["session"], headers_out

    def test_sticky_sessions(self):
        srv = self.start_ajp(target="tomcats", upstreams=self.group())
        # Without a session, both nodes take requests (round robin).
        nodes = {self.node_of(srv.port, "/route.jsp")[0] for _ in range(6)}
        self.assertEqual(nodes, {"node1", "node2"})
        for _ in range(2):
            node, session, headers = self.node_of(srv.port, "/route.jsp?create=1")
            self.assertTrue(session.endswith("." + node), session)
            # The cookie keeps every later request on that node.
            for _ in range(6):
                again, seen, _ = self.node_of(srv.port, "/route.jsp",
                                              headers={"Cookie": f"x=1; JSESSIONID={session}"})
                self.assertEqual((again, seen), (node, session))
            # So does a ;jsessionid= path parameter (URL rewriting).
            for _ in range(4):
                again, seen, _ = self.node_of(srv.port, f"/route.jsp;jsessionid={session}")
                self.assertEqual((again, seen), (node, session))
        # A route no server has: balanced as usual.
        nodes = {self.node_of(srv.port, "/route.jsp", headers={"Cookie": "JSESSIONID=AB.node9"})[0]
                 for _ in range(6)}
        self.assertEqual(nodes, {"node1", "node2"})

    def test_cping_health_check(self):
        # The group's active check is CPING: a dead server is taken out, the live ones stay.
        dead = tomcat.free_port()
        upstreams = (self.group() + f'[[upstream.server]]\naddress = "127.0.0.1:{dead}"\n'
                     '[upstream.health_check]\ninterval = "200ms"\ntimeout = "1s"\nfall = 1\n')
        srv = self.start_ajp(target="tomcats", upstreams=upstreams, top='log_level = "debug"')
        self.wait_for(lambda: f"health check of 127.0.0.1:{dead} failed" in srv.stderr(),
                      timeout=10, msg="the dead server's failed check")
        time.sleep(0.6)  # several more rounds of checks
        self.assertNotIn(f"health check of 127.0.0.1:{self.tomcats['node1'].ajp_port}", srv.stderr())
        self.assertNotIn(f"health check of 127.0.0.1:{self.tomcats['node2'].ajp_port}", srv.stderr())
        for _ in range(6):
            self.assertEqual(self.request(srv.port, "GET", "/route.jsp")[0], 200)

    def test_packet_size_larger_than_ours_is_refused(self):
        # node2 may send 16 KiB packets; with the default ajp_packet_size (8 KiB) a large
        # response header makes one, which we refuse with 502 and a hint.
        srv = self.start_ajp(node="node2")
        status, _, _ = self.request(srv.port, "GET", "/header.jsp?size=12000")
        self.assertEqual(status, 502)
        self.wait_for(lambda: "exceeds ajp_packet_size" in srv.stderr(), msg="the log line")
        self.assertEqual(self.request(srv.port, "GET", "/header.jsp?size=10")[0], 200)

    def test_packet_size_16k(self):
        srv = self.start_ajp(node="node2", ajp_packet_size=16384)
        status, headers, _ = self.request(srv.port, "GET", "/header.jsp?size=12000")
        self.assertEqual(status, 200)
        self.assertEqual(len(headers["X-Big"]), 12000)
        status, _, body = self.request(srv.port, "GET", "/info.jsp", headers={"X-Big": "z" * 12000})
        self.assertEqual(status, 200)
        self.assertEqual(parse_info(body)["header.x-big"], "z" * 12000)
        data = os.urandom(1_000_000)
        status, got = self.echo(srv.port, data)
        self.assertTrue(status == 200 and got == data)

    def test_tomcat_killed_mid_response(self):
        # Last in this class: node2 is killed, then started again on the same ports.
        srv = self.start_ajp(target="tomcats", upstreams=self.group())
        session = None
        for _ in range(10):
            node, s, _ = self.node_of(srv.port, "/route.jsp?create=1")
            if node == "node2":
                session = s
                break
        self.assertIsNotNone(session)
        c = self.conn(srv.port)
        c.request("GET", "/stream.jsp?size=100000000&piece=8000&pause=20",
                  headers={"Cookie": f"JSESSIONID={session}"})
        r = c.getresponse()
        self.assertEqual(r.status, 200)
        first = r.read(50_000)
        self.assertEqual(len(first), 50_000)
        self.tomcats["node2"].kill()
        with self.assertRaises((http.client.IncompleteRead, ConnectionError)):
            while r.read(65536):
                pass
        c.close()
        self.wait_for(lambda: "node2" in srv.stderr() or "mid-response" in srv.stderr(),
                      msg="the failure's log line")
        # The pool recovers: node2's sessions fail over to node1 while node2 is down ...
        for _ in range(4):
            node, _, _ = self.node_of(srv.port, "/route.jsp",
                                      headers={"Cookie": f"JSESSIONID={session}"})
            self.assertEqual(node, "node1")
        # ... and go back to node2 once it is up again and its down period is over.
        self.tomcats["node2"].start()
        self.tomcats["node2"].warm_up(["/route.jsp"])
        time.sleep(0.5)

        def back_on_node2():
            return self.node_of(srv.port, "/route.jsp",
                                headers={"Cookie": f"JSESSIONID={session}"})[0] == "node2"
        self.wait_for(back_on_node2, timeout=20, interval=0.5, msg="node2 to serve again")


def ajp_string(text):
    data = text.encode()
    return struct.pack(">H", len(data)) + data + b"\0"


def ajp_packet(payload):
    return b"AB" + struct.pack(">H", len(payload)) + payload


class ContainerBreakingItsContentLengthTest(ServerTestCase):
    """A container that sends more body than its Content-Length said. Tomcat cannot be made to
    (it stops a response at its Content-Length), so sockets play the container: the client must
    get none of the surplus, which it would read as the start of its next response."""

    def container(self, surplus, at_once=False):
        """Answers every connection with 200, Content-Length 5, "hello" (and "extra" when
        `surplus`); `at_once`: the whole response in one send. Returns the port."""
        listener = socket.create_server(("127.0.0.1", 0))
        self.addCleanup(listener.close)
        headers = (bytes([4]) + struct.pack(">H", 200) + ajp_string("OK") + struct.pack(">H", 1) +
                   bytes([0xA0, 0x03]) + ajp_string("5"))
        packets = [ajp_packet(headers)]
        for piece in (b"hello", b"extra") if surplus else (b"hello",):
            packets.append(ajp_packet(bytes([3]) + struct.pack(">H", len(piece)) + piece + b"\0"))
        packets.append(ajp_packet(bytes([5, 1])))

        def answer(conn):
            with conn:
                try:
                    while True:  # one response per request on the connection
                        head = b""
                        while len(head) < 4 or len(head) < 4 + struct.unpack(">H", head[2:4])[0]:
                            more = conn.recv(65536)
                            if not more:
                                return
                            head += more
                        if at_once:
                            conn.sendall(b"".join(packets))
                        else:
                            for packet in packets:
                                conn.sendall(packet)
                except OSError:
                    pass

        self.addCleanup(serve_each_connection(listener, answer))
        return listener.getsockname()[1]

    def get_closing(self, port):
        with socket.create_connection(("127.0.0.1", port), timeout=10) as c:
            c.sendall(b"GET /page HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
            got = b""
            while chunk := c.recv(65536):
                got += chunk
        head, _, body = got.partition(b"\r\n\r\n")
        return head, body

    def start_front(self, target, upstreams=""):
        route = (f"[[site.route]]\nprefix = \"/\"\najp = \"{target}\"\n"
                 f"ajp_secret = \"{SECRET}\"\n")
        return self.start_config(make_config(self.make_root({"index.html": "static"}),
                                             routes=route) + upstreams)

    def test_surplus_body_never_reaches_the_client(self):
        srv = self.start_front(f"ajp://127.0.0.1:{self.container(surplus=True)}")
        head, body = self.get_closing(srv.port)
        # A body this short is gathered before it is sent: the surplus fails it first.
        self.assertTrue(head.startswith(b"HTTP/1.1 502"), head)
        self.assertNotIn(b"extra", body)
        self.wait_for(lambda: "longer than its Content-Length" in srv.stderr(),
                      msg="the failure's log line")

    def test_retry_after_a_surplus_starts_clean(self):
        # The broken response comes in one piece, so it fails before the client has any of it
        # and the retry goes to the good server: none of the first connection's bytes (its
        # END_RESPONSE) may be read as the start of the second's response.
        bad = self.container(surplus=True, at_once=True)
        good = self.container(surplus=False)
        upstreams = ('\n[[upstream]]\nname = "pair"\nbalance = "round_robin"\n'
                     f'[[upstream.server]]\naddress = "127.0.0.1:{bad}"\n'
                     f'[[upstream.server]]\naddress = "127.0.0.1:{good}"\n')
        srv = self.start_front("pair", upstreams)
        for _ in range(4):  # round robin: the bad server first at least once
            head, body = self.get_closing(srv.port)
            self.assertTrue(head.startswith(b"HTTP/1.1 200"), head)
            self.assertEqual(body, b"hello")
        self.assertIn("longer than its Content-Length", srv.stderr())


if __name__ == "__main__":
    harness.main()
