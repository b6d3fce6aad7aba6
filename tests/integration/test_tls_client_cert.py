"""TLS client certificates (a site's tls.verify_client, docs/tls.md): "on", "optional", "off" and
"optional_no_ca" against a valid certificate, one from another CA, an expired one and none, over
HTTP/1.1 (python ssl, curl) and HTTP/2 (curl); the $ssl_client_* access-log variables; the
421 for a request whose Host names another verifying site than the handshake's SNI; and the
configuration errors. Certificates come from two test CAs made with the openssl CLI.
"""

import json
import os
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import PEREGRINE_BIN, q  # noqa: E402
from test_tls import OPENSSL, TestCA, run, start_env_php  # noqa: E402

CA_CONFIG = """[ca]
default_ca = test
[test]
database = {dir}/ca-index.txt
new_certs_dir = {dir}
serial = {dir}/ca-serial
default_md = sha256
policy = any
copy_extensions = none
[any]
commonName = supplied
organizationName = optional
"""


def client_cert(ca, name, *, expired=False):
    """NAME.crt/NAME.key: a client certificate (clientAuth) for CN=NAME signed by `ca`."""
    key, csr, cert = ca.path(name + ".key"), ca.path(name + ".csr"), ca.path(name + ".crt")
    run([OPENSSL, "req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
         "-keyout", key, "-out", csr, "-subj", f"/O=Peregrine Tests/CN={name}"])
    ext = ca.path(name + ".cext")
    with open(ext, "w") as f:
        f.write("[client]\nextendedKeyUsage=clientAuth\nbasicConstraints=CA:FALSE\n")
    if not expired:
        run([OPENSSL, "x509", "-req", "-in", csr, "-CA", ca.ca_pem, "-CAkey", ca.ca_key,
             "-CAcreateserial", "-out", cert, "-days", "30", "-extfile", ext,
             "-extensions", "client"])
        return cert, key
    # `openssl x509` cannot date a certificate in the past; `openssl ca` can.
    conf = ca.path("ca.cnf")
    with open(conf, "w") as f:
        f.write(CA_CONFIG.format(dir=ca.dir))
    open(ca.path("ca-index.txt"), "w").close()
    with open(ca.path("ca-serial"), "w") as f:
        f.write("1000\n")
    run([OPENSSL, "ca", "-batch", "-config", conf, "-cert", ca.ca_pem, "-keyfile", ca.ca_key,
         "-in", csr, "-out", cert, "-notext", "-startdate", "20200101000000Z",
         "-enddate", "20200201000000Z", "-extfile", ext, "-extensions", "client"])
    return cert, key


FORMAT = ('{"verify":"$ssl_client_verify","s_dn":"$ssl_client_s_dn","i_dn":"$ssl_client_i_dn",'
          '"serial":"$ssl_client_serial","fp":"$ssl_client_fingerprint","status":$status,'
          '"proto":"$server_protocol"}')


