"""Shared code for Peregrine's integration tests.

Every test drives the real server binary (PEREGRINE_BIN) with real clients: http.client, raw
sockets, curl and ab. A server is started per test on an ephemeral port (127.0.0.1:0); the port is
read from the `listening on 127.0.0.1:PORT` line the server logs. In tearDown every server a test
started is stopped with SIGTERM and must exit with status 0 and leave no sanitizer report.

Run a file directly: /usr/bin/python3 tests/integration/test_static.py [-v] [TestClass.test_name]
"""

import email.utils
import hashlib
import http.client
import json
import mmap
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

PEREGRINE_BIN = os.environ.get("PEREGRINE_BIN") or os.path.join(REPO, "build/release/peregrine")
HELLO_BIN = os.environ.get("HELLO_BIN") or os.path.join(os.path.dirname(PEREGRINE_BIN), "hello")
# The integration tier's second pass (scripts/run-tests.sh): every peregrine the harness starts
# gets --event-backend with this value ("io_uring" makes a server that cannot have it fail to
# start, so the pass cannot quietly run on epoll).
EVENT_BACKEND = os.environ.get("PEREGRINE_EVENT_BACKEND", "")

LISTEN_RE = re.compile(rb"listening on 127\.0\.0\.1:(\d+)")
SANITIZER_MARKERS = (b"AddressSanitizer", b"LeakSanitizer", b"UndefinedBehaviorSanitizer",
                     b"ThreadSanitizer", b"runtime error")

START_TIMEOUT = 10.0
STOP_TIMEOUT = 10.0


def q(text):
    """A TOML basic string for `text` (JSON string escapes are valid TOML)."""
    return json.dumps(str(text))


def sha256(data):
    return hashlib.sha256(data).hexdigest()


def write_tree(root, files):
    """Create files under root. `files` maps relative paths to bytes or str contents."""
    for rel, content in files.items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if isinstance(content, str):
            content = content.encode()
        with open(path, "wb") as f:
            f.write(content)


# A site with [[site.route]] tables serves only what its routes match; this last route serves the
# site root for everything else (inheriting the site's static options).
STATIC_FALLBACK = '\n[[site.route]]\nprefix = "/"\n'


def h2c(config_text):
    """make_config's text with its listener switched to h2c (HTTP/2 with prior knowledge, and
    HTTP/1.1 still served on it)."""
    return config_text.replace('listen = ["127.0.0.1:0"]',
                               'listen = [{ address = "127.0.0.1:0", http2 = true }]', 1)


def make_config(root, *, top="", limits="", site="", routes="", extra_sites="", workers=1,
                access_log="off", hosts=("localhost",)):
    """A TOML config with one default site rooted at `root`, listening on 127.0.0.1:0.

    top: top-level keys; limits: keys of [limits]; site: more keys of the [[site]];
    routes: [[site.route]] tables of that site; extra_sites: further [[site]] tables.
    """
    hosts_toml = "[" + ", ".join(q(h) for h in hosts) + "]"
    return (
        f'listen = ["127.0.0.1:0"]\n'
        f"workers = {workers}\n"
        f"{top}\n"
        f"[limits]\n{limits}\n\n"
        f"[[site]]\n"
        f"hosts = {hosts_toml}\n"
        f"default = true\n"
        f"root = {q(root)}\n"
        f"access_log = {q(access_log)}\n"
        f"{site}\n"
        f"{routes}\n"
        f"{extra_sites}\n"
    )


