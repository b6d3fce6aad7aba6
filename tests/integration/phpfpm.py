"""A real php-fpm (Debian's php8.2-fpm) for the FastCGI integration tests.

PhpFpm writes a php-fpm config into a directory (pid file, error log, access log and one static
[www] pool listening on DIR/php.sock), starts `php-fpm8.2 --nodaemonize --fpm-config FILE` in its
own process group, waits until it logs that it is ready, and stops it (SIGQUIT, then SIGKILL for
the whole group) so that no master or child outlives a test. kill() SIGKILLs master and children
at once (a back end that dies mid-request); start() again restarts it on the same socket.

fastcgi_request() is a minimal FastCGI client, so that php-fpm and the PHP scripts can be checked
on their own, without the server under test in between.
"""

import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import time

PHP_FPM_BIN = os.environ.get("PHP_FPM_BIN") or "/usr/sbin/php-fpm8.2"
SCRIPTS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "php")

START_TIMEOUT = 10.0
STOP_TIMEOUT = 5.0
READY_MARKER = b"ready to handle connections"


def available():
    """True when the php-fpm binary is installed (scripts/install-deps.sh test installs it)."""
    return os.access(PHP_FPM_BIN, os.X_OK)


def _become_subreaper():
    """Orphaned php-fpm workers (after a SIGKILL of their master) are re-parented to this process
    instead of init, so that _kill_group can reap them at once rather than leave zombies."""
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        PR_SET_CHILD_SUBREAPER = 36
        libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _group_members(pgid):
    """Live (non-zombie) processes in process group `pgid`, from /proc."""
    members = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        # Fields after the parenthesised command name: state ppid pgrp ...
        fields = stat[stat.rfind(b")") + 2:].split()
        if len(fields) >= 3 and int(fields[2]) == pgid and fields[0] != b"Z":
            members.append(int(entry))
    return members


