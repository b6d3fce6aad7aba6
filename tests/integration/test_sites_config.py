"""Sites chosen by Host, `-t` config validation (FILE:LINE:COL: error: ...), SIGHUP reload of a
good and a bad config, pid_file."""

import os
import re
import signal
import subprocess
import time

from harness import PEREGRINE_BIN, RawClient, ServerTestCase, main, make_config, q

ERROR_LINE = re.compile(r"^(?P<file>.+?):(?P<line>\d+):(?P<col>\d+): error: (?P<msg>.+)$")


class SitesByHostTest(ServerTestCase):
    def setUp(self):
        super().setUp()
        roots = {}
        for name in ("a", "b", "c", "w"):
            roots[name] = self.make_root({"index.html": f"site {name}\n", f"only-{name}.txt": f"{name}\n"},
                                         name=f"root-{name}")
        text = f"""
listen = ["127.0.0.1:0"]
workers = 1

[[site]]
hosts = ["a.test", "www.a.test"]
root = {q(roots['a'])}
access_log = "off"

[[site]]
hosts = ["b.test"]
root = {q(roots['b'])}
access_log = "off"

[[site]]
hosts = ["*.w.test"]
root = {q(roots['w'])}
access_log = "off"

[[site]]
hosts = ["c.test"]
default = true
root = {q(roots['c'])}
access_log = "off"
"""
        self.srv = self.start_config(text)

    def site_for(self, host, target="/"):
        with RawClient(self.srv.port) as c:
            c.send(f"GET {target} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
            r = c.read_response()
            return r.status, r.body

    def test_by_host(self):
        cases = {
            "a.test": b"site a\n",
            "www.a.test": b"site a\n",
            "b.test": b"site b\n",
            "B.TEST": b"site b\n",
            "b.test:8080": b"site b\n",
            "x.w.test": b"site w\n",
            "c.test": b"site c\n",
            "unknown.test": b"site c\n",
            "127.0.0.1": b"site c\n",
            "w.test": b"site c\n",
        }
        for host, body in cases.items():
            with self.subTest(host=host):
                self.assertEqual(self.site_for(host), (200, body), f"Host: {host}")

    def test_files_stay_in_their_site(self):
        self.assertEqual(self.site_for("a.test", "/only-a.txt"), (200, b"a\n"))
        self.assertEqual(self.site_for("a.test", "/only-b.txt")[0], 404)
        self.assertEqual(self.site_for("b.test", "/only-b.txt"), (200, b"b\n"))

    def test_http10_without_host_gets_default(self):
        with RawClient(self.srv.port) as c:
            c.send(b"GET / HTTP/1.0\r\n\r\n")
            r = c.read_response()
        self.assertEqual((r.status, r.body), (200, b"site c\n"))

    def test_absolute_form_authority_wins(self):
        with RawClient(self.srv.port) as c:
            c.send(b"GET http://a.test/ HTTP/1.1\r\nHost: b.test\r\n\r\n")
            r = c.read_response()
        self.assertEqual((r.status, r.body), (200, b"site a\n"),
                         "absolute-form target: the authority decides the site (RFC 9112 3.2.2)")

    def test_keepalive_switching_hosts(self):
        with RawClient(self.srv.port) as c:
            for host, body in (("a.test", b"site a\n"), ("b.test", b"site b\n"), ("zzz", b"site c\n")):
                r = c.request("GET", "/", host=host)
                self.assertEqual((r.status, r.body), (200, body), host)

    def test_curl_resolve(self):
        r = subprocess.run(["curl", "-s", "--resolve", f"b.test:{self.srv.port}:127.0.0.1",
                            f"http://b.test:{self.srv.port}/"], capture_output=True, timeout=20)
        self.assertEqual(r.stdout, b"site b\n")


class ValidateTest(ServerTestCase):
    def run_t(self, text, name="check.toml"):
        path = self.write_config(text, name)
        r = subprocess.run([PEREGRINE_BIN, "-t", "-c", path], capture_output=True, text=True, timeout=20)
        return path, r

    def errors(self, path, r):
        found = []
        for line in r.stderr.splitlines():
            m = ERROR_LINE.match(line)
            if m:
                self.assertEqual(m.group("file"), path, f"error line names another file: {line}")
                found.append((int(m.group("line")), int(m.group("col")), m.group("msg"), line))
        return found

    def expect_error_at(self, text, line_no, cols, words=()):
        path, r = self.run_t(text)
        self.assertEqual(r.returncode, 1, f"-t on an invalid config must exit 1\nstderr:\n{r.stderr}")
        errs = self.errors(path, r)
        self.assertTrue(errs, f"no 'FILE:LINE:COL: error: MESSAGE' line on stderr:\n{r.stderr}")
        at_line = [e for e in errs if e[0] == line_no]
        self.assertTrue(at_line, f"expected an error at line {line_no}, got:\n{r.stderr}")
        self.assertTrue(any(e[1] in cols for e in at_line),
                        f"expected an error at line {line_no}, column in {sorted(cols)}, got:\n{r.stderr}")
        for w in words:
            self.assertTrue(any(w.lower() in e[2].lower() for e in at_line),
                            f"error at line {line_no} should mention {w!r}:\n{r.stderr}")
        return errs, r

    def base(self):
        root = self.make_root({"index.html": "x"})
        return make_config(root)

    def test_valid_config(self):
        path, r = self.run_t(self.base())
        self.assertEqual(r.returncode, 0, f"stderr:\n{r.stderr}")
        self.assertTrue((r.stdout + r.stderr).strip(), "-t on a valid config printed nothing")
        self.assertNotIn("error", (r.stdout + r.stderr).lower())

    def test_unknown_key(self):
        text = self.base().replace("workers = 1\n", "workers = 1\ncolour = \"red\"\n")
        line = text.splitlines().index('colour = "red"') + 1
        self.expect_error_at(text, line, {1, 10}, words=("colour",))

    def test_wrong_type(self):
        text = self.base().replace("workers = 1\n", 'workers = "four"\n')
        line = text.splitlines().index('workers = "four"') + 1
        self.expect_error_at(text, line, {1, 11}, words=("workers",))

    def test_bad_duration(self):
        root = self.make_root({"index.html": "x"})
        text = make_config(root, limits='header_timeout = "5 parsecs"')
        line = text.splitlines().index('header_timeout = "5 parsecs"') + 1
        self.expect_error_at(text, line, {1, 18})

    def test_route_with_two_matchers(self):
        root = self.make_root({"index.html": "x"})
        routes = '[[site.route]]\nexact = "/a"\nprefix = "/b"\nreturn = 200\n'
        text = make_config(root, routes=routes)
        lines = text.splitlines()
        header = lines.index("[[site.route]]") + 1
        path, r = self.run_t(text)
        self.assertEqual(r.returncode, 1, r.stderr)
        errs = self.errors(path, r)
        self.assertTrue(any(header <= e[0] <= header + 3 for e in errs),
                        f"expected an error within the route table (lines {header}-{header + 3}):\n{r.stderr}")

    def test_invalid_regex(self):
        root = self.make_root({"index.html": "x"})
        routes = '[[site.route]]\nregex = "^/(unclosed"\nreturn = 200\n'
        text = make_config(root, routes=routes)
        line = text.splitlines().index('regex = "^/(unclosed"') + 1
        self.expect_error_at(text, line, set(range(1, 30)))

    def test_toml_syntax_error(self):
        text = self.base().replace("workers = 1\n", "workers = 1\nlisten2 = [\n")
        path, r = self.run_t(text)
        self.assertEqual(r.returncode, 1, r.stderr)
        errs = self.errors(path, r)
        self.assertTrue(errs, f"syntax error not reported as FILE:LINE:COL: error:\n{r.stderr}")

    def test_several_errors_all_reported(self):
        root = self.make_root({"index.html": "x"})
        text = make_config(root, top='colour = "red"', limits='header_timeout = "5 parsecs"')
        l1 = text.splitlines().index('colour = "red"') + 1
        l2 = text.splitlines().index('header_timeout = "5 parsecs"') + 1
        path, r = self.run_t(text)
        self.assertEqual(r.returncode, 1, r.stderr)
        lines = {e[0] for e in self.errors(path, r)}
        self.assertTrue({l1, l2} <= lines, f"expected errors at lines {l1} and {l2}:\n{r.stderr}")

    def test_hint_format(self):
        # A misspelt key has an obvious suggestion; when a hint is given it is "(hint: ...)" at the end.
        text = self.base().replace("workers = 1\n", "wrokers = 1\n")
        path, r = self.run_t(text)
        self.assertEqual(r.returncode, 1, r.stderr)
        errs = self.errors(path, r)
        self.assertTrue(errs, r.stderr)
        for _, _, msg, line in errs:
            if "hint" in msg:
                self.assertRegex(msg, r"\(hint: .+\)$", line)
        wrokers = [e for e in errs if "wrokers" in e[2]]
        self.assertTrue(wrokers, f"no error names the unknown key 'wrokers':\n{r.stderr}")
        self.assertRegex(wrokers[0][2], r"\(hint: .*workers.*\)$", "a misspelt key should get a hint naming the right one")

    def test_missing_file(self):
        r = subprocess.run([PEREGRINE_BIN, "-t", "-c", os.path.join(self.tmp, "nope.toml")],
                           capture_output=True, text=True, timeout=20)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("nope.toml", r.stderr)

    def test_invalid_config_does_not_start(self):
        text = self.base().replace("workers = 1\n", "workers = 1\ncolour = \"red\"\n")
        path = self.write_config(text, "bad.toml")
        p = subprocess.run([PEREGRINE_BIN, "-c", path], capture_output=True, text=True, timeout=20)
        self.assertNotEqual(p.returncode, 0)
        self.assertRegex(p.stderr, re.escape(path) + r":\d+:\d+: error: ")
        self.assertNotIn("listening on", p.stderr)


class ReloadTest(ServerTestCase):
    def config(self, body, extra_route=""):
        root = os.path.join(self.tmp, "www")
        routes = f'[[site.route]]\nexact = "/v"\nreturn = 200\nbody = {q(body)}\n{extra_route}'
        return make_config(root, routes=routes)

    def setUp(self):
        super().setUp()
        self.make_root({"index.html": "index\n"})
        self.srv = self.start_config(self.config("v1"))

    def body_of(self, path="/v"):
        status, _, body = self.get(self.srv.port, path)
        return body if status == 200 else None

    def test_reload_good_config(self):
        self.assertEqual(self.body_of(), b"v1")
        with RawClient(self.srv.port) as kept:
            self.assertEqual(kept.request("GET", "/v").body, b"v1")
            self.write_config(self.config("v2"))
            self.srv.signal(signal.SIGHUP)
            self.wait_for(lambda: self.body_of() == b"v2", timeout=5, msg="the reloaded config to serve v2")
            # Several fetches on new connections: every worker has switched.
            for _ in range(10):
                self.assertEqual(self.body_of(), b"v2")
            # A connection kept alive across the reload still works, and serves the new config.
            r = kept.request("GET", "/v")
            self.assertEqual(r.status, 200)
            self.wait_for(lambda: kept.request("GET", "/v").body == b"v2", timeout=3,
                          msg="a kept-alive connection to pick up the new config")
        self.assertTrue(self.srv.running())

    def test_reload_bad_config_keeps_old(self):
        self.assertEqual(self.body_of(), b"v1")
        stderr_before = self.srv.stderr()
        self.write_config(self.config("v2").replace("workers = 1\n", "workers = 1\ncolour = \"red\"\n"))
        self.srv.signal(signal.SIGHUP)
        self.wait_for(lambda: len(self.srv.stderr()) > len(stderr_before), timeout=5,
                      msg="a log line about the failed reload")
        time.sleep(0.5)
        self.assertTrue(self.srv.running(), "server died on a bad config reload")
        new_log = self.srv.stderr()[len(stderr_before):]
        self.assertIn(self.srv.config_path, new_log, f"the reload error should name the file:\n{new_log}")
        self.assertIn("colour", new_log, new_log)
        for _ in range(5):
            self.assertEqual(self.body_of(), b"v1", "a bad config must leave the old one serving")
        # A later good config still reloads.
        self.write_config(self.config("v3"))
        self.srv.signal(signal.SIGHUP)
        self.wait_for(lambda: self.body_of() == b"v3", timeout=5, msg="v3 after fixing the config")

    def test_reload_adds_route(self):
        self.assertEqual(self.get(self.srv.port, "/added")[0], 404)
        self.write_config(self.config("v1", '[[site.route]]\nexact = "/added"\nreturn = 200\nbody = "new route"\n'))
        self.srv.signal(signal.SIGHUP)
        self.wait_for(lambda: self.body_of("/added") == b"new route", timeout=5, msg="the added route")

    def test_many_reloads_under_traffic(self):
        import threading
        stop = threading.Event()
        failures = []

        def traffic():
            while not stop.is_set():
                try:
                    status, _, body = self.get(self.srv.port, "/v")
                    if status != 200 or not body.startswith(b"v"):
                        failures.append((status, body))
                except Exception as e:  # noqa: BLE001
                    failures.append(repr(e))

        t = threading.Thread(target=traffic)
        t.start()
        try:
            for i in range(10):
                self.write_config(self.config(f"v{i + 10}"))
                self.srv.signal(signal.SIGHUP)
                time.sleep(0.15)
        finally:
            stop.set()
            t.join(10)
        self.assertEqual(failures, [], "requests failed while reloading")
        self.wait_for(lambda: self.body_of() == b"v19", timeout=5, msg="the last reload")


class PidFileTest(ServerTestCase):
    def test_pid_file(self):
        root = self.make_root({"index.html": "x"})
        pid_path = os.path.join(self.tmp, "run", "peregrine.pid")
        os.makedirs(os.path.dirname(pid_path))
        srv = self.start_config(make_config(root, top=f"pid_file = {q(pid_path)}"))
        # Written once the workers run, which may be a moment after the `listening on` line.
        self.wait_for(lambda: os.path.exists(pid_path) and open(pid_path).read().strip(), timeout=2,
                      msg="the pid_file to be written")
        with open(pid_path) as f:
            self.assertEqual(f.read().strip(), str(srv.pid))


if __name__ == "__main__":
    main()
