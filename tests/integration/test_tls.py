"""TLS termination: certificates (ECDSA and RSA, SNI), ALPN, resumption, OCSP stapling, reload,
configuration checks, HSTS and redirects, FastCGI's HTTPS=on, static files over TLS, quick mode,
and testssl.sh against the defaults. Real clients only: curl, openssl s_client, python's ssl,
testssl.sh. Certificates come from a test CA made with the openssl CLI.
"""

import hashlib
import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import phpfpm  # noqa: E402
from harness import PEREGRINE_BIN, q  # noqa: E402

OPENSSL = shutil.which("openssl") or "/usr/bin/openssl"


def run(argv, **kwargs):
    return subprocess.run(argv, check=True, capture_output=True, **kwargs)


class TestCA:
    """A CA and leaf certificates signed by it, made once per test class with the openssl CLI."""

    def __init__(self, directory):
        self.dir = directory
        self.ca_key = self.path("ca.key")
        self.ca_pem = self.path("ca.pem")
        run([OPENSSL, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
             "-nodes", "-keyout", self.ca_key, "-out", self.ca_pem, "-days", "30",
             "-subj", "/CN=Peregrine Test CA",
             "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign"])
        self.index = self.path("index.txt")
        open(self.index, "w").close()

    def path(self, name):
        return os.path.join(self.dir, name)

    def leaf(self, name, names, key="ec", days=30, extra_ext=""):
        """Makes NAME.pem (the leaf, then the CA: a chain) and NAME.key; returns their paths."""
        key_path, csr, cert = self.path(name + ".key"), self.path(name + ".csr"), self.path(name + ".crt")
        newkey = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256"] if key == "ec" \
            else ["-newkey", "rsa:2048"]
        run([OPENSSL, "req", "-new", *newkey, "-nodes", "-keyout", key_path, "-out", csr,
             "-subj", "/CN=" + names[0]])
        ext = self.path(name + ".ext")
        with open(ext, "w") as f:
            sans = ",".join(("IP:" if n[0].isdigit() else "DNS:") + n for n in names)
            f.write(f"subjectAltName={sans}\nextendedKeyUsage=serverAuth\n{extra_ext}")
        run([OPENSSL, "x509", "-req", "-in", csr, "-CA", self.ca_pem, "-CAkey", self.ca_key,
             "-CAcreateserial", "-out", cert, "-days", str(days), "-extfile", ext])
        chain = self.path(name + ".pem")
        with open(chain, "wb") as out:
            out.write(open(cert, "rb").read())
            out.write(open(self.ca_pem, "rb").read())
        return chain, key_path

    def ocsp_response(self, name):
        """A DER OCSP response saying NAME's certificate is good, signed by the CA."""
        cert = self.path(name + ".crt")
        serial = run([OPENSSL, "x509", "-in", cert, "-noout", "-serial"]).stdout.decode()
        serial = serial.strip().split("=")[1]
        with open(self.index, "a") as f:
            f.write(f"V\t351231235959Z\t\t{serial}\tunknown\t/CN={name}\n")
        out = self.path(name + ".ocsp")
        run([OPENSSL, "ocsp", "-index", self.index, "-rsigner", self.ca_pem, "-rkey", self.ca_key,
             "-CA", self.ca_pem, "-issuer", self.ca_pem, "-cert", cert, "-respout", out,
             "-ndays", "1"])
        return out


def tls_site(chain, key, extra=""):
    return f"tls = {{ certificate = {q(chain)}, key = {q(key)} {extra} }}\n"


def tls_config(root, site_tls, *, top="", extra_sites="", hosts=("localhost",), routes="",
               listen=None, workers=1, access_log="off", limits=""):
    listen = listen or '[{ address = "127.0.0.1:0", tls = true }]'
    hosts_toml = "[" + ", ".join(q(h) for h in hosts) + "]"
    return (f"listen = {listen}\nworkers = {workers}\n{top}\n[limits]\n{limits}\n\n"
            f"[[site]]\nhosts = {hosts_toml}\ndefault = true\nroot = {q(root)}\n"
            f"access_log = {q(access_log)}\n{site_tls}\n{routes}\n{extra_sites}\n")


