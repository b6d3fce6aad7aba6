"""The admin API's configuration endpoints and its security (issue 14, items 3 and 4; docs/admin.md):
validation errors at their positions (as `peregrine -t` prints them), If-Match (428, 412), a PUT
that adds a route which then answers, an apply whose new listener's port is taken (409, rolled
back, the old file restored and still serving), history and rollback, POST /api/reload; 401
without credentials, login by password (a bcrypt hash made by htpasswd) and by token, the session
cookie on a later connection, a cross-origin POST refused, logout, the login rate limit (429 +
Retry-After, each failure logged with the address), quick mode's 409.
"""

import http.client
import json
import os
import re
import socket
import ssl
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import PEREGRINE_BIN, ServerTestCase, main, make_config, q, require_tool  # noqa: E402

TOKEN = "admin-api-test-token-0123456789abcdef"
PASSWORD = "correct horse battery staple"
ADMIN_RE = re.compile(rb"admin API listening on 127\.0\.0\.1:(\d+)")

NEW_ROUTE = '[[site.route]]\nexact = "/new"\nreturn = 200\nbody = "the new route"\n'
BROKEN = 'workers = "many"\n\n[[site]]\nroot = 5\nbogus_key = 1\n'


class AdminApiTestCase(ServerTestCase):
    def setUp(self):
        super().setUp()
        self.root = self.make_root({"index.html": "index\n"})
        self.token_path = os.path.join(self.tmp, "admin.token")
        with open(self.token_path, "w") as f:
            f.write(TOKEN + "\n")
        os.chmod(self.token_path, 0o600)

    def config_text(self, routes="", listen_extra=(), admin_keys=""):
        admin = ('[admin]\nlisten = "127.0.0.1:0"\n'
                 f"token_file = {q(self.token_path)}\n{admin_keys}\n")
        text = make_config(self.root, top=admin, routes=routes, workers=2)
        if listen_extra:
            listen = ", ".join(q(a) for a in ("127.0.0.1:0",) + tuple(listen_extra))
            text = text.replace('listen = ["127.0.0.1:0"]', f"listen = [{listen}]", 1)
        return text

    def start_admin(self, text):
        srv = self.start_config(text)
        self.wait_for(lambda: ADMIN_RE.search(srv._read(srv.log_path)), msg="admin listener")
        srv.admin_port = int(ADMIN_RE.search(srv._read(srv.log_path)).group(1))
        return srv

    def api(self, srv, method, path, body=None, headers=None, token=TOKEN):
        h = dict(headers or {})
        if token is not None:
            h["Authorization"] = f"Bearer {token}"
        if isinstance(body, str):
            body = body.encode()
        status, headers, data = self.http(srv.admin_port, method, path, headers=h, body=body)
        try:
            parsed = json.loads(data) if data else None
        except ValueError:
            parsed = data
        return status, headers, parsed

    def current(self, srv):
        status, headers, body = self.api(srv, "GET", "/api/config")
        self.assertEqual(status, 200, body)
        self.assertEqual(headers["ETag"], body["etag"])
        return body

    def file_text(self, srv):
        with open(srv.config_path) as f:
            return f.read()