class ClientCertCase(harness.ServerTestCase):
    @classmethod
    def setUpClass(cls):
        harness.require_tool("openssl", "openssl")
        harness.require_tool("curl", "curl")
        cls.dir = tempfile.mkdtemp(prefix="peregrine-client-ca-")
        os.makedirs(os.path.join(cls.dir, "other"))
        cls.ca = TestCA(cls.dir)
        cls.other = TestCA(os.path.join(cls.dir, "other"))
        cls.server = cls.ca.leaf("localhost", ["localhost", "a.test", "b.test", "127.0.0.1"])
        cls.alice = client_cert(cls.ca, "alice")
        cls.mallory = client_cert(cls.other, "mallory")
        cls.old = client_cert(cls.ca, "old", expired=True)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, True)

    def tls_keys(self, verify, ca=True, extra=""):
        keys = f"certificate = {q(self.server[0])}, key = {q(self.server[1])}"
        if verify:
            keys += f", verify_client = {q(verify)}"
        if ca:
            keys += f", client_ca = {q(self.ca.ca_pem)}"
        return f"tls = {{ {keys}{extra} }}\n"

    def start(self, verify, ca=True, extra_sites="", log=True):
        root = self.make_root({"index.html": "secret page\n"})
        self.log = os.path.join(self.tmp, "access.log")
        text = (f'listen = [{{ address = "127.0.0.1:0", tls = true }}]\nworkers = 1\n'
                f'[[site]]\nhosts = ["localhost", "a.test"]\ndefault = true\nroot = {q(root)}\n'
                f"access_log = {q(self.log if log else 'off')}\n"
                f"access_log_format = {q(FORMAT)}\n{self.tls_keys(verify, ca)}\n{extra_sites}")
        return self.start_config(text)

    def get(self, port, cert=None, host="localhost", version=ssl.TLSVersion.TLSv1_3):
        """GET / over python ssl (HTTP/1.1): (status, body)."""
        context = ssl.create_default_context(cafile=self.ca.ca_pem)
        context.minimum_version = context.maximum_version = version
        if cert:
            context.load_cert_chain(*cert)
        raw = socket.create_connection(("127.0.0.1", port), timeout=10)
        with context.wrap_socket(raw, server_hostname=host) as sock:
            sock.sendall(f"GET / HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
            data = b""
            while chunk := sock.recv(65536):
                data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        return int(head.split()[1]), body

    def curl(self, port, *args, host="localhost", cert=None):
        argv = ["curl", "-sS", "--max-time", "10", "--cacert", self.ca.ca_pem,
                "--resolve", f"{host}:{port}:127.0.0.1", "-o", "-", "-w", "\n%{http_code} %{http_version}"]
        if cert:
            argv += ["--cert", cert[0], "--key", cert[1]]
        out = subprocess.run(argv + list(args) + [f"https://{host}:{port}/"],
                             capture_output=True, timeout=20)
        self.assertEqual(out.returncode, 0, out.stderr)
        body, _, tail = out.stdout.rpartition(b"\n")
        status, version = tail.decode().split()
        return int(status), version, body

    def log_lines(self, srv, count):
        deadline = time.time() + 5
        while time.time() < deadline:  # lines are flushed once a second
            if os.path.exists(self.log):
                with open(self.log) as f:
                    lines = f.read().splitlines()
                if len(lines) >= count:
                    return [json.loads(line) for line in lines]
            time.sleep(0.1)
        self.fail(f"fewer than {count} access log lines")

    def fingerprint(self, cert):
        out = run([OPENSSL, "x509", "-in", cert, "-noout", "-fingerprint", "-sha1"]).stdout.decode()
        return out.strip().split("=")[1].replace(":", "").lower()

    def serial(self, cert):
        out = run([OPENSSL, "x509", "-in", cert, "-noout", "-serial"]).stdout.decode()
        return out.strip().split("=")[1].lstrip("0") or "0"


class TestVerifyOn(ClientCertCase):
    def test_valid_certificate_is_served_and_logged(self):
        srv = self.start("on")
        for version in (ssl.TLSVersion.TLSv1_3, ssl.TLSVersion.TLSv1_2):
            self.assertEqual(self.get(srv.port, self.alice, version=version),
                             (200, b"secret page\n"))
        line = self.log_lines(srv, 2)[0]
        self.assertEqual(line["verify"], "SUCCESS")
        self.assertEqual(line["s_dn"], "CN=alice,O=Peregrine Tests")
        self.assertEqual(line["i_dn"], "CN=Peregrine Test CA")
        self.assertEqual(line["serial"].lstrip("0"), self.serial(self.alice[0]))
        self.assertEqual(line["fp"], self.fingerprint(self.alice[0]))

    def test_no_certificate_is_400_with_a_log_line(self):
        srv = self.start("on")
        status, _ = self.get(srv.port)
        self.assertEqual(status, 400)
        # The error log line is written by the worker after the response: wait for it.
        self.wait_for(lambda: "client certificate refused (400): no required client certificate "
                      "was sent" in srv.stderr(), msg="the refusal's log line")
        self.assertEqual(self.log_lines(srv, 1)[0],
                         {"verify": "NONE", "s_dn": "-", "i_dn": "-", "serial": "-", "fp": "-",
                          "status": 400, "proto": "HTTP/1.1"})

    def test_certificate_from_another_ca_is_400(self):
        srv = self.start("on")
        self.assertEqual(self.get(srv.port, self.mallory)[0], 400)
        line = self.log_lines(srv, 1)[0]
        self.assertEqual(line["verify"], "FAILED:unable to verify the first certificate")
        self.assertEqual(line["s_dn"], "CN=mallory,O=Peregrine Tests")
        self.wait_for(lambda: "client certificate refused (400): FAILED:" in srv.stderr(),
                      msg="the refusal's log line")

    def test_expired_certificate_is_400(self):
        srv = self.start("on")
        self.assertEqual(self.get(srv.port, self.old)[0], 400)
        self.assertEqual(self.log_lines(srv, 1)[0]["verify"], "FAILED:certificate has expired")

    def test_http2_with_curl(self):
        srv = self.start("on")
        self.assertEqual(self.curl(srv.port, "--http2", cert=self.alice),
                         (200, "2", b"secret page\n"))
        self.assertEqual(self.curl(srv.port, "--http2")[:2], (400, "2"))
        self.assertEqual(self.curl(srv.port, "--http1.1", cert=self.alice)[:2], (200, "1.1"))
        lines = self.log_lines(srv, 3)
        self.assertEqual([(x["verify"], x["status"], x["proto"]) for x in lines],
                         [("SUCCESS", 200, "HTTP/2.0"), ("NONE", 400, "HTTP/2.0"),
                          ("SUCCESS", 200, "HTTP/1.1")])

    def test_acceptable_ca_names_are_sent(self):
        srv = self.start("on")
        out = subprocess.run([OPENSSL, "s_client", "-connect", f"127.0.0.1:{srv.port}",
                              "-servername", "localhost", "-tls1_2"],
                             input=b"", capture_output=True, timeout=20).stdout.decode()
        self.assertIn("Acceptable client certificate CA names", out)
        self.assertIn("CN = Peregrine Test CA", out)

    def test_host_of_another_verifying_site_is_421(self):
        # b.test verifies against the other CA; a handshake made for localhost (verified by the
        # first CA) must not speak for it.
        other = (f'[[site]]\nhosts = ["b.test"]\nroot = {q(self.make_root({"index.html": "b"}, "b"))}\n'
                 f"tls = {{ certificate = {q(self.server[0])}, key = {q(self.server[1])}, "
                 f'verify_client = "on", client_ca = {q(self.other.ca_pem)} }}\n')
        srv = self.start("on", extra_sites=other)
        context = ssl.create_default_context(cafile=self.ca.ca_pem)
        context.load_cert_chain(*self.alice)
        raw = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
        with context.wrap_socket(raw, server_hostname="localhost") as sock:
            sock.sendall(b"GET / HTTP/1.1\r\nHost: b.test\r\nConnection: close\r\n\r\n")
            self.assertIn(b" 421 ", sock.recv(4096).split(b"\r\n")[0] + b" ")
        self.wait_for(lambda: "client certificate refused (421)" in srv.stderr(),
                      msg="the refusal's log line")
        # Its own SNI, its own CA: mallory is welcome there, alice is not.
        self.assertEqual(self.get(srv.port, self.mallory, host="b.test")[0], 200)
        self.assertEqual(self.get(srv.port, self.alice, host="b.test")[0], 400)

    def test_session_never_resumes_into_another_verifying_site(self):
        # A session verified for localhost (the first CA), offered with SNI b.test (the other
        # CA): the site is chosen before the session lookup, whose id context differs, so it is
        # a full handshake and alice's certificate is judged by b.test's CA.
        other = (f'[[site]]\nhosts = ["b.test"]\nroot = {q(self.make_root({"index.html": "b"}, "b"))}\n'
                 f"tls = {{ certificate = {q(self.server[0])}, key = {q(self.server[1])}, "
                 f'verify_client = "on", client_ca = {q(self.other.ca_pem)} }}\n')
        srv = self.start("on", extra_sites=other)
        for version in (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3):
            context = ssl.create_default_context(cafile=self.ca.ca_pem)
            context.minimum_version = context.maximum_version = version
            context.load_cert_chain(*self.alice)
            session = None
            for host, reused, status in (("localhost", False, b"200"), ("localhost", True, b"200"),
                                         ("b.test", False, b"400")):
                raw = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
                with context.wrap_socket(raw, server_hostname=host, session=session) as sock:
                    sock.sendall(f"GET / HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
                                 .encode())
                    data = b""
                    while chunk := sock.recv(65536):
                        data += chunk
                    self.assertEqual(data.split()[1], status, (version, host))
                    self.assertEqual(sock.session_reused, reused, (version, host))
                    if host == "localhost":
                        session = sock.session

    def test_resumed_session_keeps_the_verification(self):
        srv = self.start("on")
        context = ssl.create_default_context(cafile=self.ca.ca_pem)
        context.maximum_version = ssl.TLSVersion.TLSv1_2  # the session is known after connect
        context.load_cert_chain(*self.alice)
        session = None
        for attempt in range(2):
            raw = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
            with context.wrap_socket(raw, server_hostname="localhost", session=session) as sock:
                sock.sendall(b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
                data = b""
                while chunk := sock.recv(65536):
                    data += chunk
                self.assertTrue(data.startswith(b"HTTP/1.1 200"), data[:100])
                self.assertEqual(sock.session_reused, attempt == 1)
                session = sock.session
        self.assertEqual([x["verify"] for x in self.log_lines(srv, 2)], ["SUCCESS", "SUCCESS"])


class TestOtherModes(ClientCertCase):
    def test_optional(self):
        srv = self.start("optional")
        self.assertEqual(self.get(srv.port)[0], 200)
        self.assertEqual(self.get(srv.port, self.alice)[0], 200)
        self.assertEqual(self.get(srv.port, self.mallory)[0], 400)
        self.assertEqual([x["verify"][:7] for x in self.log_lines(srv, 3)],
                         ["NONE", "SUCCESS", "FAILED:"])

    def test_optional_no_ca(self):
        srv = self.start("optional_no_ca", ca=False)
        for cert in (None, self.alice, self.mallory):
            self.assertEqual(self.get(srv.port, cert)[0], 200)
        lines = self.log_lines(srv, 3)
        self.assertEqual([x["verify"][:7] for x in lines], ["NONE", "FAILED:", "FAILED:"])
        self.assertEqual(lines[2]["s_dn"], "CN=mallory,O=Peregrine Tests")

    def test_off_asks_for_nothing(self):
        srv = self.start(None, ca=False)
        self.assertEqual(self.get(srv.port, self.alice)[0], 200)  # the client is never asked
        self.assertEqual(self.log_lines(srv, 1)[0]["verify"], "NONE")
        out = subprocess.run([OPENSSL, "s_client", "-connect", f"127.0.0.1:{srv.port}", "-tls1_2"],
                             input=b"", capture_output=True, timeout=20).stdout.decode()
        self.assertIn("No client certificate CA names sent", out)

    def test_plain_http_has_no_tls_variables(self):
        root = self.make_root({"index.html": "x"})
        log = os.path.join(self.tmp, "plain.log")
        srv = self.start_config(harness.make_config(
            root, access_log=log, site=f"access_log_format = {q(FORMAT)}\n"))
        self.assertEqual(self.get_plain(srv.port), 200)
        self.log = log
        self.assertEqual(self.log_lines(srv, 1)[0]["verify"], "-")

    def get_plain(self, port):
        status, _, _ = self.http(port, "GET", "/")
        return status


class TestFastcgi(ClientCertCase):
    def test_php_sees_mod_ssl_client_variables(self):
        root, fpm = start_env_php(self)
        routes = f'[[site.route]]\nextension = "php"\nfastcgi = {q(fpm.address)}\n'
        text = (f'listen = [{{ address = "127.0.0.1:0", tls = true }}]\nworkers = 1\n'
                f'[[site]]\nhosts = ["localhost"]\nroot = {q(root)}\naccess_log = "off"\n'
                f'{self.tls_keys("optional")}\n{routes}')
        srv = self.start_config(text)
        base = ["curl", "-sS", "--max-time", "10", "--cacert", self.ca.ca_pem,
                f"https://localhost:{srv.port}/env.php"]
        out = subprocess.run(base + ["--cert", self.alice[0], "--key", self.alice[1]],
                             capture_output=True, timeout=20)
        server = json.loads(out.stdout)["server"]
        self.assertEqual(server.get("SSL_CLIENT_VERIFY"), "SUCCESS")
        self.assertEqual(server.get("SSL_CLIENT_S_DN"), "CN=alice,O=Peregrine Tests")
        self.assertEqual(server.get("SSL_CLIENT_I_DN"), "CN=Peregrine Test CA")
        self.assertEqual(server.get("SSL_CLIENT_M_SERIAL").lstrip("0"), self.serial(self.alice[0]))
        with open(self.alice[0]) as f:
            self.assertEqual(server.get("SSL_CLIENT_CERT"), f.read())
        server = json.loads(subprocess.run(base, capture_output=True, timeout=20).stdout)["server"]
        self.assertEqual(server.get("SSL_CLIENT_VERIFY"), "NONE")
        self.assertNotIn("SSL_CLIENT_CERT", server)


class TestConfigErrors(ClientCertCase):
    def check(self, tls, expected, hint):
        root = self.make_root({})
        path = self.write_config(
            f'listen = [{{ address = "127.0.0.1:0", tls = true }}]\n[[site]]\n'
            f'hosts = ["localhost"]\nroot = {q(root)}\n{tls}')
        out = subprocess.run([PEREGRINE_BIN, "-t", "-c", path], capture_output=True, timeout=20)
        err = out.stderr.decode()
        self.assertNotEqual(out.returncode, 0, err)
        self.assertRegex(err, rf"{path}:5:\d+: error: {expected}")
        self.assertIn(hint, err)

    def pair(self):
        return f"certificate = {q(self.server[0])}, key = {q(self.server[1])}"

    def test_verify_without_ca(self):
        self.check(f'tls = {{ {self.pair()}, verify_client = "on" }}',
                   'verify_client = "on" without client_ca', "optional_no_ca")

    def test_missing_ca_file(self):
        self.check(f'tls = {{ {self.pair()}, verify_client = "on", client_ca = "/nonexistent.pem" }}',
                   "cannot read site.tls.client_ca '/nonexistent.pem'", "check the path")

    def test_ca_file_without_certificates(self):
        self.check(f'tls = {{ {self.pair()}, verify_client = "on", client_ca = {q(self.server[1])} }}',
                   "no certificate could be read from", "PEM bundle")

    def test_unknown_mode(self):
        self.check(f'tls = {{ {self.pair()}, verify_client = "yes" }}',
                   'invalid verify_client "yes"', '"optional_no_ca"')

    def test_depth_out_of_range(self):
        self.check(f'tls = {{ {self.pair()}, verify_client = "optional_no_ca", verify_depth = 0 }}',
                   "'site.tls.verify_depth' is 0; it must be between 1 and 100", "")

    def test_verification_without_a_certificate(self):
        self.check(f'tls = {{ verify_client = "optional_no_ca" }}',
                   "client certificates asked for without a certificate", "add certificate and key")

    def test_ca_without_verification_is_a_warning(self):
        root = self.make_root({})
        path = self.write_config(
            f'listen = [{{ address = "127.0.0.1:0", tls = true }}]\n[[site]]\n'
            f'hosts = ["localhost"]\nroot = {q(root)}\n'
            f"tls = {{ {self.pair()}, client_ca = {q(self.ca.ca_pem)} }}")
        out = subprocess.run([PEREGRINE_BIN, "-t", "-c", path], capture_output=True, timeout=20)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("warning: client_ca has no effect while verify_client is off",
                      out.stderr.decode())


if __name__ == "__main__":
    harness.main()
