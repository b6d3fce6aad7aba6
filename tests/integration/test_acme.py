"""ACME (issue 52, first step): real certificates from Debian's pebble through src/acme/'s order
machine, driven by tools/acme-order (the machine on a blocking runner; the server's own wiring
comes later, docs/acme.md).

pebble runs on loopback ports with real validation (no PEBBLE_VA_ALWAYS_VALID): it resolves the
names through pebble-challtestsrv's DNS, which answers 127.0.0.1 for every name, and connects to
acme-order's own HTTP-01 and TLS-ALPN-01 responders on the ports its config names. Its TLS
certificate comes from a test CA made here with the openssl CLI (the Debian package ships none).
Each issued chain is verified with `openssl verify` against pebble's root (/roots/0 on its
management interface).
"""

import json
import os
import socket
import ssl
import stat
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import PEREGRINE_BIN, SANITIZER_MARKERS, main, require_tool  # noqa: E402

ACME_ORDER = os.environ.get("ACME_ORDER_BIN") or os.path.join(os.path.dirname(PEREGRINE_BIN), "acme-order")


def check_clean(test, stderr):
    """acme-order built with sanitizers (ACME_ORDER_BIN) must report nothing, whatever its exit."""
    for marker in SANITIZER_MARKERS:
        test.assertNotIn(marker.decode(), stderr, stderr[-6000:])


def run_acme_order(test, argv, timeout=20):
    result = subprocess.run([ACME_ORDER, *argv], capture_output=True, text=True, timeout=timeout)
    check_clean(test, result.stderr)
    return result


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def free_udp_port():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def openssl(*args, cwd, text=False):
    return subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, text=text).stdout


def wait_port(port, proc, log, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"exited with {proc.returncode}:\n{open(log).read()[-3000:]}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise AssertionError(f"port {port} not listening after {timeout} s:\n{open(log).read()[-3000:]}")


class Pebble:
    """pebble and pebble-challtestsrv (its DNS) on free loopback ports."""

    def __init__(self, tmp, eab=None):
        self.tmp = tmp
        pebble = require_tool("pebble", "Debian package pebble")
        challtestsrv = require_tool("pebble-challtestsrv", "Debian package pebble")
        require_tool("openssl", "Debian package openssl")
        # pebble's own HTTPS certificate, from a CA the clients trust with --ca.
        openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=acme test CA", cwd=tmp)
        openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=127.0.0.1", cwd=tmp)
        with open(os.path.join(tmp, "ext.cnf"), "w") as f:
            f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
        openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
                "-out", "server.pem", "-days", "2", "-extfile", "ext.cnf", cwd=tmp)
        self.ca = os.path.join(tmp, "ca.pem")
        self.port = free_port()
        self.management = free_port()
        self.http_port = free_port()
        self.tls_port = free_port()
        dns = free_udp_port()
        config = {"pebble": {
            "listenAddress": f"127.0.0.1:{self.port}",
            "managementListenAddress": f"127.0.0.1:{self.management}",
            "certificate": os.path.join(tmp, "server.pem"),
            "privateKey": os.path.join(tmp, "server.key"),
            "httpPort": self.http_port,
            "tlsPort": self.tls_port,
            "ocspResponderURL": "",
            "externalAccountBindingRequired": eab is not None,
        }}
        if eab:
            config["pebble"]["externalAccountMACKeys"] = eab
        with open(os.path.join(tmp, "pebble.json"), "w") as f:
            json.dump(config, f)
        self.dns_log = os.path.join(tmp, "challtestsrv.log")
        self.log = os.path.join(tmp, "pebble.log")
        # Every name resolves to 127.0.0.1; no IPv6 answer, so validation comes to our IPv4
        # responders.
        self.dns = subprocess.Popen([challtestsrv, "-dns01", f"127.0.0.1:{dns}", "-http01", "", "-https01", "",
                                     "-tlsalpn01", "", "-management", f"127.0.0.1:{free_port()}",
                                     "-defaultIPv4", "127.0.0.1", "-defaultIPv6", ""],
                                    stdout=open(self.dns_log, "w"), stderr=subprocess.STDOUT)
        env = dict(os.environ, PEBBLE_VA_NOSLEEP="1", PEBBLE_WFE_NONCEREJECT="0")
        env.pop("PEBBLE_VA_ALWAYS_VALID", None)
        self.proc = subprocess.Popen([pebble, "-config", os.path.join(tmp, "pebble.json"),
                                      "-dnsserver", f"127.0.0.1:{dns}"],
                                     env=env, stdout=open(self.log, "w"), stderr=subprocess.STDOUT)
        try:
            wait_port(self.port, self.proc, self.log)
            wait_port(self.management, self.proc, self.log)
        except BaseException:
            self.stop()
            raise
        self.directory = f"https://127.0.0.1:{self.port}/dir"

    def root_pem(self):
        context = ssl.create_default_context(cafile=self.ca)
        with urllib.request.urlopen(f"https://127.0.0.1:{self.management}/roots/0", context=context,
                                    timeout=5) as r:
            return r.read()

    def orders_made(self):
        with open(self.log, errors="replace") as f:
            return f.read().count("POST /order-plz")

    def stop(self):
        for proc in (self.proc, getattr(self, "dns", None)):
            if proc is not None and proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(5)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()