class ConfigEndpoints(AdminApiTestCase):
    def test_get_and_validate_as_peregrine_t(self):
        text = self.config_text()
        srv = self.start_admin(text)
        cur = self.current(srv)
        self.assertEqual(cur["text"], text)
        self.assertEqual(cur["source"], srv.config_path)
        self.assertEqual(cur["generation"], 1)
        self.assertRegex(cur["etag"], r'^"[0-9a-f]{32}"$')

        status, _, body = self.api(srv, "POST", "/api/config/validate", text + NEW_ROUTE)
        self.assertEqual((status, body["valid"], body["errors"]), (200, True, []))

        status, _, body = self.api(srv, "POST", "/api/config/validate", BROKEN)
        self.assertEqual(status, 200)
        self.assertFalse(body["valid"])
        got = [(e["file"], e["line"], e["column"], e["message"]) for e in body["errors"]]
        # The same list `peregrine -t` prints for the same text at the same path.
        os.makedirs(os.path.join(self.tmp, "t"))
        probe = os.path.join(self.tmp, "t", "peregrine.toml")
        with open(probe, "w") as f:
            f.write(BROKEN)
        out = subprocess.run([PEREGRINE_BIN, "-t", "-c", probe], capture_output=True, timeout=20)
        self.assertNotEqual(out.returncode, 0)
        expected = []
        for line in out.stderr.decode().splitlines():
            m = re.match(r"^(.*?):(\d+):(\d+): error: (.*)$", line)
            if m:
                expected.append((srv.config_path, int(m.group(2)), int(m.group(3)), m.group(4)))
        self.assertGreaterEqual(len(expected), 2, out.stderr)
        self.assertEqual(got, expected)
        self.assertEqual(got[0][1:3], (1, 11))  # workers = "many": line 1, the value's column
        # Validation changes nothing.
        self.assertEqual(self.current(srv)["etag"], cur["etag"])

    def test_if_match_required_and_checked(self):
        text = self.config_text()
        srv = self.start_admin(text)
        status, _, body = self.api(srv, "PUT", "/api/config", text + NEW_ROUTE)
        self.assertEqual(status, 428, body)
        self.assertIn("If-Match", body["error"])
        status, _, body = self.api(srv, "PUT", "/api/config", text + NEW_ROUTE,
                                   headers={"If-Match": '"0123456789abcdef0123456789abcdef"'})
        self.assertEqual(status, 412, body)
        self.assertEqual(body["etag"], self.current(srv)["etag"])
        self.assertEqual(self.file_text(srv), text)
        # An invalid text is refused with its errors and changes nothing.
        etag = self.current(srv)["etag"]
        status, _, body = self.api(srv, "PUT", "/api/config", BROKEN, headers={"If-Match": etag})
        self.assertEqual(status, 422, body)
        self.assertTrue(body["errors"])
        self.assertEqual(self.file_text(srv), text)

    def test_put_adds_a_route_that_answers(self):
        text = self.config_text()
        srv = self.start_admin(text)
        self.assertEqual(self.get(srv.port, "/new")[0], 404)
        etag = self.current(srv)["etag"]
        new_text = self.config_text(routes=NEW_ROUTE)
        status, headers, body = self.api(srv, "PUT", "/api/config", new_text,
                                         headers={"If-Match": etag})
        self.assertEqual(status, 200, body)
        self.assertEqual(body["generation"], 2)
        self.assertEqual(headers["ETag"], body["etag"])
        self.assertNotEqual(body["etag"], etag)
        self.assertEqual(body["changed"], ["site localhost: 1 route added"])
        self.assertEqual(body["restart_required"], [])
        self.assertEqual(self.file_text(srv), new_text)
        self.wait_for(lambda: self.get(srv.port, "/new")[0] == 200, msg="the new route")
        self.assertEqual(self.get(srv.port, "/new")[2], b"the new route")
        cur = self.current(srv)
        self.assertEqual((cur["etag"], cur["generation"], cur["text"]), (body["etag"], 2, new_text))
        # The old ETag is now stale.
        status, _, _ = self.api(srv, "PUT", "/api/config", text, headers={"If-Match": etag})
        self.assertEqual(status, 412)
        # No temporary file left beside it; both versions kept in the history directory.
        self.assertEqual([n for n in os.listdir(self.tmp) if n.startswith(".peregrine.toml")], [])
        self.assertEqual(sorted(os.listdir(srv.config_path + ".history")),
                         sorted(e.strip('"') + ".toml" for e in (etag, body["etag"])))

    def test_apply_with_a_taken_port_rolls_back(self):
        text = self.config_text()
        srv = self.start_admin(text)
        taken = socket.socket()
        self.addCleanup(taken.close)
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        etag = self.current(srv)["etag"]
        new_text = self.config_text(routes=NEW_ROUTE, listen_extra=(f"127.0.0.1:{port}",))
        status, _, body = self.api(srv, "PUT", "/api/config", new_text, headers={"If-Match": etag})
        self.assertEqual(status, 409, body)
        self.assertTrue(body["rolled_back"])
        self.assertIn(f"127.0.0.1:{port}", body["error"])
        self.assertIn("in use", body["error"])
        self.assertEqual(self.file_text(srv), text)
        cur = self.current(srv)
        self.assertEqual((cur["etag"], cur["generation"]), (etag, 1))
        self.assertEqual(self.get(srv.port, "/new")[0], 404)
        self.assertEqual(self.get(srv.port, "/")[0], 200)
        self.wait_for(lambda: b"restored" in srv._read(srv.log_path), msg="the restore logged")
        self.assertIn(b"reload failed", srv._read(srv.log_path))

        # Once the port is free, the same text applies, and the new address waits for a restart.
        taken.close()
        status, _, body = self.api(srv, "PUT", "/api/config", new_text, headers={"If-Match": etag})
        self.assertEqual(status, 200, body)
        self.assertEqual(len(body["restart_required"]), 1, body)
        self.assertIn(f"listen 127.0.0.1:{port}: added", body["restart_required"][0])
        self.assertIn("listen: changed", body["changed"])

    def test_history_and_rollback(self):
        text = self.config_text()
        srv = self.start_admin(text)
        v1 = self.current(srv)["etag"]
        status, _, body = self.api(srv, "GET", "/api/config/history")
        self.assertEqual(status, 200)
        self.assertEqual(body["versions"], [{"generation": 1, "etag": v1, "time": None,
                                             "current": True}])
        new_text = self.config_text(routes=NEW_ROUTE)
        status, _, put = self.api(srv, "PUT", "/api/config", new_text, headers={"If-Match": v1})
        self.assertEqual(status, 200, put)
        v2 = put["etag"]
        status, _, body = self.api(srv, "GET", "/api/config/history")
        versions = {v["etag"]: v for v in body["versions"]}
        self.assertEqual(set(versions), {v1, v2})
        self.assertTrue(versions[v2]["current"])
        self.assertFalse(versions[v1]["current"])
        self.assertEqual(versions[v2]["generation"], 2)
        self.assertIsInstance(versions[v1]["time"], int)
        status, headers, body = self.api(srv, "GET", "/api/config/history/" + v1.strip('"'))
        self.assertEqual((status, body["text"], headers["ETag"]), (200, text, v1))
        self.assertEqual(self.api(srv, "GET", "/api/config/history/" + "0" * 32)[0], 404)
        self.assertEqual(self.api(srv, "GET", "/api/config/history/nope")[0], 400)

        self.wait_for(lambda: self.get(srv.port, "/new")[0] == 200, msg="the new route")
        status, _, body = self.api(srv, "POST", "/api/config/rollback", json.dumps({"etag": v1}))
        self.assertEqual(status, 200, body)
        self.assertEqual((body["etag"], body["generation"]), (v1, 3))
        self.assertEqual(body["changed"], ["site localhost: 1 route removed"])
        self.assertEqual(self.file_text(srv), text)
        self.wait_for(lambda: self.get(srv.port, "/new")[0] == 404, msg="the route gone")
        status, _, body = self.api(srv, "POST", "/api/config/rollback", json.dumps({"etag": "x"}))
        self.assertEqual(status, 400)

    def test_reload(self):
        text = self.config_text()
        srv = self.start_admin(text)
        with open(srv.config_path, "w") as f:
            f.write(self.config_text(routes=NEW_ROUTE))
        status, _, body = self.api(srv, "POST", "/api/reload")
        self.assertEqual((status, body["generation"]), (200, 2), body)
        self.wait_for(lambda: self.get(srv.port, "/new")[0] == 200, msg="the new route")
        with open(srv.config_path, "w") as f:
            f.write(BROKEN)
        status, _, body = self.api(srv, "POST", "/api/reload")
        self.assertEqual(status, 409, body)
        self.assertIn("error(s)", body["error"])
        self.assertEqual(body["errors"][0]["line"], 1)
        self.assertEqual(self.get(srv.port, "/new")[0], 200)
        # GET never changes state.
        self.assertEqual(self.api(srv, "GET", "/api/reload")[0], 405)

    def test_quick_mode_has_no_file(self):
        srv = self.start_quick(self.root, extra=["--admin", "127.0.0.1:0"])
        self.wait_for(lambda: ADMIN_RE.search(srv._read(srv.log_path)), msg="admin listener")
        srv.admin_port = int(ADMIN_RE.search(srv._read(srv.log_path)).group(1))
        token = re.search(r"admin API token \(shown once[^)]*\): ([0-9a-f]+)",
                          srv._read(srv.log_path).decode()).group(1)
        for method, path in (("GET", "/api/config"), ("POST", "/api/config/validate"),
                             ("PUT", "/api/config"), ("GET", "/api/config/history"),
                             ("POST", "/api/reload")):
            status, _, body = self.api(srv, method, path, body="", token=token,
                                       headers={"If-Match": "*"})
            self.assertEqual(status, 409, (method, path))
            self.assertIn("no configuration file", body["error"])