class ServerProcess:
    """One running server process. stdout and stderr go to files in `workdir`."""

    def __init__(self, argv, workdir, log_path=None, name="server", env=None):
        self.argv = list(argv)
        self.env = {**os.environ, **env} if env else None
        # The tier's backend, unless the test names one itself: it tests that one.
        if EVENT_BACKEND and self.argv and self.argv[0] == PEREGRINE_BIN and "--event-backend" not in self.argv:
            self.argv += ["--event-backend", EVENT_BACKEND]
        self.workdir = workdir
        self.name = name
        self.stdout_path = os.path.join(workdir, f"{name}.stdout")
        self.stderr_path = os.path.join(workdir, f"{name}.stderr")
        # Where the `listening on` line is expected (stderr unless error_log points elsewhere).
        self.log_path = log_path or self.stderr_path
        self.proc = None
        self.port = None
        self.exit_code = None
        self.expect_exit = False  # set once a test stops or waits for the server itself

    @property
    def pid(self):
        return self.proc.pid

    def start(self, timeout=START_TIMEOUT):
        if not os.path.exists(self.argv[0]):
            raise RuntimeError(f"server binary {self.argv[0]} does not exist (build it first, "
                               f"or set PEREGRINE_BIN / HELLO_BIN)")
        self._out = open(self.stdout_path, "wb")
        self._err = open(self.stderr_path, "wb")
        self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=self._out,
                                     stderr=self._err, cwd=self.workdir, env=self.env)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            m = LISTEN_RE.search(self._read(self.log_path))
            if m:
                self.port = int(m.group(1))
                if self.port != 0:
                    return self
            if self.proc.poll() is not None:
                self.expect_exit = True  # reported here; tearDown need not repeat it
                self._close_files()
                raise RuntimeError(
                    f"{self.name} exited with status {self.proc.returncode} before listening: "
                    f"{self.argv}\n--- stderr ---\n{self.stderr()}\n--- stdout ---\n{self.stdout()}")
            time.sleep(0.02)
        self.proc.kill()
        self.proc.wait()
        self.expect_exit = True
        self._close_files()
        raise RuntimeError(f"{self.name} did not log 'listening on 127.0.0.1:PORT' within "
                           f"{timeout}s: {self.argv}\n--- stderr ---\n{self.stderr()}")

    @staticmethod
    def _read(path):
        try:
            with open(path, "rb") as f:
                return f.read()
        except FileNotFoundError:
            return b""

    def stderr(self):
        return self._read(self.stderr_path).decode("utf-8", "replace")

    def stderr_once_it_has(self, *texts, timeout=5.0):
        """stderr once every one of `texts` is in it, or as it is after `timeout` (the caller's
        assertIn then fails with it). The error log has its own writer thread, so a line a
        worker logged before answering may reach the file after the client has its answer."""
        return self._stderr_once(lambda log: all(t in log for t in texts), timeout)

    def stderr_once_it_counts(self, text, count, timeout=5.0):
        """stderr once `text` is in it `count` times or more, or as it is after `timeout` (for
        the same reason as stderr_once_it_has)."""
        return self._stderr_once(lambda log: log.count(text) >= count, timeout)

    def _stderr_once(self, done, timeout):
        deadline = time.monotonic() + timeout
        while True:
            log = self.stderr()
            if done(log) or time.monotonic() > deadline:
                return log
            time.sleep(0.02)

    def stdout(self):
        return self._read(self.stdout_path).decode("utf-8", "replace")

    def listening_port(self, address, timeout=5.0):
        """The port of the listener on `address` ("127.0.0.2", "[::1]"). The server logs each
        listener as it opens it and start() waits only for the first, so wait for this one."""
        pattern = re.compile(rb"listening on " + re.escape(address.encode()) + rb":(\d+)")
        deadline = time.monotonic() + timeout
        while True:
            m = pattern.search(self._read(self.log_path))
            if m and int(m.group(1)) != 0:
                return int(m.group(1))
            if time.monotonic() >= deadline:
                raise AssertionError(f"{self.name} did not log 'listening on {address}:PORT' "
                                     f"within {timeout}s:\n{self.stderr()}")
            time.sleep(0.02)

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def wait(self, timeout):
        """Wait for exit; returns the exit status, or None if still running after `timeout`."""
        self.expect_exit = True
        try:
            self.exit_code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None
        self._close_files()
        return self.exit_code

    def stop(self, sig=signal.SIGTERM, timeout=STOP_TIMEOUT):
        """Send `sig` and wait; returns the exit status (negative: killed by that signal). A server
        that does not exit in time is SIGKILLed and reported as -9."""
        if self.proc is None:
            return None
        self.expect_exit = True
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            if self.wait(timeout) is None:
                self.proc.kill()
                self.proc.wait()
                self.exit_code = -9
        else:
            self.exit_code = self.proc.returncode
        self._close_files()
        return self.exit_code

    # Defined after stop(): inside the class body this name shadows the signal module.
    def signal(self, sig):
        self.proc.send_signal(sig)

    def sanitizer_report(self):
        data = self._read(self.stderr_path) + self._read(self.stdout_path)
        if self.log_path != self.stderr_path:
            data += self._read(self.log_path)
        for marker in SANITIZER_MARKERS:
            if marker in data:
                return data.decode("utf-8", "replace")
        return None

    def _close_files(self):
        for f in (getattr(self, "_out", None), getattr(self, "_err", None)):
            if f and not f.closed:
                f.close()