class AcmeAgainstPebble(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        require_tool("acme-order", "cmake --build --preset release (tools/acme-order)", path=ACME_ORDER)
        cls.tmp_obj = tempfile.TemporaryDirectory(prefix="peregrine-acme-")
        cls.tmp = cls.tmp_obj.name
        cls.pebble = Pebble(cls.tmp)
        cls.root = os.path.join(cls.tmp, "root.pem")
        with open(cls.root, "wb") as f:
            f.write(cls.pebble.root_pem())

    @classmethod
    def tearDownClass(cls):
        cls.pebble.stop()
        cls.tmp_obj.cleanup()

    def setUp(self):
        self.state = tempfile.mkdtemp(dir=self.tmp, prefix="state-")

    def order(self, *names, http=True, tls=False, http_port=None, extra=(), pebble=None, timeout=20):
        pebble = pebble or self.pebble
        argv = ["--directory", pebble.directory, "--ca", pebble.ca, "--state", self.state,
                "--email", "admin@example.test", *extra]
        for name in names:
            argv += ["--name", name]
        if http:
            argv += ["--http-port", str(http_port or pebble.http_port)]
        if tls:
            argv += ["--tls-port", str(pebble.tls_port)]
        return run_acme_order(self, argv, timeout)

    def folder(self, name):
        return os.path.join(self.state, "certificates", name)

    def check_issued(self, result, names):
        self.assertEqual(result.returncode, 0, result.stderr)
        folder = self.folder(names[0])
        chain = os.path.join(folder, "chain.pem")
        # The chain verifies against pebble's root, the leaf first and the intermediate after it.
        verify = subprocess.run(["openssl", "verify", "-CAfile", self.root, "-untrusted", chain, chain],
                                capture_output=True, text=True)
        self.assertEqual(verify.returncode, 0, verify.stdout + verify.stderr)
        self.assertIn(": OK", verify.stdout)
        san = openssl("x509", "-in", chain, "-noout", "-ext", "subjectAltName", cwd=folder, text=True)
        for name in names:
            self.assertIn(f"DNS:{name}", san)
        # The key beside it is the certificate's, and only its owner may read it.
        key = os.path.join(folder, "key.pem")
        self.assertEqual(stat.S_IMODE(os.stat(key).st_mode), 0o600)
        self.assertEqual(openssl("x509", "-in", chain, "-noout", "-pubkey", cwd=folder),
                         openssl("pkey", "-in", key, "-pubout", cwd=folder))
        with open(os.path.join(folder, "meta.json")) as f:
            meta = json.load(f)
        self.assertEqual(meta["names"], list(names))
        self.assertGreater(meta["not_after"], time.time())
        self.assertRegex(meta["ari_id"], r"^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$")
        self.assertFalse(os.path.exists(os.path.join(folder, "lock")), "the lock is released")
        self.assertIn("acme-order: issued", result.stderr)

    def test_http01_two_names(self):
        started = time.monotonic()
        result = self.order("a.example.test", "www.example.test")
        elapsed = time.monotonic() - started
        self.check_issued(result, ["a.example.test", "www.example.test"])
        # pebble really fetched the key authorizations from our responder.
        for name in ("a.example.test", "www.example.test"):
            self.assertIn(f"http-01 for {name}: answering token", result.stderr)
        self.assertRegex(result.stderr, r"http-01: GET /\.well-known/acme-challenge/\S+ -> 200 OK")
        self.assertLess(elapsed, 10, result.stderr)
        # The account key was made once (0600) and is reused by the next order.
        account_key = os.path.join(self.state, "accounts", f"127.0.0.1_{self.pebble.port}", "account.key")
        self.assertEqual(stat.S_IMODE(os.stat(account_key).st_mode), 0o600)
        with open(account_key, "rb") as f:
            first = f.read()
        again = self.order("b.example.test")
        self.check_issued(again, ["b.example.test"])
        self.assertNotIn("made a new account key", again.stderr)
        with open(account_key, "rb") as f:
            self.assertEqual(f.read(), first)

    def test_tls_alpn01(self):
        result = self.order("alpn.example.test", http=False, tls=True)
        self.check_issued(result, ["alpn.example.test"])
        self.assertIn("tls-alpn-01: handshake for alpn.example.test", result.stderr)
        self.assertNotIn("http-01", result.stderr)

    def test_rsa_certificate_key(self):
        result = self.order("rsa.example.test", extra=["--key-type", "rsa2048"])
        self.check_issued(result, ["rsa.example.test"])
        text = openssl("x509", "-in", os.path.join(self.folder("rsa.example.test"), "chain.pem"), "-noout",
                       "-text", cwd=self.state, text=True)
        self.assertIn("rsaEncryption", text)

    def test_failed_validation_says_why(self):
        # Our responder listens where pebble does not look: pebble's connection is refused, and
        # the tool says which step, which name and the CA's problem.
        result = self.order("refused.example.test", http_port=free_port())
        self.assertEqual(result.returncode, 1, result.stderr)
        self.assertRegex(result.stderr,
                         r"acme-order: failed: (authorization poll|challenge): the authorization for "
                         r"refused\.example\.test is invalid: http-01: connection: ")
        self.assertFalse(os.path.exists(os.path.join(self.folder("refused.example.test"), "chain.pem")))
        self.assertFalse(os.path.exists(os.path.join(self.folder("refused.example.test"), "lock")))

    def test_rejected_identifier(self):
        # pebble refuses a name that is not a DNS name: newOrder's problem document is shown.
        result = self.order("bad_name.example.test")
        self.assertEqual(result.returncode, 1, result.stderr)
        self.assertRegex(result.stderr, r"acme-order: failed: newOrder: (rejectedIdentifier|malformed): .*HTTP 400")

    def test_a_held_lock_means_another_instance_orders(self):
        folder = self.folder("locked.example.test")
        os.makedirs(folder)
        with open(os.path.join(folder, "lock"), "w") as f:
            f.write(f"other-host:42\n{int(time.time()) + 600}\n")
        orders = self.pebble.orders_made()
        result = self.order("locked.example.test")
        self.assertEqual(result.returncode, 3, result.stderr)
        self.assertIn("is held by other-host:42", result.stderr)
        self.assertEqual(self.pebble.orders_made(), orders, "no order was made")
        # Past its expiry the lock is stale: taken over, said so, and the order goes ahead.
        with open(os.path.join(folder, "lock"), "w") as f:
            f.write(f"other-host:42\n{int(time.time()) - 5}\n")
        result = self.order("locked.example.test")
        self.assertIn("took over the lock of other-host:42", result.stderr)
        self.check_issued(result, ["locked.example.test"])

    def test_two_instances_sharing_the_state_make_one_order(self):
        orders = self.pebble.orders_made()
        argv_common = ["--directory", self.pebble.directory, "--ca", self.pebble.ca, "--state", self.state,
                       "--name", "shared.example.test", "--http-port", str(self.pebble.http_port)]
        procs = [subprocess.Popen([ACME_ORDER, *argv_common], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True) for _ in range(2)]
        outcomes = []
        for p in procs:
            _, err = p.communicate(timeout=20)
            check_clean(self, err)
            outcomes.append((p.returncode, err))
        # One orders; the other finds the lock held (3) or, if it came after, the stored
        # certificate current (0, "nothing to do").
        self.assertEqual(sum("acme-order: issued" in err for _, err in outcomes), 1, outcomes)
        for code, err in outcomes:
            self.assertIn(code, (0, 3), err)
            if "acme-order: issued" not in err:
                self.assertRegex(err, "is held by|nothing to do")
        self.assertEqual(self.pebble.orders_made(), orders + 1, outcomes)

    def test_stored_certificate_is_kept_until_due_or_replaced_when_damaged(self):
        first = self.order("kept.example.test")
        self.check_issued(first, ["kept.example.test"])
        chain = os.path.join(self.folder("kept.example.test"), "chain.pem")
        with open(chain) as f:
            issued = f.read()
        orders = self.pebble.orders_made()
        again = self.order("kept.example.test")
        self.assertEqual(again.returncode, 0, again.stderr)
        self.assertIn("nothing to do", again.stderr)
        self.assertEqual(self.pebble.orders_made(), orders)
        forced = self.order("kept.example.test", extra=["--force"])
        self.check_issued(forced, ["kept.example.test"])
        self.assertEqual(self.pebble.orders_made(), orders + 1)
        with open(chain) as f:
            self.assertNotEqual(f.read(), issued)
        # A damaged chain is reported with its path and what is wrong, then replaced.
        with open(chain, "w") as f:
            f.write(issued[:200])
        damaged = self.order("kept.example.test")
        self.assertIn(f"acme-order: stored certificate: {chain}: certificate 1 of the chain is cut short; "
                      "ordering a new one", damaged.stderr)
        self.check_issued(damaged, ["kept.example.test"])

    def test_damaged_account_key_is_reported_with_its_path(self):
        folder = os.path.join(self.state, "accounts", f"127.0.0.1_{self.pebble.port}")
        os.makedirs(folder)
        with open(os.path.join(folder, "account.key"), "w") as f:
            f.write("-----BEGIN PRIVATE KEY-----\nbroken\n-----END PRIVATE KEY-----\n")
        result = self.order("damaged.example.test")
        self.assertEqual(result.returncode, 1, result.stderr)
        self.assertIn(f"acme-order: account key: {folder}/account.key: not a PEM private key", result.stderr)

    def test_ca_unreachable_and_untrusted(self):
        port = free_port()
        result = run_acme_order(self, ["--directory", f"https://127.0.0.1:{port}/dir", "--ca", self.pebble.ca,
                                       "--state", self.state, "--name", "x.example.test", "--http-port", "1"])
        self.assertEqual(result.returncode, 1, result.stderr)
        self.assertIn(f"acme-order: directory: cannot connect to 127.0.0.1:{port}: Connection refused", result.stderr)
        # pebble's certificate is not trusted by the root store of another CA.
        other_ca = os.path.join(self.tmp, "other-ca.pem")
        if not os.path.exists(other_ca):
            openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                    "-keyout", "other-ca.key", "-out", "other-ca.pem", "-days", "2", "-subj", "/CN=other", cwd=self.tmp)
        result = run_acme_order(self, ["--directory", self.pebble.directory, "--ca", other_ca,
                                       "--state", self.state, "--name", "x.example.test", "--http-port", "1"])
        self.assertEqual(result.returncode, 1, result.stderr)
        self.assertIn("TLS handshake with 127.0.0.1", result.stderr)
        self.assertIn("unable to get local issuer certificate", result.stderr)