class Security(AdminApiTestCase):
    def password_file(self):
        require_tool("htpasswd", "apache2-utils")
        out = subprocess.run(["htpasswd", "-nbB", "admin", PASSWORD], capture_output=True,
                             check=True, timeout=20)
        path = os.path.join(self.tmp, "admin.passwd")
        with open(path, "wb") as f:
            f.write(out.stdout)
        os.chmod(path, 0o600)
        return path

    def login(self, srv, body, headers=None):
        return self.api(srv, "POST", "/api/login", json.dumps(body), headers=headers, token=None)

    def test_401_without_credentials(self):
        srv = self.start_admin(self.config_text())
        for method, path in (("GET", "/api/config"), ("PUT", "/api/config"),
                             ("POST", "/api/config/validate"), ("GET", "/api/config/history"),
                             ("POST", "/api/reload"), ("GET", "/no/such/path")):
            status, headers, body = self.api(srv, method, path, body="x", token=None)
            self.assertEqual(status, 401, (method, path))
            self.assertEqual(headers["WWW-Authenticate"], 'Bearer realm="peregrine admin"')
        status, _, _ = self.api(srv, "GET", "/api/config", token=None,
                                headers={"Cookie": "peregrine_admin=" + "a" * 64})
        self.assertEqual(status, 401)

    def test_password_login_cookie_origin_logout(self):
        srv = self.start_admin(self.config_text(
            admin_keys=f"password_file = {q(self.password_file())}"))
        status, _, body = self.login(srv, {"password": "wrong"})
        self.assertEqual(status, 401, body)
        status, headers, _ = self.login(srv, {"password": PASSWORD})
        self.assertEqual(status, 204)
        cookie = headers["Set-Cookie"]
        m = re.match(r"peregrine_admin=([0-9a-f]{64}); (.*)$", cookie)
        self.assertTrue(m, cookie)
        for attribute in ("HttpOnly", "SameSite=Strict", "Path=/"):
            self.assertIn(attribute, m.group(2).split("; "))
        self.assertNotIn("Secure", cookie)
        jar = {"Cookie": "peregrine_admin=" + m.group(1)}
        # Valid on later connections, whichever worker takes them.
        for _ in range(4):
            self.assertEqual(self.api(srv, "GET", "/api/config", headers=jar, token=None)[0], 200)
        origin = f"http://127.0.0.1:{srv.admin_port}"
        cross = dict(jar, Origin="http://evil.example")
        status, _, body = self.api(srv, "POST", "/api/reload", headers=cross, token=None)
        self.assertEqual(status, 403, body)
        self.assertIn("cross-origin", body["error"])
        status, _, body = self.api(srv, "POST", "/api/reload", headers=jar, token=None)
        self.assertEqual(status, 403, body)  # a cookie alone does not change state
        same = dict(jar, Origin=origin)
        status, _, body = self.api(srv, "POST", "/api/reload", headers=same, token=None)
        self.assertEqual(status, 200, body)
        self.assertEqual(self.api(srv, "POST", "/api/logout", headers=same, token=None)[0], 204)
        self.assertEqual(self.api(srv, "GET", "/api/config", headers=jar, token=None)[0], 401)
        # The token still works beside the password, by header and by login.
        self.assertEqual(self.api(srv, "GET", "/api/config")[0], 200)
        self.assertEqual(self.login(srv, {"token": TOKEN})[0], 204)
        self.assertEqual(self.login(srv, {"token": TOKEN}, {"Origin": "http://evil.example"})[0],
                         403)
        self.assertEqual(self.login(srv, {"user": "x"})[0], 400)
        self.wait_for(lambda: b"admin: login from 127.0.0.1" in srv._read(srv.log_path),
                      msg="the login logged")

    def test_login_rate_limit(self):
        srv = self.start_admin(self.config_text(
            admin_keys=f"password_file = {q(self.password_file())}"))
        for i in range(5):
            self.assertEqual(self.login(srv, {"password": f"guess {i}"})[0], 401, i)
        status, headers, body = self.login(srv, {"password": PASSWORD})
        self.assertEqual(status, 429, body)
        self.assertTrue(1 <= int(headers["Retry-After"]) <= 60, headers["Retry-After"])
        # The error log is written by its own thread: wait for the lines.
        self.wait_for(lambda: b'admin: 429 for "POST /api/login" from 127.0.0.1' in
                      srv._read(srv.log_path), msg="the 429 logged")
        log = srv._read(srv.log_path).decode()
        failures = re.findall(r'\[warn\] admin: 401 for "POST /api/login" from 127\.0\.0\.1: '
                              r"failed login", log)
        self.assertEqual(len(failures), 5, log[-3000:])
        # The bearer token is not rate-limited with the logins.
        self.assertEqual(self.api(srv, "GET", "/api/config")[0], 200)

    def test_bad_password_file_is_a_config_error(self):
        path = os.path.join(self.tmp, "plain.passwd")
        with open(path, "w") as f:
            f.write("admin:plaintext\n")
        os.chmod(path, 0o600)
        text = self.config_text(admin_keys=f"password_file = {q(path)}")
        cfg = self.write_config(text)
        out = subprocess.run([PEREGRINE_BIN, "-t", "-c", cfg], capture_output=True, timeout=20)
        self.assertNotEqual(out.returncode, 0)
        self.assertRegex(out.stderr.decode(),
                         r"peregrine\.toml:\d+:\d+: error: admin\.password_file '.*plain\.passwd' "
                         r"does not hold a bcrypt, yescrypt or SHA-crypt hash")