# --------------------------------------------------------------------------------------------
# Raw HTTP client: exact bytes on the wire, pipelining, and observing connection close.
# --------------------------------------------------------------------------------------------

class RawResponse:
    def __init__(self, version, status, reason, headers, body, head_bytes):
        self.version = version
        self.status = status
        self.reason = reason
        self.headers = headers  # list of (name, value), in order, names as sent
        self.body = body
        self.head_bytes = head_bytes

    def header(self, name, default=None):
        name = name.lower()
        for k, v in self.headers:
            if k.lower() == name:
                return v
        return default

    def header_all(self, name):
        name = name.lower()
        return [v for k, v in self.headers if k.lower() == name]

    def connection_tokens(self):
        tokens = set()
        for v in self.header_all("connection"):
            tokens.update(t.strip().lower() for t in v.split(",") if t.strip())
        return tokens

    def __repr__(self):
        return (f"<RawResponse {self.version} {self.status} {self.reason!r} "
                f"headers={self.headers} body={self.body[:200]!r}>")


class ConnectionClosed(Exception):
    pass


class RawClient:
    """A TCP connection speaking bytes; reads responses one at a time, in order."""

    def __init__(self, port, host="127.0.0.1", timeout=5.0, rcvbuf=None):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.settimeout(timeout)
        self.sock.connect((host, port))
        self.buf = bytearray()
        self.eof = False
        self.timeout = timeout

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def send(self, data):
        if isinstance(data, str):
            data = data.encode("latin-1")
        self.sock.sendall(data)

    def _fill(self, timeout=None):
        """Read more bytes into buf. Returns False on EOF (or reset)."""
        if self.eof:
            return False
        self.sock.settimeout(self.timeout if timeout is None else timeout)
        try:
            chunk = self.sock.recv(262144)
        except ConnectionResetError:
            chunk = b""
        if not chunk:
            self.eof = True
            return False
        self.buf += chunk
        return True

    def _read_line(self):
        while b"\r\n" not in self.buf:
            if not self._fill():
                raise ConnectionClosed(f"connection closed while reading a line; got {bytes(self.buf)!r}")
        idx = self.buf.find(b"\r\n")
        line = bytes(self.buf[:idx])
        del self.buf[:idx + 2]
        return line

    def _read_exact(self, n):
        while len(self.buf) < n:
            if not self._fill():
                raise ConnectionClosed(f"connection closed with {len(self.buf)} of {n} body bytes")
        data = bytes(self.buf[:n])
        del self.buf[:n]
        return data

    def read_head(self):
        while b"\r\n\r\n" not in self.buf:
            if not self._fill():
                raise ConnectionClosed(f"connection closed before a response head; got {bytes(self.buf)!r}")
        idx = self.buf.find(b"\r\n\r\n")
        head = bytes(self.buf[:idx])
        del self.buf[:idx + 4]
        lines = head.split(b"\r\n")
        m = re.match(rb"^(HTTP/\d\.\d) (\d{3})(?: (.*))?$", lines[0])
        if not m:
            raise AssertionError(f"malformed status line {lines[0]!r}")
        headers = []
        for line in lines[1:]:
            name, sep, value = line.partition(b":")
            if not sep or not name or name != name.strip():
                raise AssertionError(f"malformed response header line {line!r}")
            headers.append((name.decode("latin-1"), value.strip().decode("latin-1")))
        return (m.group(1).decode(), int(m.group(2)), (m.group(3) or b"").decode("latin-1"),
                headers, head + b"\r\n\r\n")

    def read_response(self, head_request=False, timeout=None):
        """Read one response. 1xx responses are returned as they come (the caller reads again)."""
        if timeout is not None:
            self.timeout = timeout
        version, status, reason, headers, head = self.read_head()
        resp = RawResponse(version, status, reason, headers, b"", head)
        if status < 200 or status in (204, 304) or head_request:
            return resp
        te = resp.header("transfer-encoding")
        cl = resp.header("content-length")
        if te is not None and te.lower().strip() == "chunked":
            body = b""
            while True:
                size_line = self._read_line()
                size = int(size_line.split(b";")[0].strip(), 16)
                if size == 0:
                    while self._read_line() != b"":
                        pass
                    break
                body += self._read_exact(size)
                if self._read_exact(2) != b"\r\n":
                    raise AssertionError("chunk data not followed by CRLF")
            resp.body = body
        elif cl is not None:
            resp.body = self._read_exact(int(cl))
        else:
            while self._fill():
                pass
            resp.body, self.buf = bytes(self.buf), bytearray()
        return resp

    def read_final_response(self, head_request=False):
        """Skip any 1xx interim responses."""
        while True:
            resp = self.read_response(head_request=head_request)
            if resp.status >= 200:
                return resp

    def request(self, method, path, headers=None, body=b"", version="HTTP/1.1", host="localhost"):
        """Send one well-formed request and read its response."""
        self.send(build_request(method, path, headers, body, version, host))
        return self.read_final_response(head_request=(method == "HEAD"))

    def wait_closed(self, timeout=2.0):
        """True if the server closes (EOF or RST) within `timeout` with no further bytes sent.
        Bytes that do arrive are left in self.buf (and the result is False)."""
        deadline = time.monotonic() + timeout
        while True:
            if self.buf:
                return False
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            try:
                if not self._fill(timeout=remaining):
                    return True
            except (socket.timeout, TimeoutError):
                return False

    def read_until_close(self, timeout=5.0):
        """All bytes until EOF; raises AssertionError if the connection stays open."""
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"connection still open after {timeout}s; got {bytes(self.buf)[:300]!r}")
            try:
                if not self._fill(timeout=remaining):
                    data, self.buf = bytes(self.buf), bytearray()
                    return data
            except (socket.timeout, TimeoutError):
                raise AssertionError(f"connection still open after {timeout}s; got {bytes(self.buf)[:300]!r}")