class TlsTestCase(harness.ServerTestCase):
    @classmethod
    def setUpClass(cls):
        harness.require_tool("openssl", "openssl")
        harness.require_tool("curl", "curl")
        cls.ca_dir = tempfile.mkdtemp(prefix="peregrine-tls-ca-")
        cls.ca = TestCA(cls.ca_dir)
        cls.ec = cls.ca.leaf("localhost", ["localhost", "a.test", "127.0.0.1"])
        cls.rsa = cls.ca.leaf("localhost-rsa", ["localhost", "a.test", "127.0.0.1"], key="rsa")
        cls.b = cls.ca.leaf("b.test", ["b.test", "*.wild.test"])

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.ca_dir, True)

    def curl(self, port, path, *args, host="localhost"):
        argv = ["curl", "-sS", "--max-time", "10", "--cacert", self.ca.ca_pem,
                "--resolve", f"{host}:{port}:127.0.0.1", *args, f"https://{host}:{port}{path}"]
        return subprocess.run(argv, capture_output=True, timeout=20)

    def s_client(self, port, *args, servername="localhost", stdin=b"", wait=0.0):
        argv = [OPENSSL, "s_client", "-connect", f"127.0.0.1:{port}", "-CAfile", self.ca.ca_pem,
                *args]
        if servername:
            argv += ["-servername", servername]
        if wait:
            # TLS 1.3 tickets arrive after the handshake: keep stdin open a moment.
            proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT)
            time.sleep(wait)
            out, _ = proc.communicate(stdin, timeout=20)
            return out.decode(errors="replace")
        out = subprocess.run(argv, input=stdin, capture_output=True, timeout=20)
        return (out.stdout + out.stderr).decode(errors="replace")

    def subject(self, output):
        m = re.search(r"subject=.*?CN ?= ?([^\s,/]+)", output)
        return m.group(1) if m else None

    def tls_socket(self, port, server_hostname="localhost", rcvbuf=None):
        context = ssl.create_default_context(cafile=self.ca.ca_pem)
        raw = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf:
            raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        raw.settimeout(10)
        raw.connect(("127.0.0.1", port))
        sock = context.wrap_socket(raw, server_hostname=server_hostname)
        self.addCleanup(sock.close)
        return sock

    def read_responses(self, sock, count):
        """Reads `count` Content-Length responses; returns [(head, body)]."""
        data = b""
        out = []
        while len(out) < count:
            while b"\r\n\r\n" not in data:
                chunk = sock.recv(65536)
                if not chunk:
                    raise AssertionError(f"closed after {len(out)} responses")
                data += chunk
            head, data = data.split(b"\r\n\r\n", 1)
            m = re.search(rb"(?i)content-length: (\d+)", head)
            length = int(m.group(1)) if m else 0
            while len(data) < length:
                chunk = sock.recv(65536)
                if not chunk:
                    raise AssertionError("closed inside a body")
                data += chunk
            out.append((head, data[:length]))
            data = data[length:]
        return out

    def start_tls(self, files=None, **kwargs):
        root = self.make_root(files or {"index.html": "hello over tls\n"})
        site_tls = kwargs.pop("site_tls", tls_site(*self.ec))
        return self.start_config(tls_config(root, site_tls, **kwargs)), root


