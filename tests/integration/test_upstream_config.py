"""`peregrine -t` on [[upstream]] groups, fastcgi and proxy routes, and the --fastcgi / --proxy
quick modes: a valid configuration exits 0, every error is printed as FILE:LINE:COL: error: ...
(or <command line>: error: ...) and exits 1, and nothing is bound or contacted."""

import re
import subprocess

from harness import PEREGRINE_BIN, ServerTestCase, main, q

ERROR_LINE = re.compile(r"^(?P<file>.+?):(?P<line>\d+):(?P<col>\d+): error: (?P<msg>.+)$")


class UpstreamConfigCheckTest(ServerTestCase):
    def run_t(self, *argv):
        return subprocess.run([PEREGRINE_BIN, "-t", *argv], capture_output=True, text=True,
                              timeout=20, cwd=self.tmp)

    def positions(self, path, stderr):
        found = []
        for line in stderr.splitlines():
            m = ERROR_LINE.match(line)
            if m:
                self.assertEqual(m.group("file"), path, line)
                found.append((int(m.group("line")), int(m.group("col")), m.group("msg")))
        return found

    def test_valid_file(self):
        root = self.make_root({"index.php": "<?php echo 1;"}, name="wp")
        path = self.write_config(f"""
listen = "127.0.0.1:0"

[[upstream]]
name = "app"
balance = "least_conn"
keepalive = 16
servers = ["127.0.0.1:8080"]
[[upstream.server]]
address = "127.0.0.1:8081"
weight = 3
max_conns = 8
[upstream.health_check]
path = "/health"
status = [200, 299]

[[site]]
root = {q(root)}
[[site.route]]
extension = "php"
fastcgi = "unix:/run/php/php8.2-fpm.sock"
try_files = ["$uri", "/index.php?$args"]
[[site.route]]
prefix = "/api/"
proxy = "http://app/v1/"
request_headers = {{ set = {{ "X-Env" = "test" }} }}
""")
        r = self.run_t("-c", path)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(f"configuration {path} is valid", r.stdout)

    def test_invalid_file_lists_every_error_with_its_position(self):
        root = self.make_root(name="site")
        path = self.write_config(f"""[[upstream]]
name = "app"
balance = "hash"
servers = ["127.0.0.1", "127.0.0.1:8080"]

[[site]]
root = {q(root)}
[[site.route]]
extension = "php"
fastcgi = "ap"
[[site.route]]
prefix = "/api/"
proxy = "https://app"
[[site.route]]
prefix = "/x/"
return = 204
strip_prefix = true
""", name="bad.toml")
        r = self.run_t("-c", path)
        self.assertEqual(r.returncode, 1, r.stderr)
        found = self.positions(path, r.stderr)
        self.assertEqual([(line, col) for line, col, _ in found],
                         [(3, 11), (4, 12), (10, 11), (13, 9), (17, 16)], r.stderr)
        messages = [msg for _, _, msg in found]
        self.assertIn("needs a 'hash_key'", messages[0])
        self.assertIn("has no port", messages[1])
        self.assertIn("no upstream group named 'ap'", messages[2])
        self.assertIn("declared groups: app", messages[2])
        self.assertIn("https://", messages[3])
        self.assertIn("'strip_prefix' needs a 'proxy' route", messages[4])
        self.assertIn(f"configuration {path} has 5 error(s)", r.stderr)

    def test_quick_modes_check(self):
        root = self.make_root(name="php")
        r = self.run_t("--root", root, "--fastcgi", "unix:/run/php/php8.2-fpm.sock")
        self.assertEqual(r.returncode, 0, r.stderr)
        r = self.run_t("--proxy", "http://127.0.0.1:8081", "--proxy", "http://127.0.0.1:8082")
        self.assertEqual(r.returncode, 0, r.stderr)
        r = self.run_t("--root", root, "--proxy", "/api/=http://127.0.0.1:8081")
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_quick_mode_errors_name_the_flag(self):
        r = self.run_t("--fastcgi", "127.0.0.1:9000")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("<command line>: error: --fastcgi needs --root DIR", r.stderr)
        r = self.run_t("--proxy", "https://unix:/run/app.sock:")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("<command line>: error: --proxy: proxy URL 'https://unix:/run/app.sock:' "
                      "asks for TLS over a unix socket", r.stderr)
        r = self.run_t("--proxy", "/api/")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("--proxy: '/api/' has a prefix but no URL", r.stderr)


if __name__ == "__main__":
    main()