def check_answered_beside_a_stream(test, port, stream_path, small_path, small_body):
    """While one client takes a gzip stream of `stream_path` (a back end faster than the
    encoder), three requests for `small_path` get `small_body`, and the stream still flows.
    The exchanges used to read until the socket was empty, which such a back end never let
    it be: the worker served that one stream and nothing else. Now each reads a turn's worth
    (upstream::kReadTurnBytes) and lets the others have theirs."""
    stream = socket.create_connection(("127.0.0.1", port), timeout=30)
    stream.sendall(b"GET " + stream_path.encode() +
                   b" HTTP/1.1\r\nHost: localhost\r\nAccept-Encoding: gzip\r\n\r\n")
    received = [0]

    def drain():
        try:
            while data := stream.recv(65536):
                received[0] += len(data)
        except OSError:
            pass  # closed below

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 30
        while received[0] < 200_000:  # the compressed stream is flowing
            test.assertLess(time.monotonic(), deadline, f"only {received[0]} bytes came")
            time.sleep(0.01)
        for i in range(3):
            with RawClient(port, timeout=10) as c:
                started = time.monotonic()
                try:
                    resp = c.request("GET", small_path)
                except (AssertionError, OSError) as e:
                    test.fail(f"request {i} during the stream, after "
                              f"{time.monotonic() - started:.1f} s: {e}")
            test.assertEqual((resp.status, resp.body), (200, small_body), f"request {i}")
        flowed = received[0]
        time.sleep(0.3)
        test.assertGreater(received[0], flowed, "the stream stopped")
    finally:
        stream.shutdown(socket.SHUT_RDWR)
        stream.close()
        reader.join(10)


