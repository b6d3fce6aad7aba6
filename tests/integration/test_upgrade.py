"""Binary upgrade (SIGUSR2) and systemd notifications.

On SIGUSR2 the server starts its own binary again, hands it the listening sockets, and drains
once the new process reports that it serves; a new process that fails leaves the old one
serving. Under keep-alive and new-connection load, five upgrades in a row lose no request and
need no retry: the old process answers each keep-alive connection's next request with
Connection: close and closes idle ones only after a grace period, so no client sees its
connection close under a request (wrk counts that as a read error). HTTP/2 connections get a
GOAWAY naming no last stream, then the final one. sd_notify messages (READY, RELOADING,
STOPPING, MAINPID) arrive at NOTIFY_SOCKET."""

import ctypes
import os
import signal
import socket
import subprocess
import threading
import time

from harness import RawClient, ServerTestCase, build_request, h2c, main, make_config, missing, q

try:
    from test_http2 import NO_ERROR, RawH2
except ImportError as e:  # python3-hpack, python3-hyperframe: only the HTTP/2 case needs them
    RawH2, NO_ERROR, H2_IMPORT_ERROR = None, 0, e

PR_SET_CHILD_SUBREAPER = 36


EXIT_STATUS = {}  # pid -> wait status of the processes this test reaped


def process_gone(pid):
    """True once `pid` has exited (reaping it when it is ours to reap)."""
    if pid in EXIT_STATUS:
        return True
    try:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            EXIT_STATUS[pid] = status
            return True
    except ChildProcessError:
        pass
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return True
    if state not in ("Z", "X"):
        return False
    # It exited between the waitpid above and this read: reap it now, or its status is lost
    # (that race made test_five_upgrades_under_load_lose_nothing fail now and then).
    try:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            EXIT_STATUS[pid] = status
    except ChildProcessError:
        pass
    return True