class AcmeExternalAccountBinding(unittest.TestCase):
    """A CA that requires External Account Binding (RFC 8555 §7.3.4): pebble's example keys."""

    KEYS = {"kid-1": "zWNDZM6eQGHWpSRTPal5eIUYFTu7EajVIoguysqZ9wG44nMEtx3MUAsUDkMTQ12W"}

    @classmethod
    def setUpClass(cls):
        require_tool("acme-order", "cmake --build --preset release (tools/acme-order)", path=ACME_ORDER)
        cls.tmp_obj = tempfile.TemporaryDirectory(prefix="peregrine-acme-eab-")
        cls.tmp = cls.tmp_obj.name
        cls.pebble = Pebble(cls.tmp, eab=cls.KEYS)

    @classmethod
    def tearDownClass(cls):
        cls.pebble.stop()
        cls.tmp_obj.cleanup()

    def run_order(self, *extra):
        state = tempfile.mkdtemp(dir=self.tmp, prefix="state-")
        return run_acme_order(self, ["--directory", self.pebble.directory, "--ca", self.pebble.ca,
                                     "--state", state, "--name", "eab.example.test", "--http-port",
                                     str(self.pebble.http_port), *extra])

    def test_binding_required_given_and_wrong(self):
        result = self.run_order()
        self.assertEqual(result.returncode, 1, result.stderr)
        self.assertIn("directory: the CA requires External Account Binding", result.stderr)
        result = self.run_order("--eab-kid", "kid-1", "--eab-hmac-key", self.KEYS["kid-1"])
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("acme-order: issued", result.stderr)
        result = self.run_order("--eab-kid", "kid-1", "--eab-hmac-key", "b10lLJs8l1GPIzsLP0s6pMt8O0XVGnfTaCeROxQM")
        self.assertEqual(result.returncode, 1, result.stderr)
        self.assertRegex(result.stderr, r"acme-order: failed: newAccount: \w+: .*HTTP 4\d\d")


if __name__ == "__main__":
    main()