class AdminOverTls(AdminApiTestCase):
    def certificate(self):
        require_tool("openssl", "openssl")
        cert, key = os.path.join(self.tmp, "admin.pem"), os.path.join(self.tmp, "admin.key")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                        "ec_paramgen_curve:P-256", "-nodes", "-days", "30", "-subj",
                        "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
                        "-keyout", key, "-out", cert], capture_output=True, check=True, timeout=30)
        return cert, key

    def tls_config(self, with_certificate=True):
        admin = ('[admin]\nlisten = "127.0.0.1:0"\ntls = true\n'
                 f"token_file = {q(self.token_path)}\n")
        site = ""
        if with_certificate:
            cert, key = self.certificate()
            site = f"tls = {{ certificate = {q(cert)}, key = {q(key)} }}\n"
        return make_config(self.root, top=admin, site=site, workers=2)

    def test_https_admin_with_the_sites_certificate_and_a_secure_cookie(self):
        srv = self.start_admin(self.tls_config())
        context = ssl.create_default_context(cafile=os.path.join(self.tmp, "admin.pem"))
        conn = http.client.HTTPSConnection("127.0.0.1", srv.admin_port, context=context,
                                           timeout=5)
        try:
            conn.request("POST", "/api/login", body=json.dumps({"token": TOKEN}),
                         headers={"Content-Type": "application/json"})
            resp = conn.getresponse()
            resp.read()
            self.assertEqual(resp.status, 204)
            self.assertIn("Secure", resp.headers["Set-Cookie"].split("; "))
            conn.request("GET", "/api/status", headers={"Authorization": f"Bearer {TOKEN}"})
            resp = conn.getresponse()
            self.assertEqual(resp.status, 200)
            self.assertEqual(json.loads(resp.read())["workers"], 2)
        finally:
            conn.close()
        # Plain HTTP on the TLS port gets no admin answer.
        with self.assertRaises((http.client.HTTPException, OSError)):
            self.api(srv, "GET", "/api/status")

    def test_tls_without_any_certificate_is_a_config_error(self):
        cfg = self.write_config(self.tls_config(with_certificate=False))
        out = subprocess.run([PEREGRINE_BIN, "-t", "-c", cfg], capture_output=True, timeout=20)
        self.assertNotEqual(out.returncode, 0)
        self.assertRegex(out.stderr.decode(), r"peregrine\.toml:\d+:\d+: error: TLS listener "
                                              r"'127\.0\.0\.1:0' but no site has a certificate")


if __name__ == "__main__":
    main()