class TestHandshake(TlsTestCase):
    def test_curl_gets_a_page_over_tls(self):
        srv, _ = self.start_tls()
        out = self.curl(srv.port, "/", "-v")
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(out.stdout, b"hello over tls\n")
        self.assertIn(b"ALPN: server accepted h2", out.stderr)
        out = self.curl(srv.port, "/", "-v", "--http1.1")
        self.assertEqual(out.stdout, b"hello over tls\n")
        self.assertIn(b"ALPN: server accepted http/1.1", out.stderr)

    def test_tls13_suite_is_the_servers_choice_aes128_first(self):
        # python's ssl offers OpenSSL's client order, AES-256 first; the server's order wins.
        def negotiated(port):
            ctx = ssl.create_default_context()
            ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
            with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
                with ctx.wrap_socket(raw, server_hostname="localhost") as s:
                    return s.version(), s.cipher()[0]

        srv, _ = self.start_tls()
        self.assertEqual(negotiated(srv.port), ("TLSv1.3", "TLS_AES_128_GCM_SHA256"))
        chosen, _ = self.start_tls(top='[tls]\nciphersuites = "TLS_AES_256_GCM_SHA384"\n')
        self.assertEqual(negotiated(chosen.port), ("TLSv1.3", "TLS_AES_256_GCM_SHA384"))

    def test_alpn_prefers_h2_unless_the_listener_turns_http2_off(self):
        srv, _ = self.start_tls()
        self.assertIn("ALPN protocol: h2", self.s_client(srv.port, "-alpn", "http/1.1,h2"))
        self.assertIn("ALPN protocol: http/1.1", self.s_client(srv.port, "-alpn", "http/1.1"))
        off, _ = self.start_tls(
            listen='[{ address = "127.0.0.1:0", tls = true, http2 = false }]')
        self.assertIn("ALPN protocol: http/1.1", self.s_client(off.port, "-alpn", "h2,http/1.1"))
        self.assertIn("No ALPN negotiated", self.s_client(off.port, "-alpn", "h2"))



    def test_ecdsa_and_rsa_side_by_side(self):
        srv, _ = self.start_tls(site_tls=(
            f"tls = {{ certificates = [{{ certificate = {q(self.ec[0])}, key = {q(self.ec[1])} }},"
            f" {{ certificate = {q(self.rsa[0])}, key = {q(self.rsa[1])} }}] }}\n"))
        ec = self.s_client(srv.port, "-tls1_2", "-cipher", "ECDHE-ECDSA-AES128-GCM-SHA256")
        self.assertIn("Server public key is 256 bit", ec)
        rsa = self.s_client(srv.port, "-tls1_2", "-cipher", "ECDHE-RSA-AES128-GCM-SHA256")
        self.assertIn("Server public key is 2048 bit", rsa)
        for cipher in ("ECDHE-ECDSA-AES128-GCM-SHA256", "ECDHE-RSA-AES128-GCM-SHA256"):
            out = self.curl(srv.port, "/", "--tls-max", "1.2", "--ciphers", cipher)
            self.assertEqual(out.returncode, 0, out.stderr)
            self.assertEqual(out.stdout, b"hello over tls\n")

    def test_only_tls12_and_13(self):
        srv, _ = self.start_tls()
        self.assertIn("Protocol  : TLSv1.2", self.s_client(srv.port, "-tls1_2"))
        self.assertIn("TLSv1.3", self.s_client(srv.port, "-tls1_3"))
        out = self.curl(srv.port, "/", "--tlsv1.1", "--tls-max", "1.1")
        self.assertNotEqual(out.returncode, 0)

    def test_sni_picks_the_site_certificate(self):
        root_b = self.make_root({"index.html": "site b\n"}, name="b")
        srv, _ = self.start_tls(extra_sites=(
            f'[[site]]\nhosts = ["b.test", "*.wild.test"]\nroot = {q(root_b)}\naccess_log = "off"\n'
            + tls_site(*self.b)))
        self.assertEqual(self.subject(self.s_client(srv.port, servername="b.test")), "b.test")
        self.assertEqual(self.subject(self.s_client(srv.port, servername="x.wild.test")), "b.test")
        self.assertEqual(self.subject(self.s_client(srv.port, servername="localhost")), "localhost")
        self.assertEqual(self.subject(self.s_client(srv.port, servername="other.test")), "localhost")
        self.assertEqual(self.subject(self.s_client(srv.port, "-noservername", servername=None)),
                         "localhost")
        out = self.curl(srv.port, "/", host="b.test")
        self.assertEqual(out.stdout, b"site b\n", out.stderr)

    def test_plain_http_to_a_tls_port_logs_nothing_and_serving_goes_on(self):
        srv, _ = self.start_tls()
        for _ in range(5):
            with socket.create_connection(("127.0.0.1", srv.port), timeout=5) as s:
                s.sendall(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
                s.settimeout(5)
                try:
                    while s.recv(4096):
                        pass
                except (ConnectionResetError, socket.timeout):
                    pass
        out = self.curl(srv.port, "/")
        self.assertEqual(out.stdout, b"hello over tls\n")
        log = srv.stderr()
        self.assertNotIn("handshake", log)
        self.assertNotRegex(log, r"\[(error|warn)\]")

    def test_failed_handshakes_are_logged_at_debug(self):
        srv, _ = self.start_tls(top='log_level = "debug"')
        with socket.create_connection(("127.0.0.1", srv.port), timeout=5) as s:
            s.sendall(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
            s.settimeout(5)
            try:
                s.recv(4096)
            except OSError:
                pass
        self.wait_for(lambda: "[debug] TLS handshake failed" in srv.stderr(), msg="debug line")

    def test_handshake_timeout(self):
        srv, _ = self.start_tls(limits='header_timeout = "300ms"')
        with socket.create_connection(("127.0.0.1", srv.port), timeout=5) as s:
            s.sendall(b"\x16\x03\x01\x00")  # the start of a ClientHello, never finished
            s.settimeout(5)
            start = time.monotonic()
            self.assertEqual(s.recv(4096), b"")
            self.assertLess(time.monotonic() - start, 3)


class TestHttpOverTls(TlsTestCase):
    def test_large_file_byte_exact_and_range(self):
        big = os.urandom(3 * 1024 * 1024 + 123)
        srv, root = self.start_tls(files={"big.bin": big, "index.html": "x"})
        out = self.curl(srv.port, "/big.bin")
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(harness.sha256(out.stdout), harness.sha256(big))
        out = self.curl(srv.port, "/big.bin", "-r", "1000000-1000099")
        self.assertEqual(out.stdout, big[1000000:1000100])
        out = self.curl(srv.port, "/big.bin", "-r", "10-19,30-39")
        self.assertIn(big[10:20], out.stdout)
        self.assertIn(big[30:40], out.stdout)

    def test_pipelined_requests(self):
        srv, _ = self.start_tls(files={"a.txt": "A" * 100, "b.txt": "B" * 20000, "index.html": "i"})
        sock = self.tls_socket(srv.port)
        request = b"GET /%s HTTP/1.1\r\nHost: localhost\r\n\r\n"
        sock.sendall(request % b"a.txt" + request % b"b.txt" + request % b"a.txt")
        responses = self.read_responses(sock, 3)
        self.assertEqual([body for _, body in responses], [b"A" * 100, b"B" * 20000, b"A" * 100])

    def test_keep_alive_requests(self):
        srv, _ = self.start_tls()
        sock = self.tls_socket(srv.port)
        for _ in range(3):
            sock.sendall(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
            (head, body), = self.read_responses(sock, 1)
            self.assertIn(b"200 OK", head)
            self.assertEqual(body, b"hello over tls\n")

    def test_slow_client_back_pressure(self):
        big = os.urandom(8 * 1024 * 1024)
        srv, _ = self.start_tls(files={"big.bin": big, "index.html": "x"})
        sock = self.tls_socket(srv.port, rcvbuf=4096)
        sock.sendall(b"GET /big.bin HTTP/1.1\r\nHost: localhost\r\n\r\n")
        time.sleep(1.0)  # the server fills the socket and waits
        self.assertTrue(srv.running())
        (head, body), = self.read_responses(sock, 1)
        self.assertEqual(harness.sha256(body), harness.sha256(big))
        sock.sendall(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
        (_, body), = self.read_responses(sock, 1)
        self.assertEqual(body, b"x")

    def test_timeout_408_goes_out_encrypted(self):
        srv, _ = self.start_tls(limits='header_timeout = "500ms"')
        sock = self.tls_socket(srv.port)
        sock.sendall(b"GET / HTTP/1.1\r\nHost: loc")
        data = b""
        try:
            while True:
                chunk = sock.recv(4096)
                if not chunk:
                    break
                data += chunk
        except (ssl.SSLError, OSError):
            pass
        self.assertIn(b"408", data)

    def test_access_log_records_tls_version_and_cipher(self):
        log = os.path.join(self.tmp, "access.log")
        srv, _ = self.start_tls(top="[tls]\naccess_log_tls = true\n", access_log=log)
        for version in ("--http1.1", "--http2"):
            out = self.curl(srv.port, "/", "--tlsv1.3", version)
            self.assertEqual(out.returncode, 0, out.stderr)
        text = self.wait_for(lambda: os.path.exists(log) and open(log).read().count("\n") == 2 and
                             open(log).read(), timeout=5, msg="two access log lines")
        first, second = text.splitlines(keepends=True)
        self.assertRegex(first, r'"GET / HTTP/1\.1" 200 15 "-" "curl/[^"]*" "TLSv1\.3 TLS_[A-Z0-9_]+"\n')
        self.assertRegex(second, r'"GET / HTTP/2\.0" 200 15 "-" "curl/[^"]*" "TLSv1\.3 TLS_[A-Z0-9_]+"\n')

    def test_hsts_on_tls_only(self):
        root = self.make_root({"index.html": "x"})
        site_tls = (f"tls = {{ certificate = {q(self.ec[0])}, key = {q(self.ec[1])}, "
                    f"hsts = {{ max_age = \"365d\", include_subdomains = true }} }}\n")
        srv = self.start_config(tls_config(
            root, site_tls,
            listen='[{ address = "127.0.0.1:0", tls = true }, "127.0.0.2:0"]'))
        out = self.curl(srv.port, "/", "-D", "-")
        self.assertIn(b"strict-transport-security: max-age=31536000; includeSubDomains",
                      out.stdout.lower().replace(b"includesubdomains", b"includeSubDomains"))
        plain_port = srv.listening_port("127.0.0.2")
        plain = subprocess.run(["curl", "-sS", "-D", "-", f"http://127.0.0.2:{plain_port}/"],
                               capture_output=True, timeout=10)
        self.assertIn(b"200 OK", plain.stdout)
        self.assertNotIn(b"strict-transport-security", plain.stdout.lower())

    def test_redirect_to_https_with_host_and_request_uri(self):
        root = self.make_root({"index.html": "x"})
        srv = self.start_config(
            f'listen = ["127.0.0.1:0"]\nworkers = 1\n[[site]]\nhosts = ["localhost"]\n'
            f'root = {q(root)}\naccess_log = "off"\n'
            f'[[site.route]]\nprefix = "/"\nreturn = 301\nlocation = "https://$host$request_uri"\n')
        status, headers, _ = self.get(srv.port, "/a/b%20c?x=1&y=2",
                                      headers={"Host": "example.com:8080"})
        self.assertEqual(status, 301)
        self.assertEqual(headers["Location"], "https://example.com/a/b%20c?x=1&y=2")


def start_env_php(case):
    """A root holding php/env.php (which prints $_SERVER as JSON) and a php-fpm for it."""
    if not phpfpm.available():
        harness.require_tool("php-fpm8.2", "php8.2-fpm", path=phpfpm.PHP_FPM_BIN)
    root = case.make_root({})
    shutil.copy(os.path.join(harness.HERE, "php", "env.php"), root)
    fpm = phpfpm.PhpFpm(os.path.join(case.tmp, "fpm"), children=2)
    case.addCleanup(fpm.stop)
    fpm.start()
    return root, fpm


class TestFastcgiOverTls(TlsTestCase):
    def test_php_sees_https_on_and_the_tls_port(self):
        root, fpm = start_env_php(self)
        routes = (f'[[site.route]]\nextension = "php"\nfastcgi = {q(fpm.address)}\n'
                  '[[site.route]]\nprefix = "/"\n')
        srv = self.start_config(tls_config(
            root, tls_site(*self.ec), routes=routes,
            listen='[{ address = "127.0.0.1:0", tls = true }, "127.0.0.2:0"]'))
        out = self.curl(srv.port, "/env.php")
        self.assertEqual(out.returncode, 0, out.stderr)
        server = json.loads(out.stdout)["server"]
        self.assertEqual(server.get("HTTPS"), "on")
        self.assertEqual(server.get("REQUEST_SCHEME"), "https")
        self.assertEqual(server.get("SERVER_PORT"), str(srv.port))
        plain_port = srv.listening_port("127.0.0.2")
        plain = subprocess.run(["curl", "-sS", f"http://127.0.0.2:{plain_port}/env.php"],
                               capture_output=True, timeout=10)
        server = json.loads(plain.stdout)["server"]
        self.assertNotIn("HTTPS", server)
        self.assertEqual(server.get("REQUEST_SCHEME"), "http")
        self.assertEqual(server.get("SERVER_PORT"), str(plain_port))


class TestProxyOverTls(TlsTestCase):
    def test_back_end_learns_the_client_used_https(self):
        backend = subprocess.Popen(
            [sys.executable, os.path.join(harness.HERE, "backends", "http_backend.py"),
             "--id", "B", "--port", "0"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
        self.addCleanup(lambda: (backend.kill(), backend.wait(), backend.stdout.close()))
        m = re.match(r"listening on 127\.0\.0\.1:(\d+)", backend.stdout.readline().decode())
        self.assertIsNotNone(m)
        routes = (f'[[site.route]]\nprefix = "/api/"\nproxy = "http://127.0.0.1:{m.group(1)}"\n'
                  'forwarded = true\n')
        srv, _ = self.start_tls(routes=routes)
        out = self.curl(srv.port, "/api/echo")
        self.assertEqual(out.returncode, 0, out.stderr)
        headers = {name.lower(): value for name, value in json.loads(out.stdout)["headers"]}
        self.assertEqual(headers.get("x-forwarded-proto"), "https")
        self.assertIn("proto=https", headers.get("forwarded", ""))


class TestResumption(TlsTestCase):
    def test_session_resumption_tls12_and_13(self):
        srv, _ = self.start_tls()
        for version in ("-tls1_2", "-tls1_3"):
            sess = os.path.join(self.tmp, "sess" + version)
            first = self.s_client(srv.port, version, "-sess_out", sess, wait=0.5)
            self.assertIn("New,", first)
            second = self.s_client(srv.port, version, "-sess_in", sess, wait=0.3)
            self.assertIn("Reused,", second, version)

    def test_a_tls13_resumption_brings_a_new_ticket(self):
        # Clients use a TLS 1.3 ticket once (RFC 8446 C.4): without a new one after resuming,
        # their next connection is a full handshake.
        srv, _ = self.start_tls()
        first, second = (os.path.join(self.tmp, name) for name in ("first", "second"))
        self.s_client(srv.port, "-tls1_3", "-sess_out", first, wait=0.5)
        resumed = self.s_client(srv.port, "-tls1_3", "-sess_in", first, "-sess_out", second,
                                "-msg", wait=0.5)
        self.assertIn("Reused,", resumed)
        self.assertRegex(resumed, r"<<< TLS 1.3, Handshake \[length [0-9a-f]+\], NewSessionTicket")
        self.assertIn("Reused,", self.s_client(srv.port, "-tls1_3", "-sess_in", second, wait=0.3))

    def test_session_cache_without_tickets(self):
        srv, _ = self.start_tls(top='[tls]\ntickets = false\n')
        sess = os.path.join(self.tmp, "sess")
        self.s_client(srv.port, "-tls1_2", "-sess_out", sess)
        self.assertIn("Reused,", self.s_client(srv.port, "-tls1_2", "-sess_in", sess))

    def test_ticket_key_file_shared_by_two_instances(self):
        key_file = os.path.join(self.tmp, "ticket.key")
        with open(key_file, "wb") as f:
            f.write(os.urandom(80))
        top = f"[tls]\nticket_key_files = [{q(key_file)}]\n"
        one, _ = self.start_tls(top=top)
        root = self.make_root({"index.html": "two"}, name="two")
        two = self.start_config(tls_config(root, tls_site(*self.ec), top=top), name="two.toml")
        for version in ("-tls1_2", "-tls1_3"):
            sess = os.path.join(self.tmp, "shared" + version)
            self.s_client(one.port, version, "-sess_out", sess, wait=0.5)
            self.assertIn("Reused,", self.s_client(two.port, version, "-sess_in", sess, wait=0.3),
                          version)
        # A third instance with other keys cannot resume them.
        other = os.path.join(self.tmp, "other.key")
        with open(other, "wb") as f:
            f.write(os.urandom(80))
        root3 = self.make_root({"index.html": "three"}, name="three")
        three = self.start_config(tls_config(root3, tls_site(*self.ec),
                                             top=f"[tls]\nticket_key_files = [{q(other)}]\n"),
                                  name="three.toml")
        sess = os.path.join(self.tmp, "shared-tls1_2")
        self.assertIn("New,", self.s_client(three.port, "-tls1_2", "-sess_in", sess))


class TestOcspAndReload(TlsTestCase):
    def test_ocsp_staple(self):
        response = self.ca.ocsp_response("localhost")
        srv, _ = self.start_tls(site_tls=tls_site(*self.ec, f", ocsp_response = {q(response)}"))
        out = self.s_client(srv.port, "-status")
        self.assertIn("OCSP Response Status: successful", out)
        self.assertIn("Cert Status: good", out)

    def test_sighup_serves_a_new_certificate_and_keeps_connections(self):
        chain = os.path.join(self.tmp, "site.pem")
        key = os.path.join(self.tmp, "site.key")
        shutil.copy(self.ec[0], chain)
        shutil.copy(self.ec[1], key)
        srv, _ = self.start_tls(site_tls=tls_site(chain, key))
        sock = self.tls_socket(srv.port)
        sock.sendall(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
        self.read_responses(sock, 1)
        self.assertEqual(self.subject(self.s_client(srv.port)), "localhost")
        new_chain, new_key = self.ca.leaf("renewed", ["renewed.test", "localhost"])
        shutil.copy(new_chain, chain)
        shutil.copy(new_key, key)
        srv.signal(signal.SIGHUP)
        self.wait_for(lambda: "configuration reloaded" in srv.stderr(), msg="reload")
        self.assertEqual(self.subject(self.s_client(srv.port)), "renewed.test")
        sock.sendall(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
        (head, body), = self.read_responses(sock, 1)
        self.assertEqual(body, b"hello over tls\n")
        self.assertEqual(sock.getpeercert()["subject"][0][0][1], "localhost")


class TestConfigChecks(TlsTestCase):
    def check(self, text):
        path = self.write_config(text)
        return subprocess.run([PEREGRINE_BIN, "-t", "-c", path], capture_output=True, timeout=20,
                              text=True)

    def test_missing_file_mismatched_key_and_bad_chain(self):
        root = self.make_root({"index.html": "x"})
        garbage = os.path.join(self.tmp, "garbage.pem")
        with open(garbage, "w") as f:
            f.write("-----BEGIN CERTIFICATE-----\nnot base64 at all\n-----END CERTIFICATE-----\n")
        sites = (
            f'[[site]]\nhosts = ["m.test"]\nroot = {q(root)}\n'
            f'tls = {{ certificate = "missing.pem", key = {q(self.ec[1])} }}\n'
            f'[[site]]\nhosts = ["k.test"]\nroot = {q(root)}\n'
            f'tls = {{ certificate = {q(self.ec[0])}, key = {q(self.rsa[1])} }}\n'
            f'[[site]]\nhosts = ["g.test"]\nroot = {q(root)}\n'
            f'tls = {{ certificate = {q(garbage)}, key = {q(self.ec[1])} }}\n')
        out = self.check(tls_config(root, tls_site(*self.ec), extra_sites=sites))
        self.assertEqual(out.returncode, 1, out.stderr)
        self.assertRegex(out.stderr, r"peregrine\.toml:\d+:\d+: error: cannot read "
                                     r"site\.tls\.certificate 'missing\.pem': No such file")
        self.assertRegex(out.stderr, r"peregrine\.toml:\d+:\d+: error: the key does not match "
                                     r"the certificate \(hint: ")
        self.assertRegex(out.stderr, r"peregrine\.toml:\d+:\d+: error: no certificate could be "
                                     r"read from the chain file")

    def test_tls_listener_needs_a_certificate(self):
        root = self.make_root({"index.html": "x"})
        out = self.check(tls_config(root, ""))
        self.assertEqual(out.returncode, 1)
        self.assertRegex(out.stderr, r":1:\d+: error: TLS listener '127.0.0.1:0' but no site has "
                                     r"a certificate \(hint: add tls = ")

    def test_certificate_expiring_soon_is_a_warning(self):
        chain, key = self.ca.leaf("soon", ["localhost"], days=5)
        root = self.make_root({"index.html": "x"})
        out = self.check(tls_config(root, tls_site(chain, key)))
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertRegex(out.stderr, r"peregrine\.toml:\d+:\d+: warning: certificate '.*soon\.pem' "
                                     r"expires in [45] day\(s\)")
        self.assertIn("is valid", out.stdout)

    def test_bad_ticket_key_and_cipher_list(self):
        root = self.make_root({"index.html": "x"})
        short = os.path.join(self.tmp, "short.key")
        with open(short, "wb") as f:
            f.write(b"x" * 20)
        out = self.check(tls_config(root, tls_site(*self.ec), top=(
            f'[tls]\nticket_key_files = [{q(short)}]\nciphers = "NOPE-NOTHING"\n')))
        self.assertEqual(out.returncode, 1)
        self.assertIn("holds 20 bytes, not 80 (hint: make one with: openssl rand 80", out.stderr)
        self.assertIn("OpenSSL accepts none of tls.ciphers", out.stderr)


class TestQuickMode(TlsTestCase):
    def test_self_signed_prints_the_fingerprint_s_client_sees(self):
        root = self.make_root({"index.html": "quick tls\n"})
        srv = self.start_argv([PEREGRINE_BIN, "--listen", "127.0.0.1:0", "--root", root,
                               "--workers", "1", "--access-log", "off", "--tls-self-signed"])
        m = re.search(r"SHA-256 fingerprint ([0-9A-F:]{95})", srv.stderr())
        self.assertIsNotNone(m, srv.stderr())
        cert = subprocess.run([OPENSSL, "s_client", "-connect", f"127.0.0.1:{srv.port}"],
                              input=b"", capture_output=True, timeout=20).stdout
        fp = subprocess.run([OPENSSL, "x509", "-noout", "-fingerprint", "-sha256"], input=cert,
                            capture_output=True, timeout=20).stdout.decode()
        self.assertIn(m.group(1), fp)
        out = subprocess.run(["curl", "-sSk", f"https://127.0.0.1:{srv.port}/"],
                             capture_output=True, timeout=20)
        self.assertEqual(out.stdout, b"quick tls\n")

    def test_cert_and_key_files(self):
        root = self.make_root({"index.html": "quick files\n"})
        srv = self.start_argv([PEREGRINE_BIN, "--listen", "127.0.0.1:0", "--root", root,
                               "--workers", "1", "--access-log", "off",
                               "--tls-cert", self.ec[0], "--tls-key", self.ec[1]])
        out = self.curl(srv.port, "/")
        self.assertEqual(out.stdout, b"quick files\n", out.stderr)

    def test_key_without_cert_is_an_error(self):
        out = subprocess.run([PEREGRINE_BIN, "-t", "--tls-key", self.ec[1]], capture_output=True,
                             text=True, timeout=20)
        self.assertEqual(out.returncode, 1)
        self.assertIn("--tls-key needs --tls-cert", out.stderr)


class TestTestssl(TlsTestCase):
    """testssl.sh against the default TLS configuration. Slow (minutes on a busy machine): only
    protocols, server defaults and vulnerabilities, no DNS."""

    def test_no_vulnerability_and_nothing_not_ok(self):
        testssl = harness.require_tool("testssl", "testssl.sh")
        chain, key = self.ca.leaf("testssl", ["localhost", "127.0.0.1"],
                                  extra_ext="crlDistributionPoints=URI:http://127.0.0.1/ca.crl\n")
        response = self.ca.ocsp_response("testssl")
        srv, _ = self.start_tls(site_tls=tls_site(chain, key, f", ocsp_response = {q(response)}"))
        out = subprocess.run(
            [testssl, "--quiet", "--color", "0", "--warnings", "batch", "--openssl", OPENSSL,
             "--nodns", "none", "--add-ca", self.ca.ca_pem, "--fast", "-p", "-S", "-U",
             f"localhost:{srv.port}"],
            capture_output=True, timeout=900, text=True)
        text = out.stdout + out.stderr
        with open(os.path.join(self.tmp, "testssl.txt"), "w") as f:
            f.write(text)
        self.assertIn("Testing vulnerabilities", text)
        self.assertIn("TLS 1.3    offered (OK)", text)
        self.assertRegex(text, r"TLS 1\.1\s+not offered")
        not_ok = [line for line in text.splitlines() if "NOT ok" in line]
        self.assertEqual(not_ok, [], text[-6000:])
        vulnerable = [line for line in text.splitlines()
                      if re.search(r"VULNERABLE|potentially vulnerable", line, re.I)
                      and "not vulnerable" not in line]
        self.assertEqual(vulnerable, [], text[-6000:])



class TestHttp2OverTls(TlsTestCase):
    """ALPN "h2": the TLS session moves from the HTTP/1 connection to an HTTP/2 one."""

    def start_h2(self, **kwargs):
        big = os.urandom(3 * 1024 * 1024)
        srv, root = self.start_tls(files={"index.html": "hello over h2\n", "big.bin": big},
                                   **kwargs)
        return srv, big

    def test_curl_and_nghttp_over_h2(self):
        harness.require_tool("nghttp", "nghttp2-client")
        srv, big = self.start_h2()
        out = self.curl(srv.port, "/index.html", "--http2", "-v")
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(out.stdout, b"hello over h2\n")
        self.assertIn(b"ALPN: server accepted h2", out.stderr)
        self.assertIn(b"< HTTP/2 200", out.stderr)
        out = self.curl(srv.port, "/big.bin", "--http2")  # many DATA frames, pread + SSL_write
        self.assertEqual(hashlib.sha256(out.stdout).hexdigest(), hashlib.sha256(big).hexdigest())
        out = self.curl(srv.port, "/big.bin", "--http2", "-H", "Range: bytes=1000-1999")
        self.assertEqual(out.stdout, big[1000:2000])
        nghttp = subprocess.run(["nghttp", "-n", "-s", f"https://127.0.0.1:{srv.port}/index.html"],
                                capture_output=True, timeout=20)
        self.assertEqual(nghttp.returncode, 0, nghttp.stderr)
        self.assertIn(b"200", nghttp.stdout + nghttp.stderr)

    def test_h2load_over_tls_has_no_errors(self):
        harness.require_tool("h2load", "nghttp2-client")
        srv, _ = self.start_h2()
        out = subprocess.run(["h2load", "-n", "20000", "-c", "20", "-m", "10",
                              f"https://127.0.0.1:{srv.port}/index.html"],
                             capture_output=True, timeout=120)
        text = out.stdout.decode()
        self.assertIn("Application protocol: h2", text)
        self.assertRegex(text, r"requests: 20000 total, 20000 started, 20000 done, 20000 succeeded, "
                               r"0 failed, 0 errored")

    def test_graceful_stop_over_h2_finishes_the_response(self):
        srv, big = self.start_h2()
        proc = subprocess.Popen(["curl", "-sS", "--http2", "--limit-rate", "1M", "--cacert",
                                 self.ca.ca_pem, "--resolve", f"localhost:{srv.port}:127.0.0.1",
                                 f"https://localhost:{srv.port}/big.bin"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        time.sleep(0.5)
        srv.signal(signal.SIGQUIT)
        body, err = proc.communicate(timeout=30)
        self.assertEqual(proc.returncode, 0, err)
        self.assertEqual(len(body), len(big))
        self.stop_ok(srv, sig=signal.SIGQUIT)


if __name__ == "__main__":
    harness.main()