# For a server whose RSS a test bounds. Under AddressSanitizer, freed blocks wait in a quarantine
# (256 MB by default) before they are reused, so RSS would count memory the server gave back.
def with_asan_options(option):
    """An environment for ServerProcess: the tier's ASAN_OPTIONS with `option` last (it wins)."""
    return {"ASAN_OPTIONS": ":".join(filter(None, [os.environ.get("ASAN_OPTIONS", ""), option]))}


MEMORY_MEASURED_ENV = with_asan_options("quarantine_size_mb=0")


def serve_each_connection(listener, serve):
    """Accepts on `listener`, each connection served by serve(conn) in a thread of its own: a raw
    peer for tests that need one the real peers cannot play. Returns stop(), for addCleanup."""
    def accept():
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=serve, args=(conn,), daemon=True).start()
    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    return lambda: stop_listening(listener, thread)


def stop_listening(listener, accept_thread):
    """Closes a listener that `accept_thread` may be blocked on. close() alone would leave that
    accept(2) holding the socket, still listening on its port, and a later connection to the port
    would land in a stale peer; shutdown() wakes the accept (EINVAL) and stops the listening."""
    try:
        listener.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    accept_thread.join(10)
    listener.close()


def built_with_asan(binary=PEREGRINE_BIN):
    """Whether `binary` links AddressSanitizer's runtime, whose redzones around each block and
    shadow memory (an eighth of what is touched) add to every RSS figure."""
    with open(binary, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        return m.find(b"libasan.so") >= 0


def proc_status_kb(pid, field="VmRSS"):
    """A size from /proc/PID/status, in KB: VmRSS (resident now) or VmHWM (the peak)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise AssertionError(f"no {field} in /proc/{pid}/status")


def lines_held_back(log_text):
    """What an error log says it held back (core/log_throttle.h): the count carried by the line
    after a stretch held back ("[N similar lines suppressed]"), and by a closing line of its own."""
    return sum(int(n) for n in re.findall(r"(\d+) similar lines suppressed", log_text))


def build_request(method, path, headers=None, body=b"", version="HTTP/1.1", host="localhost"):
    if isinstance(body, str):
        body = body.encode()
    lines = [f"{method} {path} {version}"]
    hdrs = list(headers.items()) if isinstance(headers, dict) else list(headers or [])
    names = {k.lower() for k, _ in hdrs}
    if host is not None and "host" not in names:
        lines.append(f"Host: {host}")
    if body and "content-length" not in names and "transfer-encoding" not in names:
        lines.append(f"Content-Length: {len(body)}")
    for k, v in hdrs:
        lines.append(f"{k}: {v}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def parse_http_date(value):
    return email.utils.parsedate_to_datetime(value)


# --------------------------------------------------------------------------------------------
# The TestCase base class.
# --------------------------------------------------------------------------------------------

class ServerTestCase(unittest.TestCase):
    """Gives each test a temp dir (self.tmp) and starts servers that tearDown stops and checks."""

    maxDiff = 4000

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="peregrine-it-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self._servers = []

    def tearDown(self):
        problems = []
        for srv in self._servers:
            if srv.proc is None:
                continue
            was_running = srv.running()
            if not was_running and not srv.expect_exit:
                problems.append(f"{srv.name} {srv.argv} exited during the test with status "
                                f"{srv.proc.returncode}\n--- stderr (tail) ---\n{srv.stderr()[-3000:]}")
            code = srv.stop()
            if was_running and code != 0:
                problems.append(f"{srv.name} {srv.argv} exit status on SIGTERM was {code}, "
                                f"expected 0\n--- stderr (tail) ---\n{srv.stderr()[-3000:]}")
            report = srv.sanitizer_report()
            if report:
                problems.append(f"{srv.name} sanitizer report:\n{report[-6000:]}")
        if problems:
            self.fail("\n".join(problems))

    def stop_ok(self, srv, sig=signal.SIGTERM, timeout=STOP_TIMEOUT):
        """Stop `srv` with `sig`; it must exit with status 0 within `timeout`."""
        code = srv.stop(sig, timeout)
        self.assertEqual(code, 0, f"exit status after {signal.Signals(sig).name} was {code} (-9: did not "
                                  f"exit within {timeout}s)\n--- stderr (tail) ---\n{srv.stderr()[-3000:]}")

    # ---- starting servers ----

    def make_root(self, files=None, name="www"):
        root = os.path.join(self.tmp, name)
        os.makedirs(root, exist_ok=True)
        write_tree(root, files or {})
        return root

    def start_argv(self, argv, log_path=None, name="peregrine", env=None):
        srv = ServerProcess(argv, self.tmp, log_path=log_path, name=f"{name}{len(self._servers)}",
                            env=env)
        self._servers.append(srv)
        srv.start()
        return srv

    def start_quick(self, root, workers=1, access_log="off", extra=()):
        argv = [PEREGRINE_BIN, "--listen", "127.0.0.1:0", "--root", root]
        if workers is not None:
            argv += ["--workers", str(workers)]
        if access_log is not None:
            argv += ["--access-log", access_log]
        return self.start_argv(argv + list(extra))

    def count_syscalls(self, pid, calls, attached_by, request, times):
        """Runs `request()` `times` times with strace attached to every thread of process `pid`;
        returns ({call: how often it was made meanwhile}, the trace's last 2,000 characters).
        strace attaches on its own time: `request()` repeats until a call of `attached_by` shows."""
        strace = require_tool("strace", "Debian package strace")
        trace = os.path.join(self.tmp, "strace.out")

        def counted():
            if not os.path.exists(trace):
                return dict.fromkeys(calls, 0)
            with open(trace) as f:
                text = f.read()
            return {call: text.count(call + "(") for call in calls}

        request()
        tracer = subprocess.Popen([strace, "-f", "-qq", "-e", "trace=" + ",".join(calls), "-o", trace,
                                   "-p", str(pid)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            deadline = time.monotonic() + 10
            while True:
                request()
                before = counted()
                if before[attached_by] or time.monotonic() > deadline:
                    break
                time.sleep(0.1)
            self.assertGreater(before[attached_by], 0, f"strace saw no {attached_by}")
            for _ in range(times):
                request()
        finally:
            tracer.send_signal(signal.SIGINT)
            tracer.wait(timeout=10)
        after = counted()
        with open(trace) as f:
            tail = f.read()[-2000:]
        return {call: after[call] - before[call] for call in calls}, tail

    def assert_sends_go_with_the_wait(self, pid, request, requests=50):
        """Runs `request()` `requests` times under strace (count_syscalls) and checks that the
        server sent its requests to the back end through the io_uring ring: fewer than one
        send(2) in ten requests (with send(2): one per request), while it still read every answer
        with recv(2), which also shows that strace saw the requests."""
        sends = ("sendto", "sendmsg", "write", "writev")
        counts, tail = self.count_syscalls(pid, sends + ("recvfrom",), "recvfrom", request, requests)
        self.assertGreaterEqual(counts["recvfrom"], requests, tail)
        self.assertLess(sum(counts[call] for call in sends), requests * 0.1, tail)

    def write_config(self, text, name="peregrine.toml"):
        path = os.path.join(self.tmp, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def start_config(self, text, name="peregrine.toml", log_path=None, env=None):
        path = self.write_config(text, name)
        srv = self.start_argv([PEREGRINE_BIN, "-c", path], log_path=log_path, env=env)
        srv.config_path = path
        return srv

    # ---- clients ----

    def http(self, port, method, path, headers=None, body=None, timeout=5.0):
        """One request on a new http.client connection: (status, HTTPMessage headers, body)."""
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            resp = conn.getresponse()
            return resp.status, resp.headers, resp.read()
        finally:
            conn.close()

    def get(self, port, path, headers=None):
        return self.http(port, "GET", path, headers=headers)

    def raw(self, port, timeout=5.0, rcvbuf=None):
        client = RawClient(port, timeout=timeout, rcvbuf=rcvbuf)
        self.addCleanup(client.close)
        return client

    def raw_request(self, port, method, path, headers=None, body=b"", version="HTTP/1.1",
                    host="localhost"):
        with RawClient(port) as c:
            return c.request(method, path, headers, body, version, host)

    def assert_serving(self, srv, path="/", msg=""):
        """The server still answers a plain request (it did not crash or wedge)."""
        self.assertTrue(srv.running(), f"server exited ({srv.proc.returncode}) {msg}\n"
                                       f"--- stderr ---\n{srv.stderr()[-3000:]}")
        status, _, _ = self.get(srv.port, path)
        self.assertLess(status, 500, f"server answers {status} to GET {path} {msg}")

    def load_losing_nothing(self, url, disturb, connections=64, seconds=4):
        """wrk on `url` with `connections` keep-alive connections for `seconds` while `disturb()`
        runs in this thread; fails unless every request got a 2xx or 3xx answer within wrk's
        --timeout. Returns the number of requests."""
        wrk = subprocess.Popen([require_tool("wrk", "wrk"), "-t", "1", "-c", str(connections),
                                "-d", f"{seconds}s", "--timeout", "5s", url],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            disturb()
            out, _ = wrk.communicate(timeout=seconds + 30)
        finally:
            if wrk.poll() is None:
                wrk.kill()
                wrk.wait()
        self.assertEqual(wrk.returncode, 0, out)
        requests = re.search(r"(\d+) requests in", out)
        self.assertIsNotNone(requests, out)
        self.assertNotIn("Socket errors", out, out)  # connect, read, write or timeout
        self.assertNotIn("Non-2xx or 3xx responses", out, out)
        return int(requests.group(1))

    def wait_for(self, predicate, timeout=3.0, interval=0.05, msg="condition"):
        deadline = time.monotonic() + timeout
        while True:
            value = predicate()
            if value:
                return value
            if time.monotonic() >= deadline:
                self.fail(f"timed out after {timeout}s waiting for {msg}")
            time.sleep(interval)


# --------------------------------------------------------------------------------------------
# Skips, and what the test runner (scripts/run-tests.sh) learns of each case.
#
# A skip is either by design (not root, no IPv6 loopback: the test cannot mean anything here) or
# a tool or package missing from this machine. The second kind goes through require_tool(): a skip
# on a developer's machine, a failure under CI=true, because CI installs everything the tests need
# and a missing tool there would silently turn a tier off.
# --------------------------------------------------------------------------------------------

# CTest's SKIP_RETURN_CODE for the integration tests (CMakeLists.txt): a file whose every case
# was skipped is reported as skipped, not as passed.
SKIP_RETURN_CODE = 77


def in_ci():
    return os.environ.get("CI", "").lower() in ("true", "1")


def require_tool(name, package, path=None):
    """The path of the program `name` (looked up in PATH, or `path` if given) a test needs.

    Missing: unittest.SkipTest("missing tool: ..."), or under CI=true an AssertionError, which
    fails the test (or, raised in setUpClass, every test of the class)."""
    if path:
        found = path if os.access(path, os.X_OK) else None
    else:
        found = shutil.which(name)
    if found:
        return found
    missing(f"missing tool: {path or name} ({package})")


def missing(what):
    """A tool, module or package the test needs is absent (`what` says which, and its Debian
    package): unittest.SkipTest, or under CI=true an AssertionError."""
    if in_ci():
        raise AssertionError(f"{what}; CI=true, and CI installs every package the tests need")
    raise unittest.SkipTest(what)


class _RecordingResult(unittest.TextTestResult):
    """Keeps each case's outcome for the runner's per-case count (see main())."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.outcomes = {}  # test id -> (passed|failed|skipped, reason); a failure is never undone

    def _note(self, test, status, reason=""):
        if self.outcomes.get(test.id(), ("",))[0] != "failed":
            self.outcomes[test.id()] = (status, reason)

    @staticmethod
    def _why(err):
        lines = str(err[1]).strip().splitlines()
        return f"{err[0].__name__}: {lines[0] if lines else ''}"

    def addSuccess(self, test):
        super().addSuccess(test)
        self._note(test, "passed")

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._note(test, "failed", self._why(err))

    def addError(self, test, err):
        super().addError(test, err)
        self._note(test, "failed", self._why(err))

    def addSubTest(self, test, subtest, err):
        super().addSubTest(test, subtest, err)
        if err is not None:
            self._note(test, "failed", self._why(err))

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._note(test, "skipped", reason)

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self._note(test, "passed")

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self._note(test, "failed", "unexpected success")


def write_outcomes(outcomes):
    """One line per case, "status<TAB>test id<TAB>reason", in $PEREGRINE_TEST_RESULTS/<CTest name>.tsv
    when the runner asked for it: it then counts this file's cases instead of the one CTest test."""
    results_dir = os.environ.get("PEREGRINE_TEST_RESULTS")
    if not results_dir:
        return
    name = os.environ.get("PEREGRINE_CTEST_NAME") or os.path.splitext(os.path.basename(sys.argv[0]))[0]
    path = os.path.join(results_dir, name + ".tsv")
    with open(path + ".tmp", "w") as f:
        for test_id, (status, reason) in outcomes.items():
            # The file is run as a script: its module is __main__, which the CTest name says better.
            test_id = test_id.replace("__main__.", "")
            f.write(f"{status}\t{test_id}\t{' '.join(reason.split())}\n")
    os.replace(path + ".tmp", path)  # a file the runner sees is a whole one


def main():
    """unittest.main for an integration test file. Exit status: 1 if a case failed, otherwise
    SKIP_RETURN_CODE if every case was skipped, otherwise 0."""
    program = unittest.main(verbosity=2, exit=False,
                            testRunner=unittest.TextTestRunner(verbosity=2, resultclass=_RecordingResult))
    outcomes = program.result.outcomes
    if not outcomes:
        # A file whose cases were never collected (an import gone wrong, a selection that names
        # nothing) would otherwise count as nothing at all, which reads as a pass.
        outcomes = {os.path.basename(sys.argv[0]): ("failed", "no test case was collected")}
        print("FAILED: no test case was collected", file=sys.stderr)
        write_outcomes(outcomes)
        sys.exit(1)
    write_outcomes(outcomes)
    statuses = [status for status, _ in outcomes.values()]
    if not program.result.wasSuccessful():
        sys.exit(1)
    sys.exit(SKIP_RETURN_CODE if statuses and "passed" not in statuses else 0)