def become_subreaper(test):
    """New processes outlive the ones that started them; as subreaper the test reaps them."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    test.addCleanup(libc.prctl, PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)


def read_pid(path):
    try:
        with open(path) as f:
            return int(f.read().strip() or 0)
    except (FileNotFoundError, ValueError):
        return 0


class Load:
    """Client threads until stop(): keep-alive ones and new-connection ones. A keep-alive request
    whose connection closed under it is sent once more on a new connection, as HTTP clients do
    for idempotent requests, and that retry is counted in `retried` (which must stay empty: an
    upgrade closes no connection a client may be using); any other failure counts in
    `failures`."""

    def __init__(self, port, keepalive=2, fresh=2):
        self.port = port
        self.done = threading.Event()
        self.lock = threading.Lock()
        self.ok = 0
        self.retried = []
        self.failures = []
        self.threads = [threading.Thread(target=self.run, args=(i < keepalive,))
                        for i in range(keepalive + fresh)]
        for t in self.threads:
            t.start()

    def run(self, keepalive):
        conn = None
        retry = False  # the last request failed on a reused connection: once more, on a new one
        while not self.done.is_set() or retry:
            reused = conn is not None
            try:
                if conn is None:
                    conn = RawClient(self.port, timeout=10)
                headers = {} if keepalive else {"Connection": "close"}
                conn.send(build_request("GET", "/hello.txt", headers))
                try:
                    r = conn.read_final_response()
                except Exception as e:
                    if reused and not conn.buf and not retry:
                        conn.close()
                        conn = None
                        retry = True
                        with self.lock:
                            self.retried.append(f"{e!r} at {time.monotonic():.3f}")
                        continue
                    raise
                retry = False
                if r.status != 200 or r.body != b"hello\n":
                    raise AssertionError(f"unexpected response {r!r}")
                with self.lock:
                    self.ok += 1
                if not keepalive or "close" in r.connection_tokens():
                    conn.close()
                    conn = None
            except Exception as e:  # noqa: BLE001 - every failure is reported
                retry = False
                with self.lock:
                    self.failures.append(f"{'keep-alive' if keepalive else 'new'} connection, "
                                         f"{'reused' if reused else 'first request'}: {e!r}")
                if conn:
                    conn.close()
                conn = None
        if conn:
            conn.close()

    def stop(self):
        self.done.set()
        for t in self.threads:
            t.join(30)


class UpgradeTest(ServerTestCase):
    def setUp(self):
        super().setUp()
        become_subreaper(self)
        self.pid_file = os.path.join(self.tmp, "peregrine.pid")
        self.root = self.make_root({"hello.txt": b"hello\n"})

    def config(self, workers=2, extra=""):
        return make_config(self.root, workers=workers,
                           top=f"pid_file = {q(self.pid_file)}\n{extra}")

    def start(self, workers=2):
        srv = self.start_config(self.config(workers))
        self.wait_for(lambda: read_pid(self.pid_file) == srv.pid, msg="the pid file")
        self.addCleanup(self.stop_current)
        return srv

    def stop_current(self):
        pid = read_pid(self.pid_file)
        if pid and not process_gone(pid):
            os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + 10
            while not process_gone(pid) and time.monotonic() < deadline:
                time.sleep(0.05)

    def upgrade(self, srv):
        """SIGUSR2 to the current process; returns the new pid once the old one is gone."""
        old = read_pid(self.pid_file)
        os.kill(old, signal.SIGUSR2)
        self.wait_for(lambda: read_pid(self.pid_file) not in (0, old), timeout=15,
                      msg=f"a new pid in the pid file after SIGUSR2 to {old}\n{srv.stderr()[-3000:]}")
        self.wait_for(lambda: process_gone(old), timeout=15, msg=f"process {old} to drain and exit")
        if old == srv.pid:
            self.assertEqual(srv.wait(5), 0, srv.stderr()[-3000:])
        return read_pid(self.pid_file)

    def test_five_upgrades_under_load_lose_nothing(self):
        srv = self.start()
        load = Load(srv.port)
        try:
            pids = [srv.pid]
            for _ in range(5):
                time.sleep(0.5)
                pids.append(self.upgrade(srv))
            time.sleep(0.5)
        finally:
            load.stop()
        self.assertEqual(len(set(pids)), 6, pids)
        # Every replaced process drained and exited normally (the first is the harness's child).
        self.assertEqual({pid: EXIT_STATUS.get(pid) for pid in pids[1:-1]},
                         {pid: 0 for pid in pids[1:-1]}, srv.stderr()[-3000:])
        self.assertEqual(load.failures[:5], [], f"{len(load.failures)} failed request(s)")
        self.assertEqual(load.retried[:5], [], f"{len(load.retried)} request(s) sent again")
        self.assertGreater(load.ok, 200)
        log = srv.stderr()
        self.assertEqual(log.count("is serving; this one"), 5, log[-3000:])
        self.assertNotIn("upgrade failed", log)
        # The last process serves on the same port, and stops cleanly.
        self.assertEqual(self.get(srv.port, "/hello.txt")[0], 200)
        last = pids[-1]
        os.kill(last, signal.SIGTERM)
        self.wait_for(lambda: process_gone(last), timeout=10, msg="the last process to stop")
        self.assertFalse(os.path.exists(self.pid_file), "the last process left its pid file")

    def test_wrk_across_upgrades_loses_nothing(self):
        """wrk at full load on keep-alive connections, an upgrade every 2 s: no socket error
        (a connection closed under or between requests is a read error to wrk) and only 2xx."""
        srv = self.start()
        pids = [srv.pid]

        def upgrades():
            for _ in range(5):
                time.sleep(1.5)
                old = read_pid(self.pid_file)
                os.kill(old, signal.SIGUSR2)
                self.wait_for(lambda: read_pid(self.pid_file) not in (0, old), timeout=15,
                              msg=f"a new pid after SIGUSR2 to {old}\n{srv.stderr()[-3000:]}")
                pids.append(read_pid(self.pid_file))

        requests = self.load_losing_nothing(f"http://127.0.0.1:{srv.port}/hello.txt", upgrades,
                                            connections=50, seconds=12)
        self.assertGreater(requests, 1000)
        self.assertEqual(len(set(pids)), 6, pids)
        for pid in pids[:-1]:
            self.wait_for(lambda: process_gone(pid), timeout=15, msg=f"process {pid} to exit")
        self.assertEqual(srv.wait(5), 0, srv.stderr()[-3000:])
        self.assertEqual({pid: EXIT_STATUS.get(pid) for pid in pids[1:-1]},
                         {pid: 0 for pid in pids[1:-1]}, srv.stderr()[-3000:])
        self.assertEqual(srv.stderr().count("is serving; this one"), 5, srv.stderr()[-3000:])

    def test_busy_keepalive_connection_gets_connection_close(self):
        """A connection that keeps sending is never closed between two requests: its next
        request after the hand-over is answered, with Connection: close, and then it ends."""
        srv = self.start()
        c = RawClient(srv.port, timeout=10)
        self.addCleanup(c.close)
        c.send(build_request("GET", "/hello.txt"))
        self.assertEqual(c.read_final_response().status, 200)
        srv.signal(signal.SIGUSR2)
        closing = None
        deadline = time.monotonic() + 15
        while closing is None and time.monotonic() < deadline:
            time.sleep(0.1)  # well inside the idle grace (1 s)
            c.send(build_request("GET", "/hello.txt"))
            r = c.read_final_response()
            self.assertEqual((r.status, r.body), (200, b"hello\n"))
            if "close" in r.connection_tokens():
                closing = r
        self.assertIsNotNone(closing, "no Connection: close within 15 s of SIGUSR2")
        self.assertIn("is serving; this one", srv.stderr())
        self.assertFalse(c._fill(5), "the connection stays open after Connection: close")
        self.assertEqual(srv.wait(10), 0, srv.stderr()[-3000:])

    def test_http2_goaway_in_two_steps(self):
        """RFC 9113 6.8: first a GOAWAY naming no last stream, so that a stream the client sends
        before it reads it is still served; the final GOAWAY names that stream; then the close."""
        if RawH2 is None:
            missing(f"missing module: {H2_IMPORT_ERROR.name} (python3-hpack, python3-hyperframe)")
        srv = self.start_config(h2c(self.config()))
        self.wait_for(lambda: read_pid(self.pid_file) == srv.pid, msg="the pid file")
        self.addCleanup(self.stop_current)
        c = RawH2(srv.port)
        self.addCleanup(c.close)
        c.send(c.get(1, "/hello.txt"))
        self.assertEqual(c.response(1)[1], b"hello\n")
        srv.signal(signal.SIGUSR2)
        first = c.goaway(timeout=15)
        self.assertIsNotNone(first, srv.stderr()[-3000:])
        self.assertEqual((first.error_code, first.last_stream_id), (NO_ERROR, 2**31 - 1))
        c.send(c.get(3, "/hello.txt"))
        headers, body, rst = c.response(3)
        self.assertEqual((headers.get(":status"), body, rst), ("200", b"hello\n", None))
        final = c.goaway(timeout=5)
        self.assertIsNotNone(final)
        self.assertEqual((final.error_code, final.last_stream_id), (NO_ERROR, 3))
        self.assertTrue(c.closed(timeout=5))
        self.assertEqual(srv.wait(10), 0, srv.stderr()[-3000:])

    def test_failing_new_binary_leaves_the_old_one_serving(self):
        srv = self.start()
        with open(srv.config_path, "a") as f:
            f.write("\nthis is not toml\n")
        srv.signal(signal.SIGUSR2)
        self.wait_for(lambda: "upgrade failed" in srv.stderr(), timeout=15,
                      msg="the old process to report the failed upgrade")
        self.assertIn("exited before serving", srv.stderr())
        self.assertTrue(srv.running())
        self.assertEqual(read_pid(self.pid_file), srv.pid)
        for _ in range(20):
            self.assertEqual(self.get(srv.port, "/hello.txt")[0], 200)
        # Fixed, the next upgrade succeeds.
        with open(srv.config_path, "w") as f:
            f.write(self.config())
        new = self.upgrade(srv)
        self.assertNotEqual(new, srv.pid)
        self.assertEqual(self.get(srv.port, "/hello.txt")[0], 200)

    def test_upgrade_to_fewer_and_more_workers(self):
        """Handed-over sockets are never closed: a new process with fewer workers polls several
        per worker; one with more binds extra sockets into the same group."""
        srv = self.start(workers=3)
        for workers in (1, 4):
            with open(srv.config_path, "w") as f:
                f.write(self.config(workers))
            self.upgrade(srv)
            for _ in range(20):
                self.assertEqual(self.get(srv.port, "/hello.txt")[0], 200)
        self.assertNotIn("no longer in the configuration", srv.stderr())

    def test_unix_socket_is_handed_over(self):
        path = os.path.join(self.tmp, "p.sock")
        srv = self.start_config(self.config().replace(
            'listen = ["127.0.0.1:0"]', f'listen = ["127.0.0.1:0", {q("unix:" + path)}]'))
        self.wait_for(lambda: read_pid(self.pid_file) == srv.pid, msg="the pid file")
        self.addCleanup(self.stop_current)
        inode = os.stat(path).st_ino
        self.upgrade(srv)
        self.assertEqual(os.stat(path).st_ino, inode, "the socket file was replaced")
        self.assertIn("(handed over)", srv.stderr())
        r = subprocess.run(["curl", "-sS", "--unix-socket", path, "http://localhost/hello.txt"],
                           capture_output=True, timeout=10)
        self.assertEqual(r.stdout, b"hello\n", r.stderr)


class NotifyTest(ServerTestCase):
    def setUp(self):
        super().setUp()
        become_subreaper(self)
        path = os.path.join(self.tmp, "notify.sock")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(path)
        self.sock.settimeout(10)
        self.addCleanup(self.sock.close)
        os.environ["NOTIFY_SOCKET"] = path
        self.addCleanup(os.environ.pop, "NOTIFY_SOCKET", None)

    def expect(self, *fields):
        """The next message; it must contain every field ("READY=1", "RELOADING=1", ...)."""
        data = self.sock.recv(4096).decode()
        lines = data.split("\n")
        for field in fields:
            self.assertIn(field, lines, data)
        return dict(line.split("=", 1) for line in lines if "=" in line)

    def test_ready_reload_upgrade_stop(self):
        root = self.make_root({"hello.txt": b"hello\n"})
        pid_file = os.path.join(self.tmp, "p.pid")
        srv = self.start_config(make_config(root, top=f"pid_file = {q(pid_file)}"))
        self.assertEqual(self.expect("READY=1")["MAINPID"], str(srv.pid))
        before = time.clock_gettime(time.CLOCK_MONOTONIC)
        srv.signal(signal.SIGHUP)
        fields = self.expect("RELOADING=1")
        usec = int(fields["MONOTONIC_USEC"])
        self.assertLess(abs(usec / 1e6 - before), 5)
        self.expect("READY=1")
        srv.signal(signal.SIGUSR2)
        new = int(self.expect()["MAINPID"])
        self.assertNotEqual(new, srv.pid)
        self.assertEqual(srv.wait(10), 0)
        self.assertEqual(self.get(srv.port, "/hello.txt")[0], 200)
        os.kill(new, signal.SIGTERM)
        self.expect("STOPPING=1")
        deadline = time.monotonic() + 10
        while not process_gone(new) and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertTrue(process_gone(new))


if __name__ == "__main__":
    main()