class PhpFpm:
    """One php-fpm master with a static pool of `children` workers, on DIR/php.sock.

    extra_pool: more lines for the [www] section (e.g. "request_terminate_timeout = 5s").
    """

    def __init__(self, directory, children=4, extra_pool="", name="php-fpm", tcp_port=None):
        self.dir = directory
        self.children = children
        self.name = name
        os.makedirs(directory, exist_ok=True)
        self.socket_path = os.path.join(directory, "php.sock")
        self.address = "unix:" + self.socket_path
        # tcp_port: listen on 127.0.0.1:PORT instead of the unix socket.
        self.tcp_port = tcp_port
        self.listen = f"127.0.0.1:{tcp_port}" if tcp_port else self.socket_path
        if tcp_port:
            self.address = self.listen
        self.config_path = os.path.join(directory, f"{name}.conf")
        self.pid_path = os.path.join(directory, f"{name}.pid")
        self.error_log_path = os.path.join(directory, f"{name}.log")
        self.access_log_path = os.path.join(directory, f"{name}.access.log")
        self.stdout_path = os.path.join(directory, f"{name}.stdout")
        self.proc = None
        self.starts = 0
        self._write_config(extra_pool)

    def _write_config(self, extra_pool):
        as_root = os.geteuid() == 0
        # As root, php-fpm wants a pool user: root itself (with --allow-to-run-as-root) keeps the
        # test's private 0700 temp directory readable by the workers.
        user = "user = root\ngroup = root\n" if as_root else ""
        text = f"""; written by tests/integration/phpfpm.py
[global]
pid = {self.pid_path}
error_log = {self.error_log_path}
log_level = notice
daemonize = no
; SIGQUIT: children get this long to finish their request before the master kills them.
process_control_timeout = 2s

[www]
{user}listen = {self.listen}
{'' if self.tcp_port else 'listen.mode = 0666'}
listen.backlog = 511
pm = static
pm.max_children = {self.children}
pm.max_requests = 0
access.log = {self.access_log_path}
access.format = "%m %r%Q%q %s %f"
clear_env = no
catch_workers_output = yes
decorate_workers_output = no
request_terminate_timeout = 0
php_admin_value[upload_max_filesize] = 64M
php_admin_value[post_max_size] = 64M
php_admin_value[memory_limit] = 256M
php_admin_flag[display_errors] = off
php_admin_flag[log_errors] = on
{extra_pool}
"""
        with open(self.config_path, "w") as f:
            f.write(text)

    # ---- lifecycle ----

    def _log_bytes(self):
        try:
            with open(self.error_log_path, "rb") as f:
                return f.read()
        except FileNotFoundError:
            return b""

    def start(self, timeout=START_TIMEOUT):
        if not available():
            raise RuntimeError(f"{PHP_FPM_BIN} is not installed (run scripts/install-deps.sh test)")
        if self.running():
            raise RuntimeError("php-fpm is already running")
        # A socket file left by a killed master: php-fpm would refuse to bind over it otherwise.
        if os.path.exists(self.socket_path):
            os.unlink(self.socket_path)
        ready_before = self._log_bytes().count(READY_MARKER)
        argv = [PHP_FPM_BIN, "--nodaemonize", "--fpm-config", self.config_path]
        if os.geteuid() == 0:
            argv.append("--allow-to-run-as-root")
        _become_subreaper()
        self._out = open(self.stdout_path, "ab")
        # Own process group (pgid = master pid): stop() and kill() reach the children too.
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=self._out,
                                     stderr=subprocess.STDOUT, cwd=self.dir,
                                     start_new_session=True)
        self.starts += 1
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._log_bytes().count(READY_MARKER) > ready_before and (
                    self.tcp_port or os.path.exists(self.socket_path)):
                return self
            if self.proc.poll() is not None:
                code = self.proc.returncode
                self.proc = None
                raise RuntimeError(f"php-fpm exited with status {code} before it was ready\n"
                                   f"--- log ---\n{self.log()[-3000:]}\n--- stdout ---\n"
                                   f"{self._read(self.stdout_path)[-3000:]}")
            time.sleep(0.01)
        self._kill_group()
        raise RuntimeError(f"php-fpm not ready within {timeout}s\n--- log ---\n{self.log()[-3000:]}")

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def worker_pids(self):
        """The pool's worker processes (the master's children)."""
        if not self.running():
            return []
        return [pid for pid in _group_members(self.proc.pid) if pid != self.proc.pid]

    def _kill_group(self):
        pgid = self.proc.pid
        workers = [pid for pid in _group_members(pgid) if pid != pgid]
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()
        # The orphaned workers come to us (see _become_subreaper): reap exactly those.
        deadline = time.monotonic() + STOP_TIMEOUT
        while time.monotonic() < deadline:
            for pid in workers:
                try:
                    os.waitpid(pid, os.WNOHANG)
                except ChildProcessError:
                    pass  # not ours (no subreaper support) or already reaped
            gone = not any(os.path.exists(f"/proc/{pid}") for pid in workers)
            if not _group_members(pgid) and (gone or time.monotonic() > deadline - STOP_TIMEOUT + 0.5):
                break
            time.sleep(0.01)
        self.proc = None

    def kill(self):
        """SIGKILL master and children at once (a back end that dies mid-request)."""
        if self.proc is not None:
            self._kill_group()
        self._close_out()

    def _close_out(self):
        if getattr(self, "_out", None) and not self._out.closed:
            self._out.close()

    def stop(self, timeout=STOP_TIMEOUT):
        """Graceful stop (SIGQUIT), then SIGKILL for whatever of the group is left.
        Returns the master's exit status (None when it was not running)."""
        if self.proc is None:
            return None
        pgid = self.proc.pid
        code = self.proc.poll()
        if code is None:
            self.proc.send_signal(signal.SIGQUIT)
            try:
                code = self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                code = None
        if code is None or _group_members(pgid):
            self._kill_group()
        self.proc = None
        self._close_out()
        return code

    def leftover_processes(self, pgid):
        return _group_members(pgid)

    # ---- what php-fpm saw ----

    @staticmethod
    def _read(path):
        try:
            with open(path, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except FileNotFoundError:
            return ""

    def log(self):
        return self._read(self.error_log_path)

    def access_lines(self):
        """php-fpm's access log: one "METHOD URI[?QUERY] STATUS SCRIPT_FILENAME" per request."""
        return self._read(self.access_log_path).splitlines()


# --------------------------------------------------------------------------------------------
# A minimal FastCGI client (responder role, one request per connection).
# --------------------------------------------------------------------------------------------

FCGI_BEGIN_REQUEST, FCGI_END_REQUEST, FCGI_PARAMS, FCGI_STDIN, FCGI_STDOUT, FCGI_STDERR = 1, 3, 4, 5, 6, 7


def start_for(test, children=2):
    """A php-fpm for one test (stopped at its cleanup) and a copy of the PHP test scripts to
    serve: (docroot, the PhpFpm, an [[upstream]] table named "php" that reaches it). php-fpm
    missing fails the test: the test step installs it."""
    if not available():
        test.fail(f"{PHP_FPM_BIN} is missing: run scripts/install-deps.sh test")
    root = os.path.join(test.tmp, "www")
    shutil.copytree(SCRIPTS_DIR, root)
    fpm = PhpFpm(os.path.join(test.tmp, "fpm"), children=children)
    test.addCleanup(fpm.stop)
    fpm.start()
    upstream = f'[[upstream]]\nname = "php"\n[[upstream.server]]\naddress = {json.dumps(fpm.address)}\n'
    return root, fpm, upstream


def fcgi_record(rtype, content, request_id=1):
    padding = (8 - len(content) % 8) % 8
    return struct.pack("!BBHHBB", 1, rtype, request_id, len(content), padding, 0) + content + b"\0" * padding


def _length(n):
    return struct.pack("!B", n) if n < 128 else struct.pack("!I", n | 0x80000000)


def _encode_params(params):
    out = b""
    for name, value in params.items():
        name, value = name.encode(), str(value).encode()
        out += _length(len(name)) + _length(len(value)) + name + value
    return out


def _stream(rtype, data):
    records = b""
    for i in range(0, len(data), 65535):
        records += fcgi_record(rtype, data[i:i + 65535])
    return records + fcgi_record(rtype, b"")


def fastcgi_request(socket_path, params, body=b"", timeout=5.0):
    """Send one request; returns (stdout bytes, stderr bytes, app status) after FCGI_END_REQUEST."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        sock.connect(socket_path)
        begin = struct.pack("!HB5x", 1, 0)  # responder, no FCGI_KEEP_CONN
        sock.sendall(fcgi_record(FCGI_BEGIN_REQUEST, begin) + _stream(FCGI_PARAMS, _encode_params(params))
                     + _stream(FCGI_STDIN, body))
        buf = b""
        stdout, stderr = b"", b""
        while True:
            while len(buf) >= 8:
                _, rtype, _, clen, plen, _ = struct.unpack("!BBHHBB", buf[:8])
                if len(buf) < 8 + clen + plen:
                    break
                content = buf[8:8 + clen]
                buf = buf[8 + clen + plen:]
                if rtype == FCGI_STDOUT:
                    stdout += content
                elif rtype == FCGI_STDERR:
                    stderr += content
                elif rtype == FCGI_END_REQUEST:
                    return stdout, stderr, struct.unpack("!I", content[:4])[0]
            chunk = sock.recv(65536)
            if not chunk:
                raise ConnectionError(f"php-fpm closed the connection before FCGI_END_REQUEST; "
                                      f"stdout so far {stdout[:300]!r}")
            buf += chunk
    finally:
        sock.close()


def script_params(root, uri, method="GET", query="", body=b"", content_type=""):
    """The CGI parameters php-fpm needs to run ROOT/URI."""
    params = {
        "SCRIPT_FILENAME": os.path.join(root, uri.lstrip("/")),
        "SCRIPT_NAME": uri,
        "REQUEST_URI": uri + ("?" + query if query else ""),
        "DOCUMENT_URI": uri,
        "DOCUMENT_ROOT": root,
        "QUERY_STRING": query,
        "REQUEST_METHOD": method,
        "SERVER_PROTOCOL": "HTTP/1.1",
        "GATEWAY_INTERFACE": "CGI/1.1",
        "REDIRECT_STATUS": "200",
        "SERVER_NAME": "localhost",
        "SERVER_PORT": "80",
        "REMOTE_ADDR": "127.0.0.1",
    }
    if body or method == "POST":
        params["CONTENT_LENGTH"] = str(len(body))
    if content_type:
        params["CONTENT_TYPE"] = content_type
    return params
