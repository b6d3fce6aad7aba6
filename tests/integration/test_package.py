"""The Debian package's parts, checked from the source tree against the built binary, without
building a .deb (scripts/check-package.sh does that, with an install into a chroot):

- the systemd unit passes `systemd-analyze verify` and keeps its design (Type=notify, reload by
  SIGHUP, unprivileged with CAP_NET_BIND_SERVICE only);
- the shipped /etc/peregrine/peregrine.toml, and the examples the package generates from
  docs/configuration.md, pass `peregrine -t`; the shipped one serves its welcome page;
- the server reports READY=1, RELOADING=1 and STOPPING=1 to the socket in NOTIFY_SOCKET.
"""

import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import unittest

from harness import PEREGRINE_BIN, REPO, ServerTestCase, main, missing, require_tool

DEBIAN = os.path.join(REPO, "debian")
UNIT = os.path.join(DEBIAN, "peregrine.service")
SYSTEM_UNITS = next((d for d in ("/lib/systemd/system", "/usr/lib/systemd/system")
                     if os.path.exists(os.path.join(d, "multi-user.target"))), None)


def unit_settings():
    settings = {}
    with open(UNIT) as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith(("#", "[")):
                key, _, value = line.partition("=")
                settings.setdefault(key, []).append(value)
    return settings


def localize(text, tmp):
    """The shipped paths moved under `tmp` (which the test creates), and port 80 made port 0, so
    that the file is checked and run without root or the real /var."""
    text = text.replace('"*:80"', '"127.0.0.1:0"').replace('"[::]:80"', '"127.0.0.1:0"')
    text = re.sub(r'"(/(?:var|run|etc)/[^"]*)"', lambda m: '"' + tmp + m.group(1) + '"', text)
    # Both listen addresses became the same one: keep the first.
    return re.sub(r'listen = \["127\.0\.0\.1:0", "127\.0\.0\.1:0"\]', 'listen = ["127.0.0.1:0"]', text)


