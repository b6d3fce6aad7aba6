"""Basic authentication from htpasswd files (issue 17, item 4), with the real binary: each hash
kind (bcrypt from `htpasswd -B`, apr1 from `htpasswd -m`, SHA-512 and SHA-256 crypt from
`openssl passwd`, yescrypt from libxcrypt through python3's crypt module), a wrong password, a
missing header, malformed headers, a realm per route, `auth = "off"`, the user reaching php-fpm
as REMOTE_USER, HTTP/2, a reload that re-reads the file, and config errors at file:line:col.
"""

import base64
import json
import os
import signal
import subprocess
import sys
import time
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import phpfpm  # noqa: E402
from harness import PEREGRINE_BIN, ServerTestCase, h2c, main, make_config, q, require_tool  # noqa: E402


def basic(user, password):
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def yescrypt(password):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        import crypt
    return crypt.crypt(password, "$y$j9T$F5Jx5fExrKuPp53xLKQ..1$")


class BasicAuthTestCase(ServerTestCase):
    def setUp(self):
        super().setUp()
        require_tool("htpasswd", "apache2-utils")
        require_tool("openssl", "openssl")
        self.root = self.make_root({"index.html": "home\n", "private/secret.txt": "top secret\n",
                                    "public/open.txt": "open\n"})
        self.users = os.path.join(self.tmp, "users.htpasswd")
        lines = [
            self.htpasswd("-B", "bcrypt", "b-pass"),
            self.htpasswd("-m", "apr1", "a-pass"),
            "sha512:" + self.openssl("-6", "s-pass"),
            "sha256:" + self.openssl("-5", "t-pass"),
            "yes:" + yescrypt("y-pass"),
            "# a comment",
        ]
        with open(self.users, "w") as f:
            f.write("\n".join(lines) + "\n")

    def htpasswd(self, flag, user, password):
        out = subprocess.run(["htpasswd", "-nb", flag, "-C", "5", user, password] if flag == "-B"
                             else ["htpasswd", "-nb", flag, user, password],
                             capture_output=True, check=True, timeout=10).stdout.decode()
        return out.strip()

    def openssl(self, flag, password):
        return subprocess.run(["openssl", "passwd", flag, password], capture_output=True,
                              check=True, timeout=10).stdout.decode().strip()

    def start(self, site="", routes="", top=""):
        text = make_config(self.root, top=top, site=site, routes=routes)
        return self.start_config(h2c(text))

    def get(self, port, path, authorization=None):
        c = self.raw(port)
        headers = {"Authorization": authorization} if authorization is not None else None
        r = c.request("GET", path, headers=headers)
        c.close()
        return r

    def site_auth(self, realm="Staging"):
        return f"auth = {{ htpasswd = {q(self.users)}, realm = {q(realm)} }}\n"

    # ---- each hash kind ----

    def test_each_hash_kind(self):
        srv = self.start(site=self.site_auth())
        for user, password in (("bcrypt", "b-pass"), ("apr1", "a-pass"), ("sha512", "s-pass"),
                               ("sha256", "t-pass"), ("yes", "y-pass")):
            with self.subTest(user=user):
                r = self.get(srv.port, "/index.html", basic(user, password))
                self.assertEqual((r.status, r.body), (200, b"home\n"), r)
                r = self.get(srv.port, "/index.html", basic(user, password + "x"))
                self.assertEqual(r.status, 401, r)

    # ---- refusals ----

    def test_missing_header_is_401_with_the_challenge(self):
        srv = self.start(site=self.site_auth("Staging site"))
        r = self.get(srv.port, "/index.html")
        self.assertEqual(r.status, 401)
        self.assertEqual(r.header("www-authenticate"), 'Basic realm="Staging site", charset="UTF-8"')
        self.assertIn(b"401", r.body)
        self.assertNotIn(b"home", r.body)

    def test_wrong_password_unknown_user_and_malformed_headers(self):
        srv = self.start(site=self.site_auth())
        for value in (basic("bcrypt", "wrong"), basic("nobody", "b-pass"), basic("BCRYPT", "b-pass"),
                      "Basic", "Basic ", "Basic !!!!", "Basic YmNyeXB0", "Bearer abc",
                      "Digest username=\"bcrypt\"", "Basic " + "A" * 3000,
                      "Basic " + base64.b64encode(b"bcrypt").decode(),
                      "Basic " + base64.b64encode(b":b-pass").decode()):
            with self.subTest(value=value[:40]):
                r = self.get(srv.port, "/private/secret.txt", value)
                self.assertEqual(r.status, 401, r)
                self.assertIsNotNone(r.header("www-authenticate"))
                self.assertNotIn(b"top secret", r.body)
        r = self.get(srv.port, "/private/secret.txt", basic("bcrypt", "b-pass"))
        self.assertEqual(r.body, b"top secret\n")

    def test_body_of_a_refused_request_is_consumed(self):
        srv = self.start(site=self.site_auth())
        c = self.raw(srv.port)
        r = c.request("POST", "/index.html", body=b"x" * 5000)
        self.assertEqual(r.status, 401)
        r = c.request("GET", "/index.html", headers={"Authorization": basic("apr1", "a-pass")})
        self.assertEqual(r.status, 200, "the connection stays in step")

    # ---- per route ----

    def test_route_realm_and_off(self):
        other = os.path.join(self.tmp, "admins.htpasswd")
        with open(other, "w") as f:
            f.write(self.htpasswd("-B", "root", "r-pass") + "\n")
        routes = (f'[[site.route]]\nprefix = "/public/"\nauth = "off"\n'
                  f'[[site.route]]\nprefix = "/private/"\n'
                  f'auth = {{ htpasswd = {q(other)}, realm = "Admins" }}\n'
                  '[[site.route]]\nprefix = "/"\n')
        srv = self.start(site=self.site_auth("Site"), routes=routes)
        self.assertEqual(self.get(srv.port, "/public/open.txt").status, 200)
        r = self.get(srv.port, "/private/secret.txt", basic("bcrypt", "b-pass"))
        self.assertEqual(r.status, 401, "the route's file replaces the site's")
        self.assertEqual(r.header("www-authenticate"), 'Basic realm="Admins", charset="UTF-8"')
        self.assertEqual(self.get(srv.port, "/private/secret.txt", basic("root", "r-pass")).status, 200)
        r = self.get(srv.port, "/index.html")
        self.assertEqual(r.header("www-authenticate"), 'Basic realm="Site", charset="UTF-8"')

    def test_http2(self):
        require_tool("curl", "curl")
        srv = self.start(site=self.site_auth())
        url = f"http://127.0.0.1:{srv.port}/index.html"
        out = subprocess.run(["curl", "-sS", "--http2-prior-knowledge", "-o", "/dev/null", "-D", "-", url],
                             capture_output=True, timeout=10, check=True).stdout.decode().lower()
        self.assertTrue(out.startswith("http/2 401"), out)
        self.assertIn('www-authenticate: basic realm="staging", charset="utf-8"', out)
        out = subprocess.run(["curl", "-sS", "--http2-prior-knowledge", "-u", "yes:y-pass", url],
                             capture_output=True, timeout=10, check=True).stdout
        self.assertEqual(out, b"home\n")

    def test_keep_alive_client_is_verified_once(self):
        # bcrypt at cost 12 costs ~200 ms of CPU here: 20 requests on one connection take far less than
        # 20 verifications would, because a success is cached per worker.
        with open(self.users, "w") as f:
            f.write(subprocess.run(["htpasswd", "-nbB", "-C", "12", "slow", "pw"], capture_output=True,
                                   check=True, timeout=30).stdout.decode())
        srv = self.start(site=self.site_auth())
        c = self.raw(srv.port)
        start = time.monotonic()
        first = c.request("GET", "/index.html", headers={"Authorization": basic("slow", "pw")})
        one = time.monotonic() - start
        self.assertEqual(first.status, 200)
        start = time.monotonic()
        for _ in range(20):
            r = c.request("GET", "/index.html", headers={"Authorization": basic("slow", "pw")})
            self.assertEqual(r.status, 200)
        twenty = time.monotonic() - start
        self.assertLess(twenty, one * 5, f"first {one:.3f}s, next twenty {twenty:.3f}s")

    def test_reload_rereads_the_file(self):
        srv = self.start(site=self.site_auth())
        self.assertEqual(self.get(srv.port, "/index.html", basic("new", "n-pass")).status, 401)
        with open(self.users, "a") as f:
            f.write(self.htpasswd("-B", "new", "n-pass") + "\n")
        srv.signal(signal.SIGHUP)
        self.wait_for(lambda: self.get(srv.port, "/index.html", basic("new", "n-pass")).status == 200,
                      timeout=5, msg="the reloaded file accepts the new user")
        # A broken file on reload leaves the old configuration serving.
        with open(self.users, "a") as f:
            f.write("plain:text\n")
        srv.signal(signal.SIGHUP)
        time.sleep(0.5)
        self.assertEqual(self.get(srv.port, "/index.html", basic("new", "n-pass")).status, 200)
        self.wait_for(lambda: "plaintext" in srv.stderr(), timeout=3, msg="the reload error is logged")

    def test_user_in_the_access_log(self):
        log = os.path.join(self.tmp, "access.log")
        text = make_config(self.root, site=self.site_auth(), access_log=log)
        srv = self.start_config(text)
        self.assertEqual(self.get(srv.port, "/index.html", basic("apr1", "a-pass")).status, 200)
        self.assertEqual(self.get(srv.port, "/index.html", basic("apr1", "nope")).status, 401)

        def lines():
            return open(log).read().splitlines() if os.path.exists(log) else []
        self.wait_for(lambda: len(lines()) >= 2, timeout=5, msg="two access log lines")
        self.assertIn(" - apr1 [", lines()[0])
        self.assertIn('" 200 ', lines()[0])
        self.assertIn(" - - [", lines()[1], "a refused user is not logged as authenticated")
        self.assertIn('" 401 ', lines()[1])

    # ---- config errors ----

    def check(self, site):
        path = self.write_config(make_config(self.root, site=site))
        return subprocess.run([PEREGRINE_BIN, "-t", "-c", path], capture_output=True, timeout=10)

    def test_config_errors(self):
        out = self.check(f'auth = {{ htpasswd = {q(os.path.join(self.tmp, "missing"))} }}\n')
        self.assertNotEqual(out.returncode, 0)
        self.assertRegex(out.stderr.decode(), r"peregrine\.toml:\d+:\d+: error: cannot read htpasswd file")
        bad = os.path.join(self.tmp, "bad.htpasswd")
        with open(bad, "w") as f:
            f.write("ok:" + self.openssl("-6", "x") + "\nold:{SHA}5en6G6MezRroT3XKqkdPOmY/BfQ=\n")
        out = self.check(f"auth = {{ htpasswd = {q(bad)} }}\n")
        self.assertNotEqual(out.returncode, 0)
        err = out.stderr.decode()
        self.assertIn("bad.htpasswd:2:5: user 'old' has an unsalted SHA-1 ({SHA}) hash", err)
        self.assertIn("htpasswd -B", err)
        out = self.check('auth = "off"\n')
        self.assertNotEqual(out.returncode, 0)
        self.assertIn("'site.auth' must be a table", out.stderr.decode())


class BasicAuthFastcgiTestCase(ServerTestCase):
    def test_remote_user_reaches_php(self):
        require_tool("htpasswd", "apache2-utils")
        root, _, top = phpfpm.start_for(self, children=1)
        users = os.path.join(self.tmp, "users")
        subprocess.run(["htpasswd", "-cbB", "-C", "5", users, "editor", "e-pass"], check=True,
                       capture_output=True, timeout=10)
        routes = ('[[site.route]]\nextension = "php"\nfastcgi = "php"\n'
                  f'auth = {{ htpasswd = {q(users)} }}\n')
        srv = self.start_config(make_config(root, top=top, routes=routes))
        c = self.raw(srv.port)
        r = c.request("GET", "/env.php", headers={"Authorization": basic("editor", "e-pass")})
        self.assertEqual(r.status, 200, r)
        env = json.loads(r.body)["server"]
        self.assertEqual(env.get("REMOTE_USER"), "editor")
        self.assertEqual(env.get("AUTH_TYPE"), "Basic")
        r = c.request("GET", "/env.php")
        self.assertEqual(r.status, 401)


if __name__ == "__main__":
    main()