class UnitTest(unittest.TestCase):
    def test_systemd_analyze_verify_passes(self):
        require_tool("systemd-analyze", "systemd")
        if not SYSTEM_UNITS:
            missing("no systemd units in /lib/systemd/system (systemd)")
        # An offline root holding this system's units, the unit and the binary it runs, so that
        # verify checks the unit as installed (targets it names, ExecStart paths), not this box.
        root = tempfile.mkdtemp(prefix="peregrine-unit-")
        self.addCleanup(shutil.rmtree, root, True)
        units = os.path.join(root, "lib/systemd/system")
        shutil.copytree(SYSTEM_UNITS, units, symlinks=True)
        shutil.copy(UNIT, units)
        os.makedirs(os.path.join(root, "usr/sbin"))
        shutil.copy(PEREGRINE_BIN, os.path.join(root, "usr/sbin/peregrine"))
        # ExecReload's /bin/kill comes from procps, which the package depends on; this machine
        # may not have it, and verify only checks that the file is an executable.
        os.makedirs(os.path.join(root, "bin"))
        with open(os.path.join(root, "bin/kill"), "w") as f:
            f.write("#!/bin/sh\n")
        os.chmod(os.path.join(root, "bin/kill"), 0o755)
        r = subprocess.run(["systemd-analyze", "verify", "--man=no", f"--root={root}",
                            "/lib/systemd/system/peregrine.service"],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual((r.returncode, r.stdout + r.stderr), (0, ""))

    def test_design(self):
        s = unit_settings()
        self.assertEqual(s["Type"], ["notify"])
        self.assertEqual(s["ExecReload"], ["/bin/kill -HUP $MAINPID"])
        with open(os.path.join(DEBIAN, "control")) as f:  # /bin/kill is not in minbase
            self.assertRegex(f.read(), r"(?m)^Depends:.*\bprocps\b")
        self.assertEqual(s["User"], ["www-data"])
        self.assertEqual(s["CapabilityBoundingSet"], ["CAP_NET_BIND_SERVICE"])
        self.assertEqual(s["AmbientCapabilities"], ["CAP_NET_BIND_SERVICE"])
        for key in ("NoNewPrivileges", "ProtectHome", "PrivateTmp"):
            self.assertEqual(s[key], ["yes"], key)
        self.assertEqual(s["ProtectSystem"], ["strict"])
        # The pid file and logs the configuration names are where the unit lets it write.
        with open(os.path.join(DEBIAN, "peregrine.toml")) as f:
            config = f.read()
        self.assertIn('pid_file = "/run/peregrine/', config)
        self.assertIn('error_log = "/var/log/peregrine/', config)
        self.assertEqual((s["RuntimeDirectory"], s["LogsDirectory"]), (["peregrine"], ["peregrine"]))
        # Started as www-data, the server cannot switch users: a `user` key would only warn.
        self.assertNotRegex(config, r"(?m)^user\s*=")
        with open(os.path.join(DEBIAN, "peregrine.logrotate")) as f:
            self.assertIn('kill -USR1 "$(cat /run/peregrine/peregrine.pid)"', f.read())


class ShippedConfigTest(ServerTestCase):
    def check(self, path):
        r = subprocess.run([PEREGRINE_BIN, "-t", "-c", path], capture_output=True, text=True,
                           timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("is valid", r.stdout)

    def prepare(self, text):
        for d in re.findall(r'"(/(?:var|run)/[^"]*)"', text):
            path = self.tmp + d
            os.makedirs(path if not os.path.splitext(d)[1] else os.path.dirname(path),
                        exist_ok=True)
        return localize(text, self.tmp)

    def test_shipped_config_is_valid_and_serves_the_welcome_page(self):
        with open(os.path.join(DEBIAN, "peregrine.toml")) as f:
            text = self.prepare(f.read())
        shutil.copy(os.path.join(DEBIAN, "index.html"), self.tmp + "/var/www/html/index.html")
        path = self.write_config(text)
        self.check(path)
        error_log = self.tmp + "/var/log/peregrine/error.log"
        srv = self.start_argv([PEREGRINE_BIN, "-c", path], log_path=error_log)
        status, _, body = self.get(srv.port, "/")
        self.assertEqual(status, 200)
        self.assertIn(b"Peregrine is serving this machine", body)
        self.stop_ok(srv)
        with open(self.tmp + "/var/log/peregrine/access.log") as f:
            self.assertIn('"GET / HTTP/1.1" 200', f.read())

    def test_generated_examples_are_valid(self):
        out = os.path.join(self.tmp, "generated")
        subprocess.run([os.path.join(REPO, "scripts/gen-package-docs.sh"), "--examples-only", out],
                       check=True, timeout=60)
        names = sorted(os.listdir(os.path.join(out, "examples")))
        self.assertEqual(names, ["tomcat-proxy.toml", "wordpress.toml"])
        for name in names:
            with self.subTest(name):
                with open(os.path.join(out, "examples", name)) as f:
                    self.check(self.write_config(self.prepare(f.read()), name))


class SdNotifyTest(ServerTestCase):
    """What systemd sees of a Type=notify service: the messages sent to NOTIFY_SOCKET."""

    def setUp(self):
        super().setUp()
        with open(PEREGRINE_BIN, "rb") as f:
            if b"READY=1" not in f.read():
                self.skipTest("this binary does not speak sd_notify yet (issue 12: helper ops' "
                              "server_process.cc change)")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.addCleanup(self.sock.close)
        path = os.path.join(self.tmp, "notify.sock")
        self.sock.bind(path)
        self.sock.settimeout(0.2)
        os.environ["NOTIFY_SOCKET"] = path
        self.addCleanup(os.environ.pop, "NOTIFY_SOCKET", None)
        self.messages = []

    def wait_for_message(self, field, timeout=10.0):
        """Collects messages until one has the line `field`; returns that message's fields."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                data = self.sock.recv(4096).decode()
            except socket.timeout:
                continue
            fields = data.split("\n")
            self.messages.append(fields)
            if field in fields:
                return fields
        self.fail(f"no {field} within {timeout}s; got {self.messages}")

    def test_ready_reloading_stopping(self):
        root = self.make_root({"a.txt": b"a"})
        path = self.write_config(f'listen = ["127.0.0.1:0"]\nworkers = 1\n\n[[site]]\n'
                                 f'root = "{root}"\naccess_log = "off"\n')
        srv = self.start_argv([PEREGRINE_BIN, "-c", path])
        self.wait_for_message("READY=1")
        self.assertEqual(self.get(srv.port, "/a.txt")[0], 200)
        srv.proc.send_signal(signal.SIGHUP)
        self.wait_for_message("RELOADING=1")
        self.wait_for_message("READY=1")
        self.assertEqual(self.get(srv.port, "/a.txt")[0], 200)
        srv.proc.send_signal(signal.SIGQUIT)
        self.wait_for_message("STOPPING=1")
        self.assertEqual(srv.wait(10), 0)


if __name__ == "__main__":
    main()
